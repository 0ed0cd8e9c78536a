"""Score requests with a backend, committing each batch to the store as it is produced."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Backend, decide, normalise_scores
from pfr.run.store import Store, request_key


@dataclass(frozen=True)
class RunSummary:
    """What one run did: how many requests it scored now and how many it found stored."""

    model_key: str
    total: int
    scored: int
    cached: int
    seconds: float


def run_requests(
    model: Backend,
    requests: Sequence[Request],
    store: Store,
    *,
    batch_size: int | None = None,
    progress: bool = True,
) -> RunSummary:
    """Score every request not yet in ``store`` for ``model``; resumable and idempotent.

    ``batch_size`` defaults to the backend's ``batch_size`` attribute where it has one, else 16.
    """
    if batch_size is None:
        batch_size = int(getattr(model, "batch_size", 16))
    t0 = time.perf_counter()
    mkey = store.add_model(model.identity)
    keyed = []
    seen: set[str] = set()
    for r in requests:
        prompt = model.prompt(r)
        rkey = request_key(r, prompt)
        if rkey not in seen:
            seen.add(rkey)
            keyed.append((rkey, r, prompt))
    done = store.done(mkey, (k for k, _, _ in keyed))
    todo = [item for item in keyed if item[0] not in done]
    columns = (
        TextColumn("[bold]scoring"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    console = Console(stderr=True)  # stdout stays clean for reports piped elsewhere
    show = progress and bool(todo) and console.is_terminal  # a log file gets the summary line, not a bar
    with Progress(*columns, console=console, disable=not show, transient=False) as bar:
        task = bar.add_task("scoring", total=len(todo), rate="")
        for i in range(0, len(todo), batch_size):
            batch = todo[i : i + batch_size]
            tb = time.perf_counter()
            scores = model.score([r for _, r, _ in batch])
            if len(scores) != len(batch):
                raise ModelError(f"backend returned {len(scores)} score rows for {len(batch)} requests")
            per = (time.perf_counter() - tb) / len(batch)
            rows = []
            for (rkey, r, prompt), s in zip(batch, scores):
                if len(s.logits) != len(r.options):
                    raise ModelError(
                        f"backend returned {len(s.logits)} scores for {len(r.options)} options (request {r.request_id})"
                    )
                logprobs = normalise_scores(s.logits, model.temperature)
                censored = s.censored or tuple(False for _ in s.logits)
                rows.append((rkey, r, prompt, s.logits, logprobs, censored, decide(logprobs), per, s.meta))
            store.add_results(mkey, rows)
            elapsed = bar.tasks[0].elapsed or 1e-9
            bar.update(task, advance=len(batch), rate=f"{(i + len(batch)) / elapsed:.1f} req/s")
    return RunSummary(mkey, len(keyed), len(todo), len(done), time.perf_counter() - t0)
