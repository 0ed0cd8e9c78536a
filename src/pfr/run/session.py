"""One run of one model over requests into a store: load the model, refuse unmatched pairs, score.

``pfr.api.run`` and the studies both call :func:`run_model`, so a run behaves the same from the
command line, from Python and inside a study.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pfr.design.types import Request
from pfr.models.base import Backend
from pfr.models.registry import load_model
from pfr.run.matched import enforce
from pfr.run.runner import RunSummary, loading_message, run_requests
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
    tokenizer) or category mentions are refused unless ``keep_unmatched``.

    With ``progress``, a model that takes a while to load says so, and scoring shows a bar on a
    terminal or a line every ``progress_every`` seconds elsewhere."""
    if isinstance(model, str):
        with loading_message(model, enabled=progress):
            backend = load_model(model, options)
    else:
        backend = model
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
