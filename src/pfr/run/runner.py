"""Score requests with a backend, committing each batch to the store as it is produced."""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Backend, decide, label_choice, normalise_scores
from pfr.run.store import Store, request_key


@dataclass(frozen=True)
class RunSummary:
    """What one run did: how many requests it scored now and how many it found stored."""

    model_key: str
    total: int
    scored: int
    cached: int
    seconds: float


def _duration(value: float) -> str:
    if not math.isfinite(value):
        return "unknown"
    seconds = max(0, round(value))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


class ProgressLog:
    """Progress as plain lines, for a stderr that is a log file or a pipe (no terminal, no bar):
    one line every ``every`` seconds with the count, the rate and the ETA."""

    def __init__(self, total: int, every: float, stream: TextIO | None = None) -> None:
        self.total, self.every = total, every
        self.stream = stream or sys.stderr
        self.t0 = self.last = time.monotonic()
        self.done = 0
        self.lines = 0

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.every and self.done < self.total:
            self.last = now
            rate = self.done / max(now - self.t0, 1e-9)
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            pct = 100 * self.done / self.total
            self.stream.write(
                f"pfr: scored {self.done}/{self.total} ({pct:.0f}%), {rate:.2f} req/s, eta {_duration(eta)}\n"
            )
            self.stream.flush()
            self.lines += 1


#: A model call slower than this per request scores one request per call (when the batch size is
#: the backend's default), so the bar and the store advance request by request.
SLOW_PER_REQUEST_S = 1.0


def run_requests(
    model: Backend,
    requests: Sequence[Request],
    store: Store,
    *,
    batch_size: int | None = None,
    progress: bool = True,
    progress_every: float = 10.0,
) -> RunSummary:
    """Score every request not yet in ``store`` for ``model``; resumable and idempotent.

    ``batch_size`` defaults to the backend's ``batch_size`` attribute where it has one, else 16;
    a default batch drops to one request per call once a call takes over
    :data:`SLOW_PER_REQUEST_S` per request. On a terminal the progress is a bar; otherwise a line
    every ``progress_every`` seconds (rate and ETA).
    """
    adaptive = batch_size is None
    if batch_size is None:
        batch_size = int(getattr(model, "batch_size", 16))
    if batch_size < 1:
        raise ModelError(f"--batch-size must be at least 1, got {batch_size}")
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
    show = progress and bool(todo) and console.is_terminal
    log = ProgressLog(len(todo), progress_every) if progress and todo and not console.is_terminal else None
    with Progress(*columns, console=console, disable=not show, transient=False) as bar:
        task = bar.add_task("scoring", total=len(todo), rate="")
        i = 0
        while i < len(todo):
            batch = todo[i : i + batch_size]
            tb = time.perf_counter()
            scores = model.score([r for _, r, _ in batch])
            if len(scores) != len(batch):
                raise ModelError(f"backend returned {len(scores)} score rows for {len(batch)} requests")
            per = (time.perf_counter() - tb) / len(batch)
            rows: list[tuple[Any, ...]] = []
            for (rkey, r, prompt), s in zip(batch, scores):
                if s.label_only:  # the model's choice and no scores: stored as it came
                    rows.append((rkey, r, prompt, (), (), (), label_choice(s, r), per, {**s.meta, "label_only": True}))
                    continue
                if len(s.logits) != len(r.options):
                    raise ModelError(
                        f"backend returned {len(s.logits)} scores for {len(r.options)} options (request {r.request_id})"
                    )
                logprobs = normalise_scores(s.logits, model.temperature)
                censored = s.censored or tuple(False for _ in s.logits)
                rows.append((rkey, r, prompt, s.logits, logprobs, censored, decide(logprobs), per, s.meta))
            store.add_results(mkey, rows)
            i += len(batch)
            elapsed = bar.tasks[0].elapsed or 1e-9
            bar.update(task, advance=len(batch), rate=f"{i / elapsed:.1f} req/s")
            if log is not None:
                log.advance(len(batch))
            if adaptive and batch_size > 1 and per >= SLOW_PER_REQUEST_S:
                batch_size = 1  # a slow model: update (and commit) after every request
    return RunSummary(mkey, len(keyed), len(todo), len(done), time.perf_counter() - t0)


@contextmanager
def loading_message(spec: str, enabled: bool = True, after: float = 2.0) -> Iterator[None]:
    """Say that a model is loading: a transient spinner on a terminal; elsewhere one line once the
    load has taken ``after`` seconds (and how long it took), so quick loads and errors stay quiet."""
    if not enabled:
        yield
        return
    console = Console(stderr=True)
    if console.is_terminal:
        with console.status(f"loading model {spec} …", spinner="dots"):
            yield
        return
    t0 = time.monotonic()
    said = threading.Event()

    def say() -> None:
        said.set()
        sys.stderr.write(f"pfr: loading model {spec} …\n")
        sys.stderr.flush()

    timer = threading.Timer(after, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
    if said.is_set():
        sys.stderr.write(f"pfr: loaded model {spec} in {time.monotonic() - t0:.1f} s\n")
        sys.stderr.flush()
