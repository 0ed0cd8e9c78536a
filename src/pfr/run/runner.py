"""Score requests with a backend, committing each batch to the store as it is produced; the loop reports
its progress to an observer (:mod:`pfr.run.progress` draws it)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Backend, label_choice
from pfr.models.scores import model_label, settle
from pfr.options import POSITIVE_INT, Number, parse
from pfr.run.progress import ProgressDisplay, RunObserver
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
    observer: RunObserver | None = None,
) -> RunSummary:
    """Score every request not yet in ``store`` for ``model``; resumable and idempotent.

    ``batch_size`` defaults to the backend's ``batch_size`` attribute where it has one, else 16;
    a default batch drops to one request per call once a call takes over
    :data:`SLOW_PER_REQUEST_S` per request. On a terminal the progress is a bar; otherwise a line
    every ``progress_every`` seconds (rate and ETA). With ``progress``, a service that keeps a call
    waiting ``progress_every`` seconds is named, with how long it has waited
    (:func:`~pfr.run.progress.waiting_notice`). The loop only reports its events: to ``observer`` when
    given, else to a :class:`~pfr.run.progress.ProgressDisplay` that draws all of that.
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
    events: RunObserver = ProgressDisplay(progress, progress_every) if observer is None else observer
    events.on_start(model, [p for _, _, p in todo])
    try:
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
            events.on_batch(i, len(todo))
            if adaptive and batch_size > 1 and per >= SLOW_PER_REQUEST_S:
                batch_size = 1  # a slow model: update (and commit) after every request
    finally:
        events.on_end()
    return RunSummary(mkey, len(keyed), len(todo), len(done), time.perf_counter() - t0)
