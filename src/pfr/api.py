"""The Python API behind the CLI: build requests, run a model, compute metrics.

A notebook user calls these directly::

    import pfr
    reqs = pfr.build("trec", panel="main", data_dir="../shared/data")
    summary = pfr.run("baseline:oracle", reqs, store="runs/oracle")
    pfr.metrics("runs/oracle")
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pfr.data.loaders import UserFormat, load_dataset
from pfr.data.panels import build_panel
from pfr.design.builder import build_requests
from pfr.design.types import Design, Request
from pfr.errors import DataError, OutputError
from pfr.models.base import Backend
from pfr.models.registry import load_model
from pfr.run.runner import RunSummary, run_requests
from pfr.run.store import Store, StoredResult


def build(
    dataset: str,
    panel: str = "main",
    design: Design | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    seed: int = 0,
    fmt: UserFormat | None = None,
) -> list[Request]:
    """The requests of one panel of a dataset under one design, in panel order (4 per text)."""
    ds = load_dataset(dataset, data_dir, fmt)
    examples = build_panel(ds, panel, seed=seed, limit=limit)
    return build_requests(ds, examples, design or Design(seed=seed))


def atomic_write(path: str | os.PathLike[str], lines: Iterable[str]) -> None:
    """Write lines to ``path`` through a temporary file and a rename: never half a file.

    ``-`` writes to standard output. A folder that cannot be created or written, or a full disk,
    is a :class:`~pfr.errors.OutputError` naming the path (and no temporary file is left behind).
    """
    if str(path) == "-":
        for line in lines:
            sys.stdout.write(line)
            sys.stdout.write("\n")
        sys.stdout.flush()
        return
    dest = Path(path)
    if dest.is_dir():
        raise OutputError(f"{dest}: is a folder; give a file name to write")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{dest.parent}: cannot create the output folder ({exc.strerror or exc})") from None
    # os.open with mode 0o666 (not mkstemp's 0o600) so the file gets the user's umask like any other
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise OutputError(f"{dest}: cannot write here ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line)
                f.write("\n")
        os.replace(tmp, dest)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        full = " (the disk is full)" if exc.errno == errno.ENOSPC else ""
        raise OutputError(f"{dest}: cannot write{full}: {exc.strerror or exc}; nothing was written") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_requests(requests: Iterable[Request], path: str | os.PathLike[str]) -> None:
    """Write requests as JSONL, format version 2 (:mod:`pfr.design.jsonl`: each inventory once)."""
    from pfr.design.jsonl import encode

    atomic_write(path, encode(requests))


def read_requests(path: str | os.PathLike[str], encoding: str = "utf-8") -> list[Request]:
    """Requests from a JSONL file written by :func:`write_requests` / ``pfr build``.

    Every line is checked (fields present, ``expected`` and ``fallback_index`` in range, one
    fallback option): a hand-edited file fails at its line, naming the field.
    """
    from pfr.data.loaders import read_text
    from pfr.design.jsonl import Decoder, FormatError
    from pfr.run.store import request_problem

    out = []
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: file not found")
    decoder = Decoder()
    for n, line in enumerate(read_text(p, encoding).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            got = decoder.feed(json.loads(line))
        except FormatError as exc:
            raise DataError(f"{p}: line {n}: {exc}") from None
        except (json.JSONDecodeError, TypeError, KeyError, AttributeError, ValueError) as exc:
            raise DataError(f"{p}: line {n}: not a pfr request ({type(exc).__name__}: {exc})") from None
        if got is None:
            continue
        req = got
        problem = request_problem(req)
        if problem:
            raise DataError(f"{p}: line {n}: {problem}")
        out.append(req)
    return out


def run(
    model: str | Backend,
    requests: Sequence[Request],
    store: str | os.PathLike[str] | Store,
    *,
    options: Mapping[str, Any] | None = None,
    batch_size: int | None = None,
    progress: bool = True,
    keep_unmatched: bool = False,
    progress_every: float = 10.0,
) -> RunSummary:
    """Score ``requests`` with ``model`` (a spec or a backend) into ``store``; resumes where it stopped.

    Matched-length requests whose positive/negative pairs differ in token count (under the model's
    tokenizer) or category mentions are refused unless ``keep_unmatched``. A model given as a spec is
    loaded here and closed when the run ends or fails; a backend object is left open for its owner.

    With ``progress``, a model that takes a while to load says so, and scoring shows a bar on a
    terminal or a line every ``progress_every`` seconds elsewhere."""
    from pfr.run.runner import loading_message

    if not isinstance(model, str):  # the caller's backend: the caller closes it
        return _run(model, requests, store, batch_size, progress, keep_unmatched, progress_every)
    with loading_message(model, enabled=progress):
        backend = load_model(model, options)
    try:  # a backend loaded here is closed here, also on error (engines, worker processes, connections)
        return _run(backend, requests, store, batch_size, progress, keep_unmatched, progress_every)
    finally:
        getattr(backend, "close", lambda: None)()  # a third-party backend without close() still runs


def _run(
    backend: Backend,
    requests: Sequence[Request],
    store: str | os.PathLike[str] | Store,
    batch_size: int | None,
    progress: bool,
    keep_unmatched: bool,
    progress_every: float,
) -> RunSummary:
    from pfr.design.matched import enforce

    enforce(requests, backend, keep_unmatched)
    if isinstance(store, Store):
        return run_requests(
            backend, requests, store, batch_size=batch_size, progress=progress, progress_every=progress_every
        )
    fresh = not Path(store).exists()
    try:
        with Store(store) as st:
            return run_requests(
                backend, requests, st, batch_size=batch_size, progress=progress, progress_every=progress_every
            )
    except BaseException:
        # A run that failed before storing anything leaves no empty store behind.
        if fresh and Path(store).is_dir():
            with Store(store) as st:
                empty = st.count() == 0
            if empty:
                shutil.rmtree(store, ignore_errors=True)
        raise


def indicators(*stores: str | os.PathLike[str]) -> Any:
    """Per-text indicators of every setting in the stores (see :func:`pfr.analysis.metrics.quad_indicators`)."""
    from pfr.analysis.metrics import quad_indicators, results_frame  # pandas: only when metrics are asked for

    results: list[StoredResult] = []
    for path in stores:
        with Store(path, create=False) as st:
            results.extend(st.results())
    return quad_indicators(results_frame(results))


def metrics(*stores: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Point estimates of the PFR metrics per model × dataset × panel × design."""
    from pfr.analysis.metrics import setting_metrics

    return setting_metrics(indicators(*stores))
