"""The Python API behind the CLI: build requests, run a model, compute metrics.

A notebook user calls these directly::

    import pfr
    reqs = pfr.build("trec", panel="main", data_dir="../shared/data")
    summary = pfr.run("baseline:oracle", reqs, store="runs/oracle")
    pfr.metrics("runs/oracle")
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pfr.data.loaders import UserFormat, load_dataset
from pfr.data.panels import build_panel
from pfr.design.builder import build_requests
from pfr.design.types import Design, Request
from pfr.errors import DataError
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
    """Write lines to ``path`` through a temporary file and a rename: never half a file."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # os.open with mode 0o666 (not mkstemp's 0o600) so the file gets the user's umask like any other
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line)
                f.write("\n")
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_requests(requests: Iterable[Request], path: str | os.PathLike[str]) -> None:
    atomic_write(path, (r.to_json() for r in requests))


def read_requests(path: str | os.PathLike[str]) -> list[Request]:
    """Requests from a JSONL file written by :func:`write_requests` / ``pfr build``."""
    out = []
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: file not found")
    with p.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                out.append(Request.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TypeError, KeyError) as exc:
                raise DataError(f"{p}: line {n}: not a pfr request ({exc})") from None
    return out


def run(
    model: str | Backend,
    requests: Sequence[Request],
    store: str | os.PathLike[str] | Store,
    *,
    options: Mapping[str, Any] | None = None,
    batch_size: int | None = None,
    progress: bool = True,
) -> RunSummary:
    """Score ``requests`` with ``model`` (a spec or a backend) into ``store``; resumes where it stopped."""
    backend = load_model(model, options) if isinstance(model, str) else model
    if isinstance(store, Store):
        return run_requests(backend, requests, store, batch_size=batch_size, progress=progress)
    fresh = not Path(store).exists()
    try:
        with Store(store) as st:
            return run_requests(backend, requests, st, batch_size=batch_size, progress=progress)
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
