"""One run of one model over requests into a store: load the model, refuse unmatched pairs, score.

``pfr.api.run`` and the studies both call :func:`run_model`, so a run behaves the same from the
command line, from Python and inside a study.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pfr.console import no_library_bars
from pfr.design.types import Request
from pfr.models.base import Backend, no_contact
from pfr.models.registry import load_model, safe_spec
from pfr.run.cost import Cost, estimate
from pfr.run.matched import enforce
from pfr.run.progress import loading_message
from pfr.run.runner import RunSummary, run_requests
from pfr.run.store import Store


def run_model(
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
    with opened(model, options, progress) as (backend, _):
        return _run(backend, requests, store, batch_size, progress, keep_unmatched, progress_every)


@contextmanager
def opened(
    model: str | Backend,
    options: Mapping[str, Any] | None,
    progress: bool,
    loader: Callable[[], Backend] | None = None,
) -> Iterator[tuple[Backend, float]]:
    """The backend for ``model`` and the seconds its load took: a spec is loaded here (by ``loader``
    when given, e.g. a study's model with its template) and closed on leaving, also on error (engines,
    worker processes, connections); a backend object is the caller's and stays open. Without
    ``progress``, the libraries' own progress bars are off while it lasts."""
    if not isinstance(model, str):
        with no_library_bars(not progress):
            yield model, 0.0
        return
    with no_library_bars(not progress):  # --no-progress: no library draws its own bar either
        t0 = time.perf_counter()
        with loading_message(model, enabled=progress):
            backend = loader() if loader is not None else load_model(model, options)
        load = time.perf_counter() - t0
        try:
            yield backend, load
        finally:
            close_backend(backend)


def close_backend(backend: Backend) -> None:
    """Close ``backend`` if it can be closed: a third-party backend without ``close()`` still runs."""
    getattr(backend, "close", lambda: None)()


def _run(
    backend: Backend,
    requests: Sequence[Request],
    store: str | os.PathLike[str] | Store,
    batch_size: int | None,
    progress: bool,
    keep_unmatched: bool,
    progress_every: float,
) -> RunSummary:
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


def estimate_spec(
    model: str | Backend,
    requests: Sequence[Request],
    store: str | os.PathLike[str] | None = None,
    *,
    options: Any = None,
    progress: bool = True,
) -> Cost:
    """:func:`pfr.run.cost.estimate` for a model spec (loaded here, the load timed) or a backend."""
    with no_contact(), opened(model, options, progress) as (backend, load):
        return estimate(backend, requests, store, model=safe_spec(model) if isinstance(model, str) else "",
                        load_seconds=load)  # fmt: skip
