"""``pfr study FILE --dry-run --workers N``: the expected wall time of a study on N workers.

The study's work is cut as a scale-out run cuts it: units of one model × dataset/panel × design ×
shard of whole texts (:mod:`pfr.run.shards`). Each unit's time is its share of the dry run's
estimate (its distinct tokens, or requests, at the model's rate measured here, or at a rate the
user gives for other hardware); the units are dealt longest first to the worker that would finish
each soonest, a worker loading a model when it changes models (the load measured by the dry run).
The result is stated with what it assumes: the even split (the lower bound), the tail (the largest
unit: a unit starts only once a worker is free), a straggler's cost, and the merge of the unit
stores at the rate measured here just now on a store of the study's own requests.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pfr.design.types import Request
from pfr.errors import DataError
from pfr.run.cost import Cost, Rate, duration
from pfr.run.merge import merge_stores
from pfr.run.records import ScoredRow
from pfr.run.shards import Shard, shard_requests
from pfr.run.store import Store, request_key
from pfr.studies.estimate import estimate_study
from pfr.studies.execute import build_request_sets
from pfr.studies.schema import Study

#: units per worker the study is cut into (so the tail, the largest unit, is a small part of the whole)
UNITS_PER_WORKER = 4
#: results in the store whose merge is timed
MERGE_SAMPLE = 2000
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Unit:
    """One unit of work: a shard of one model's request set."""

    model: str
    label: str
    seconds: float
    requests: int


@dataclass(frozen=True)
class MergeTiming:
    """What merging a unit store costs here: seconds per store (opening, checking) and per result."""

    per_store: float
    per_result: float

    def seconds(self, stores: int, results: int) -> float:
        return stores * self.per_store + results * self.per_result


@dataclass(frozen=True)
class Plan:
    """A study's expected wall time on ``workers`` workers, with the figures it rests on."""

    workers: int
    what: str  # "workers" or "GPUs"
    executor: str
    costs: tuple[Cost, ...]  # each model's total, with the rate the plan uses
    given: tuple[str, ...]  # models whose rate the user gave (assumed), not measured here
    unknown: tuple[str, ...]  # models whose time is unknown (a service: give --rate)
    units: tuple[Unit, ...]
    makespan: float  # local: the slowest shard task; ray: the longest-first schedule; loads included
    merge: MergeTiming  # measured here

    @property
    def work(self) -> float:
        return sum(u.seconds for u in self.units)

    @property
    def loads(self) -> float:
        return sum(c.load_seconds for c in self.costs)

    @property
    def largest(self) -> Unit | None:
        return max(self.units, key=lambda u: u.seconds, default=None)

    @property
    def results(self) -> int:
        return sum(u.requests for u in self.units)

    @property
    def merge_last(self) -> float:
        """Merging the largest unit's store (what is left after the last unit when stores are merged as
        units finish)."""
        return self.merge.seconds(1, max((u.requests for u in self.units), default=0))

    @property
    def merge_all(self) -> float:
        """A batch array's ``pfr merge`` of its task stores, after the last task."""
        return self.merge.seconds(self.workers, self.results)

    @property
    def wall(self) -> float:
        return self.makespan + (self.merge_last if self.executor == "ray" else self.merge_all)


def parse_rates(items: Sequence[str]) -> dict[str, float]:
    """``MODEL=RATE`` (``--rate``): tokens (or requests, for a model without a tokenizer) per second
    of one worker, measured elsewhere."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        try:
            rate = float(value)
        except ValueError:
            rate = -1.0
        if not sep or not name or not rate > 0 or not math.isfinite(rate):
            raise DataError(f"--rate {item}: expected MODEL=RATE, a model of the study and a positive rate per second")
        out[name] = rate
    return out


def plan_study(
    costs: Sequence[tuple[str, Cost]],
    workers: int,
    *,
    executor: str = "local",
    gpus: bool = False,
    rates: Mapping[str, float] | None = None,
    merge: MergeTiming,
    shares: Mapping[str, Sequence[float]] | None = None,
) -> Plan:
    """The plan of a study from its dry run's ``costs`` (:func:`pfr.studies.estimate.estimate_study`).

    ``executor="local"``: a batch array of ``workers`` tasks, task i running shard i of every request
    set with every model (``shares``: each request set's share of requests per shard, by the set's label
    after the model; default an even split). ``"ray"``: units dealt from one queue (:func:`_schedule`)."""
    if workers < 1:
        raise DataError(f"--{'gpus' if gpus else 'workers'} {workers}: need at least 1")
    if executor not in EXECUTORS:
        raise DataError(f"--executor {executor}: expected one of {', '.join(EXECUTORS)}")
    rates = dict(rates or {})
    sets = [(label, c) for label, c in costs if not label.endswith(" · total")]
    totals = [c for label, c in costs if label.endswith(" · total")]
    known = {c.model for _, c in sets}
    stray = sorted(set(rates) - known)
    if stray:
        raise DataError(f"--rate {stray[0]}: not a model of the study (its models: {', '.join(sorted(known))})")

    def rated(c: Cost) -> Cost:
        if c.model not in rates:
            return c
        per = c.rate.per if c.rate is not None else ("token" if c.counts.distinct_tokens is not None else "request")
        return replace(c, rate=Rate(rates[c.model], 1.0, per), unknown="")

    sets = [(label, rated(c)) for label, c in sets]
    unknown = sorted({c.model for _, c in sets if c.expected_seconds is None and c.counts.requests})
    timed = [(label, c, c.expected_seconds or 0.0) for label, c in sets if c.expected_seconds is not None]
    whole = sum(s for _, _, s in timed)
    units: list[Unit] = []
    for label, c, seconds in timed:
        if not c.counts.requests:
            continue
        texts = max(1, c.counts.requests // 4)
        shards = min(texts, max(1, math.ceil(UNITS_PER_WORKER * workers * seconds / whole))) if whole else 1
        for i in range(shards):
            share = c.counts.requests // shards + (1 if i < c.counts.requests % shards else 0)
            units.append(Unit(c.model, f"{label} · shard {i + 1}/{shards}", seconds / shards, share))
    loads = {c.model: c.load_seconds for c in totals}
    if executor == "ray":
        makespan = _schedule(units, workers, loads)
    else:
        tasks = [sum(loads.get(m, 0.0) for m in {c.model for _, c, _ in timed})] * workers
        even: Sequence[float] = [1 / workers] * workers
        for label, _, seconds in timed:
            fractions = (shares or {}).get(label.partition(" · ")[2]) or even
            tasks = [t + seconds * f for t, f in zip(tasks, fractions)]
        makespan = max(tasks)
    return Plan(
        workers, "GPUs" if gpus else "workers", executor, tuple(rated(c) for c in totals), tuple(sorted(rates)),
        tuple(unknown), tuple(units), makespan, merge,
    )  # fmt: skip


def plan_file(
    study: Study,
    workers: int,
    *,
    executor: str = "local",
    gpus: bool = False,
    rates: Mapping[str, float] | None = None,
    progress: bool = True,
) -> tuple[list[tuple[str, Cost]], Plan]:
    """The dry run of ``study`` (:func:`~pfr.studies.estimate.estimate_study`) and its :class:`Plan` on
    ``workers`` workers, each request set's shards counted and a merge timed here."""
    sets = build_request_sets(study)
    costs = estimate_study(study, progress=progress, sets=sets)
    shares: dict[str, list[float]] = {}
    for d, panel, design, reqs, _ in sets:
        n = max(len(reqs), 1)
        shares[f"{d.name}/{panel} · {design.name}"] = [
            len(shard_requests(reqs, Shard(i, workers))) / n for i in range(workers)
        ]
    sized = [c for label, c in costs if not label.endswith(" · total") and c.counts.prompt_tokens]
    chars = 4 * sum(c.counts.prompt_tokens or 0 for c in sized) // max(1, sum(c.counts.requests for c in sized))
    timing = measure_merge(sets[0][3] if sets else [], chars)
    plan = plan_study(costs, workers, executor=executor, gpus=gpus, rates=rates, merge=timing, shares=shares)
    return costs, plan


def _schedule(units: Sequence[Unit], workers: int, loads: Mapping[str, float]) -> float:
    """Longest first, each unit to the worker that would finish it soonest (loading its model if that
    worker holds another); the time the last worker finishes."""
    held = [""] * workers
    ends = [0.0] * workers
    for u in sorted(units, key=lambda u: -u.seconds):
        best = min(range(workers), key=lambda w: ends[w] + (0.0 if held[w] == u.model else loads.get(u.model, 0.0)))
        ends[best] += u.seconds + (0.0 if held[best] == u.model else loads.get(u.model, 0.0))
        held[best] = u.model
    return max(ends, default=0.0)


def measure_merge(requests: Sequence[Request], prompt_chars: int = 0) -> MergeTiming:
    """What a merge costs here now: a store of one of ``requests`` and one of up to
    :data:`MERGE_SAMPLE` (with prompts of ``prompt_chars`` characters, as a language model's store holds)
    are written to a temporary folder and each merged into an empty store; only the merges are timed."""
    sample = list(requests[:MERGE_SAMPLE])
    if not sample:
        return MergeTiming(0.0, 0.0)
    prompt = "x" * prompt_chars if prompt_chars else None
    rows = []
    for r in sample:
        n = len(r.options)
        rows.append(ScoredRow(request_key(r, prompt), r, prompt, [0.0] * n, [-math.log(n)] * n, [False] * n,
                              0, 0.01, {}))  # fmt: skip
    times = []
    with tempfile.TemporaryDirectory(prefix="pfr-plan-") as tmp:
        for name, part in (("one", rows[:1]), ("many", rows)):
            with Store(Path(tmp) / name) as st:
                st.add_results(st.add_model({"backend": "plan", "kind": "merge-timing"}), part)
            t0 = time.perf_counter()
            merge_stores(Path(tmp) / f"{name}-merged", [Path(tmp) / name])
            times.append(time.perf_counter() - t0)
    per_result = max(times[1] - times[0], 0.0) / max(len(rows) - 1, 1)
    return MergeTiming(times[0], per_result)


def describe_plan(plan: Plan) -> list[str]:
    """The lines ``pfr study --dry-run --workers N`` adds after the dry run's costs."""
    n, what = plan.workers, plan.what if plan.workers != 1 else plan.what[:-1]
    tasks = f"{n} task{'s' if n != 1 else ''}"
    ray = plan.executor == "ray"
    how = (
        "--executor ray: units from one queue, each unit store merged into the study store as it finishes"
        if ray
        else f"a batch array of {tasks}, task I scoring shard I/{n} of everything, then one `pfr merge`"
    )
    lines = [f"plan on {n} {what} ({how}):"]
    for c in plan.costs:
        if c.model in plan.unknown:
            continue
        r = c.rate
        if r is None:
            continue
        unit = "tokens" if r.per == "token" else "requests"
        src = "given by --rate (assumed for the workers' hardware)" if c.model in plan.given else "measured here"
        lines.append(f"  {c.model}: {r.per_second:,.1f} {unit}/s per worker, {src}; load {c.load_seconds:.1f} s "
                     "measured here, once per worker that runs it")  # fmt: skip
    for model in plan.unknown:
        lines.append(f"  {model}: time unknown (a dry run calls no service); give --rate {model}=RATE — left out below")
    big = plan.largest
    if big is None:
        lines.append("  nothing to score")
        return lines
    lines.append(f"  work: {duration(plan.work)} of scoring and {duration(plan.loads)} of model loads in all; the "
                 f"even split over {n} {what}: {duration(plan.work / n)}")  # fmt: skip
    if ray:
        lines += [
            f"  schedule: {duration(plan.makespan)} ({len(plan.units)} units: model × dataset/panel × design × shard "
            f"of whole texts, about {UNITS_PER_WORKER} per worker, longest first; a worker loads a model when it "
            f"changes models); tail bound: the largest unit, {duration(big.seconds)} ({big.label})",
            f"  stragglers: a unit running k× slower than planned ends the study up to (k − 1) × its time later "
            f"(at k = 2, {duration(big.seconds)} for the largest) unless a copy of it is started elsewhere",
        ]  # fmt: skip
    else:
        lines += [
            f"  schedule: {duration(plan.makespan)}: the slowest task (each loads every model; its shard holds the "
            f"texts whose id hashes to it, so tasks differ by the hash's imbalance, counted here)",
            "  stragglers: the array ends with its slowest task; a task running k× slower ends it up to (k − 1) × "
            f"its time later (at k = 2, {duration(plan.makespan)})",
        ]  # fmt: skip
    merged = (
        f"the largest unit's {big.requests:,} results after the last unit: {duration(plan.merge_last)}"
        if ray
        else f"the stores of {tasks}, {plan.results:,} results, after the last task: {duration(plan.merge_all)}"
    )
    lines += [
        f"  merge: {plan.merge.per_store:.2f} s per store and {plan.merge.per_result * 1e3:.3f} ms per result, "
        f"measured here just now; {merged}",
        f"  expected wall time on {n} {what}: about {duration(plan.wall)} (schedule + merge; an estimate)",
    ]
    return lines
