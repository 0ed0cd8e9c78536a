"""What a run shows while it scores: a bar on a terminal, a line every few seconds elsewhere, and what a
slow service keeps it waiting for. The scoring loop (:func:`pfr.run.runner.run_requests`) only reports
events to a :class:`RunObserver`; :class:`ProgressDisplay` is the one that draws them."""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Protocol, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from pfr.models.base import Backend
from pfr.models.registry import safe_spec
from pfr.run.cost import duration

__all__ = ["ProgressDisplay", "ProgressLog", "RunObserver", "loading_message", "waiting_notice", "work_weights"]


class RunObserver(Protocol):
    """What the scoring loop reports: the requests it is about to score (their prompts, in order), each
    batch stored (``done`` of ``total`` requests scored so far), and its end (also on an error)."""

    def on_start(self, model: Backend, prompts: Sequence[str | None]) -> None: ...

    def on_batch(self, done: int, total: int) -> None: ...

    def on_end(self) -> None: ...


class ProgressDisplay:
    """The run's progress on stderr (stdout stays clean for reports piped elsewhere): a bar on a terminal,
    else a :class:`ProgressLog` line every ``every`` seconds; with either, what a slow service keeps a
    call waiting for (:func:`waiting_notice`). The bar and its ETA count the work (tokens to compute,
    :func:`work_weights`), the text beside it the requests. ``enabled=False`` shows nothing."""

    def __init__(self, enabled: bool = True, every: float = 10.0) -> None:
        self.enabled, self.every = enabled, every
        self._stack = ExitStack()
        self._weights: list[int] = []
        self._done = 0
        self._log: ProgressLog | None = None
        self._bar: Progress | None = None

    def on_start(self, model: Backend, prompts: Sequence[str | None]) -> None:
        todo = len(prompts)
        console = Console(stderr=True)
        show = self.enabled and bool(todo) and console.is_terminal
        self._weights = work_weights(model, prompts) if self.enabled and todo else [1] * todo
        if self.enabled and todo and not console.is_terminal:
            self._log = ProgressLog(todo, self.every, work=sum(self._weights))
        columns = (
            TextColumn("[bold]scoring"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
        )
        bar = self._stack.enter_context(Progress(*columns, console=console, disable=not show, transient=False))
        self._bar = bar

        def say(line: str) -> None:
            if show:
                bar.console.print(line, markup=False, highlight=False)
            else:
                sys.stderr.write(line + "\n")
                sys.stderr.flush()

        every = max(self.every, 1.0) if show else self.every
        self._stack.enter_context(waiting_notice(model, every, say, self.enabled and bool(todo)))
        bar.add_task("scoring", total=sum(self._weights), rate="", count=f"0/{todo}")

    def on_batch(self, done: int, total: int) -> None:
        assert self._bar is not None, "on_start() first"
        work = sum(self._weights[self._done : done])
        n, self._done = done - self._done, done
        task = self._bar.tasks[0]
        elapsed = task.elapsed or 1e-9
        self._bar.update(task.id, advance=work, rate=f"{done / elapsed:.1f} req/s", count=f"{done}/{total}")
        if self._log is not None:
            self._log.advance(n, work)

    def on_end(self) -> None:
        self._stack.close()


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
