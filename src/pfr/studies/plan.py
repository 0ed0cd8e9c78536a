"""``pfr study FILE --dry-run --workers N``: the expected wall time of a study on N workers.

Each unit's time is its share of the dry run's estimate (its requests' share of its request set's
distinct tokens, or requests, at the model's rate measured here, or at a rate the user gives for
other hardware). ``--executor local``: a batch array of N tasks, task I scoring shard I/N
(:mod:`pfr.run.shards`) with every model. ``--executor ray``: the units the Ray executor dispatches,
made by its own :func:`pfr.studies.ray_executor.plan_units`, run as it runs them: each model's
``replicas`` actors, which load the model once and take its units in order from its queue, placed
in study order while workers are free; a model's actors end once its last unit is done. The result
is stated with what it assumes: the even split (the lower bound), the straggler tail (the largest
unit's expected time) and the merge of the unit stores at the rate measured here just now on a
store of the study's own requests.
"""

from __future__ import annotations

import heapq
import math
import statistics
import tempfile
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pfr.design.types import Request
from pfr.errors import DataError
from pfr.models.registry import safe_spec
from pfr.run.cost import Cost, Rate, duration
from pfr.run.merge import merge_stores
from pfr.run.records import ScoredRow
from pfr.run.shards import Shard, shard_requests
from pfr.run.store import Store, request_key
from pfr.studies.estimate import estimate_study
from pfr.studies.execute import build_request_sets
from pfr.studies.ray_executor import plan_units
from pfr.studies.schema import Study

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
    makespan: float  # local: the slowest shard task; ray: the executor's queues and actors; loads included
    merge: MergeTiming  # measured here
    actors: tuple[tuple[str, int, int], ...] = ()  # ray: each model's replicas and the workers one holds
    busy: int = 0  # ray: the most workers holding an actor at once
    unit_texts: int = 64  # ray: --unit-texts
    straggler: float = 3.0  # ray: --straggler

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
    units: Sequence[tuple[int, str, int]] | None = None,
    actors: Mapping[str, tuple[int, int]] | None = None,
    unit_texts: int = 64,
    straggler: float = 3.0,
) -> Plan:
    """The plan of a study from its dry run's ``costs`` (:func:`pfr.studies.estimate.estimate_study`).

    ``executor="local"``: a batch array of ``workers`` tasks, task I running shard I of every request
    set with every model (``shares``: each request set's share of requests per shard, by the set's label
    after the model; default an even split). ``"ray"``: the executor's ``units`` (each the index of its
    request set among ``costs``' sets, its label and its requests; default one unit a set) on each
    model's ``actors`` (replicas, workers an actor holds; default one of one) (:func:`_schedule`)."""
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
    loads = {c.model: c.load_seconds for c in totals}
    busy = 0
    held: dict[str, tuple[int, int]] = {}
    planned: list[Unit] = []
    if executor == "ray":
        given = units if units is not None else [(i, f"{label} · shard 1/1", c.counts.requests)
                                                 for i, (label, c) in enumerate(sets)]  # fmt: skip
        for i, label, n in given:
            c = sets[i][1]
            if c.expected_seconds is not None and n:
                planned.append(Unit(c.model, label, c.expected_seconds * n / max(c.counts.requests, 1), n))
        held = {c.model: (actors or {}).get(c.model, (1, 1)) for _, c, _ in timed}
        makespan, busy = _schedule(planned, workers, held, loads)
    else:
        for label, c, seconds in timed:
            if c.counts.requests:
                planned.append(Unit(c.model, label, seconds, c.counts.requests))  # the whole set, cut by shares
        tasks = [sum(loads.get(m, 0.0) for m in {c.model for _, c, _ in timed})] * workers
        even: Sequence[float] = [1 / workers] * workers
        for label, _, seconds in timed:
            fractions = (shares or {}).get(label.partition(" · ")[2]) or even
            tasks = [t + seconds * f for t, f in zip(tasks, fractions)]
        makespan = max(tasks)
    return Plan(
        workers, "GPUs" if gpus else "workers", executor, tuple(rated(c) for c in totals), tuple(sorted(rates)),
        tuple(unknown), tuple(planned), makespan, merge, tuple((m, r, w) for m, (r, w) in held.items()), busy,
        unit_texts, straggler,
    )  # fmt: skip


def plan_file(
    study: Study,
    workers: int,
    *,
    executor: str = "local",
    gpus: bool = False,
    rates: Mapping[str, float] | None = None,
    progress: bool = True,
    unit_texts: int = 64,
    straggler: float = 3.0,
) -> tuple[list[tuple[str, Cost]], Plan]:
    """The dry run of ``study`` (:func:`~pfr.studies.estimate.estimate_study`) and its :class:`Plan` on
    ``workers`` workers: each request set's shards counted (local), or the Ray executor's own units of
    ``unit_texts`` texts (ray); a merge timed here."""
    if unit_texts < 1:
        raise DataError(f"--unit-texts {unit_texts}: need at least 1")
    sets = build_request_sets(study)
    costs = estimate_study(study, progress=progress, sets=sets)
    shares: dict[str, list[float]] = {}
    units: list[tuple[int, str, int]] | None = None
    actors: dict[str, tuple[int, int]] = {}
    if executor == "ray":
        units = [(u.setting, u.label, len(u.requests)) for u in plan_units(study, unit_texts)]
        for m in study.models:
            actors[safe_spec(m.spec)] = (m.replicas, max(1, math.ceil(m.num_gpus)) if gpus else 1)
    else:
        for d, panel, design, reqs, _ in sets:
            n = max(len(reqs), 1)
            shares[f"{d.name}/{panel} · {design.name}"] = [
                len(shard_requests(reqs, Shard(i, workers))) / n for i in range(workers)
            ]
    sized = [c for label, c in costs if not label.endswith(" · total") and c.counts.prompt_tokens]
    chars = 4 * sum(c.counts.prompt_tokens or 0 for c in sized) // max(1, sum(c.counts.requests for c in sized))
    timing = measure_merge(sets[0][3] if sets else [], chars)
    plan = plan_study(costs, workers, executor=executor, gpus=gpus, rates=rates, merge=timing, shares=shares,
                      units=units, actors=actors, unit_texts=unit_texts, straggler=straggler)  # fmt: skip
    return costs, plan


def _schedule(
    units: Sequence[Unit], workers: int, actors: Mapping[str, tuple[int, int]], loads: Mapping[str, float]
) -> tuple[float, int]:
    """The Ray executor's run: each model's ``replicas`` actors (of ``held`` workers each) placed in
    study order while workers are free, each loading its model and then taking the model's units in
    order from its queue; a model's actors end, freeing their workers, once its last unit is done.
    Returns the time the last unit ends and the most workers held at once."""
    queues: dict[str, deque[float]] = {}
    for u in units:
        queues.setdefault(u.model, deque()).append(u.seconds)
    waiting = deque(m for m in queues for _ in range(actors.get(m, (1, 1))[0]))
    for m in queues:
        if actors.get(m, (1, 1))[1] > workers:
            raise DataError(f"{m}: one actor holds {actors[m][1]} GPUs but the plan has {workers}")
    free, busy, end, seq = workers, 0, 0.0, 0
    placed = {m: 0 for m in queues}
    running = {m: 0 for m in queues}
    events: list[tuple[float, int, str, bool]] = []  # (time, order, model, whether a unit ended)

    def place(now: float) -> None:
        nonlocal free, busy, seq
        while waiting and actors.get(waiting[0], (1, 1))[1] <= free:
            m = waiting.popleft()
            free -= actors.get(m, (1, 1))[1]
            placed[m] += 1
            seq += 1
            heapq.heappush(events, (now + loads.get(m, 0.0), seq, m, False))
        busy = max(busy, workers - free)

    place(0.0)
    while events:
        now, _, m, ended = heapq.heappop(events)
        running[m] -= ended
        if queues[m]:
            running[m] += 1
            seq += 1
            heapq.heappush(events, (now + queues[m].popleft(), seq, m, True))
        elif not running[m] and placed[m]:  # the model's last unit is done: its actors end
            free += placed[m] * actors.get(m, (1, 1))[1]
            placed[m] = 0
            end = max(end, now)
            for _ in range(waiting.count(m)):
                waiting.remove(m)
            place(now)
    return end, busy


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
        "--executor ray: each model's units from its own queue, each unit store merged into the study store as it "
        "finishes"
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
        each = ", ".join(f"{m} {r} × {w}" for m, r, w in plan.actors)
        median = statistics.median(u.seconds for u in plan.units)
        lines += [
            f"  schedule: {duration(plan.makespan)} ({len(plan.units)} units of up to {plan.unit_texts} whole texts "
            "(--unit-texts) of one model × dataset/panel × design, the executor's own; each model's replicas "
            "load it once and take its units in order from its queue; a model's actors end after its last unit)",
            f"  actors (replicas × {what} each, from the study file): {each}; at most {plan.busy} of {n} {what} "
            f"in use at once" + ("" if plan.busy == n else " (more replicas in the study file would use more)"),
            f"  stragglers (--straggler {plan.straggler:g}): once a model's queue is empty, a unit running longer "
            f"than {plan.straggler:g} × the median unit time, {duration(plan.straggler * median)}, gets a copy; tail "
            f"overhead: up to the largest unit's expected time, {duration(big.seconds)} ({big.label}), not in the "
            "schedule",
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
        f"  expected wall time on {n} {what}: about {duration(plan.wall)} (schedule + merge; an estimate"
        + (f"; a straggler adds up to {duration(big.seconds)})" if ray else ")"),
    ]
    return lines
