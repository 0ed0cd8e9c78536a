"""Score requests with a backend, committing each batch to the store as it is produced."""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Backend, label_choice
from pfr.models.registry import safe_spec
from pfr.models.scores import model_label, settle
from pfr.options import POSITIVE_INT, Number, parse
from pfr.run.cost import duration
from pfr.run.records import ScoredRow
from pfr.run.store import Store, request_key


@dataclass(frozen=True)
class RunSummary:
    """What one run did: how many requests it scored now and how many it found stored."""

    model_key: str
    total: int
    scored: int
    cached: int
    seconds: float


class ProgressLog:
    """Progress as plain lines, for a stderr that is a log file or a pipe (no terminal, no bar):
    one line every ``every`` seconds with the count, the rate and the ETA.

    ``work`` is the total work (the tokens to compute, see :func:`work_weights`; default: the
    requests): the percentage and the ETA follow the work done, not the requests done."""

    def __init__(self, total: int, every: float, stream: TextIO | None = None, work: float | None = None) -> None:
        self.total, self.every = total, every
        self.work = float(total if work is None else work)
        self.stream = stream or sys.stderr
        self.t0 = self.last = time.monotonic()
        self.done = 0
        self.done_work = 0.0
        self.lines = 0

    def advance(self, n: int, work: float | None = None) -> None:
        self.done += n
        self.done_work += n if work is None else work
        now = time.monotonic()
        if now - self.last >= self.every and self.done < self.total:
            self.last = now
            rate = self.done / max(now - self.t0, 1e-9)
            work_rate = self.done_work / max(now - self.t0, 1e-9)
            eta = (self.work - self.done_work) / work_rate if work_rate > 0 else float("inf")
            pct = 100 * self.done_work / self.work if self.work else 100.0
            eta_text = duration(eta, short=True)
            self.stream.write(f"pfr: scored {self.done}/{self.total} ({pct:.0f}%), {rate:.2f} req/s, eta {eta_text}\n")
            self.stream.flush()
            self.lines += 1


@contextmanager
def waiting_notice(model: Backend, every: float, say: Callable[[str], None], enabled: bool = True) -> Iterator[None]:
    """While a call of ``model`` has waited ``every`` seconds or more, say every ``every`` seconds
    what is awaited and for how long (a backend with ``awaited()``: a service, a server), so a run
    against a service that hangs is never silent for minutes."""
    awaited = getattr(model, "awaited", None)
    if not enabled or not callable(awaited):
        yield
        return
    stop = threading.Event()

    def watch() -> None:
        last = -math.inf
        while not stop.wait(min(max(every, 0.1), 1.0)):
            now, waiting = time.monotonic(), awaited()
            if waiting is not None and now - waiting.since >= every and now - last >= every:
                last = now
                say(f"pfr: {waiting.describe(now)}")

    thread = threading.Thread(target=watch, name="pfr-waiting", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()


def work_weights(model: Backend, prompts: Sequence[str | None]) -> list[int]:
    """Each request's share of a run's work, in scoring order: the prompt tokens it does not share
    with the prompt before it (the tokens a prefix-sharing backend computes for it), plus its weighed
    decode steps when the backend generates (:data:`~pfr.run.cost.DECODE_STEP_TOKENS` per token of
    ``max_tokens``); 1 per request for a backend without a tokenizer."""
    from pfr.run.cost import DECODE_STEP_TOKENS, decode_steps, new_tokens, tokenizer_of

    encode = tokenizer_of(model)
    if encode is None or any(p is None for p in prompts):
        return [1] * len(prompts)
    steps = DECODE_STEP_TOKENS * decode_steps(model)
    return [n + steps for n in new_tokens([encode(p) for p in prompts if p is not None])]


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
    every ``progress_every`` seconds (rate and ETA). With ``progress``, a service that keeps a call
    waiting ``progress_every`` seconds is named, with how long it has waited (:func:`waiting_notice`).
    """
    adaptive = batch_size is None
    if batch_size is None:
        batch_size = int(getattr(model, "batch_size", 16))
    batch_size = int(parse("batch-size", batch_size, POSITIVE_INT))
    progress_every = float(parse("progress-every", progress_every, Number(low=0)))
    t0 = time.perf_counter()
    mkey = store.add_model(model.identity)
    label = model_label(model.identity)
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
        TextColumn("{task.fields[count]}"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    console = Console(stderr=True)  # stdout stays clean for reports piped elsewhere
    show = progress and bool(todo) and console.is_terminal
    weights = work_weights(model, [p for _, _, p in todo]) if progress and todo else [1] * len(todo)
    log = None
    if progress and todo and not console.is_terminal:
        log = ProgressLog(len(todo), progress_every, work=sum(weights))

    def say(line: str) -> None:
        if show:
            bar.console.print(line, markup=False, highlight=False)
        else:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    with (
        Progress(*columns, console=console, disable=not show, transient=False) as bar,
        waiting_notice(model, max(progress_every, 1.0) if show else progress_every, say, progress and bool(todo)),
    ):
        # the bar and its ETA count the work (tokens to compute), the text beside it the requests
        task = bar.add_task("scoring", total=sum(weights), rate="", count=f"0/{len(todo)}")
        i = 0
        while i < len(todo):
            batch = todo[i : i + batch_size]
            tb = time.perf_counter()
            scores = model.score([r for _, r, _ in batch])
            if len(scores) != len(batch):
                raise ModelError(f"backend returned {len(scores)} score rows for {len(batch)} requests")
            per = (time.perf_counter() - tb) / len(batch)
            rows: list[ScoredRow] = []
            for (rkey, r, prompt), s in zip(batch, scores):
                if s.label_only:  # the model's choice and no scores: stored as it came
                    meta = {**s.meta, "label_only": True}
                    rows.append(ScoredRow(rkey, r, prompt, (), (), (), label_choice(s, r), per, meta))
                    continue
                if len(s.logits) != len(r.options):
                    raise ModelError(
                        f"backend returned {len(s.logits)} scores for {len(r.options)} options (request {r.request_id})"
                    )
                logprobs, choice = settle(s.logits, model.temperature, model=label, request=r.request_id)
                censored = s.censored or tuple(False for _ in s.logits)
                rows.append(ScoredRow(rkey, r, prompt, s.logits, logprobs, censored, choice, per, s.meta))
            store.add_results(mkey, rows)
            i += len(batch)
            elapsed = bar.tasks[0].elapsed or 1e-9
            work = sum(weights[i - len(batch) : i])
            bar.update(task, advance=work, rate=f"{i / elapsed:.1f} req/s", count=f"{i}/{len(todo)}")
            if log is not None:
                log.advance(len(batch), work)
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
    spec = safe_spec(spec)
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
