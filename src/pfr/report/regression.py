"""The regression gate: a candidate against a baseline on the same texts (``pfr check CAND --baseline BASE``).

A limit bounds how far a metric may move the wrong way, Δ = CAND − BASE paired on the texts both
scored (:mod:`pfr.analysis.compare`, whose intervals and MDE it reuses). It is a non-inferiority
check: ``--max-drop P4=0.02`` passes only when the lower bound of Δ's 95 % interval is ≥ −0.02, so
a pass means the data rule out a larger drop, not that the sample happened to look fine; a
``--max-rise`` bounds the upper bound of Δ for a metric where lower is better (F+, DR, INV).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pfr.analysis.bootstrap import Interval, check_draws
from pfr.analysis.compare import (
    COMPARED,
    LOWER_IS_BETTER,
    Comparison,
    MetricChange,
    TextChange,
    compare_sides,
    load_side,
)
from pfr.errors import DataError, PfrError
from pfr.report.gate import (
    MAX_INPUTS,
    CheckResult,
    FailingInput,
    Threshold,
    _check_range,
    canonical,
    check_on,
    clears,
    display,
    evaluate,
    parse_thresholds,
)
from pfr.report.model import Report, build_report, load_report

#: the limit options, each with the side of Δ it bounds
LIMITS = {"max-drop": "min", "max-rise": "max"}


@dataclass(frozen=True)
class Paired:
    """Where a regression check applies: the candidate's model on one setting, paired on ``n`` texts."""

    model: str
    dataset: str
    panel: str
    design: str
    n: int

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.model, self.dataset, self.panel, self.design)


@dataclass(frozen=True)
class RegressionResult:
    """One ``--max-drop``/``--max-rise`` applied to one setting of a comparison.

    Its threshold is the limit as a bound on Δ: ``kind="min"`` with value −limit for a drop,
    ``kind="max"`` with value +limit for a rise, so that it passes and fails like a ``--min``/``--max``."""

    setting: Paired
    threshold: Threshold
    change: MetricChange
    baseline: str  # BASE as given
    base_model: str
    on: str = "interval"
    failing: tuple[FailingInput, ...] = ()
    n_failing: int = 0
    base_only: int = 0  # texts of this setting BASE scored and CAND did not: outside the check, named

    @property
    def interval(self) -> Interval:
        return Interval(self.change.delta, self.change.low, self.change.high)

    @property
    def bound(self) -> float:
        if self.on == "point":
            return self.change.delta
        return self.change.low if self.threshold.kind == "min" else self.change.high

    @property
    def passed(self) -> bool:
        return clears(self.bound, self.threshold)

    @property
    def limit(self) -> str:
        return "drop" if self.threshold.kind == "min" else "rise"

    @property
    def name(self) -> str:
        return _limit_name(self.threshold, self.baseline)

    def describe(self) -> str:
        """Δ, its interval and the MDE: what a table cell and a JUnit message state."""
        m = self.change
        return f"Δ {m.delta:+.3f} [{m.low:+.3f}, {m.high:+.3f}], mde {m.mde:.3f}"

    def failure_message(self) -> str:
        m, side = self.change, "lower bound" if self.threshold.kind == "min" else "upper bound"
        side = "Δ" if self.on == "point" else side
        return (f"{self.name} not met: {self.describe()}, {side} {self.bound:+.3f} vs limit "
                f"{self.threshold.value:+g} (n = {self.setting.n} paired texts; b = {m.b} regressed, c = {m.c} "
                "improved)")  # fmt: skip

    def as_dict(self) -> dict[str, object]:
        s = self.setting
        return {
            "model": s.model, "dataset": s.dataset, "panel": s.panel, "design": s.design, "n": s.n,
            "metric": self.threshold.metric, "kind": f"max_{self.limit}", "threshold": self.threshold.value,
            "baseline": self.baseline, "base_model": self.base_model, "on": self.on,
            **self.change.as_dict(), "bound": self.bound, "passed": self.passed, "failing_inputs": self.n_failing,
            "base_only_texts": self.base_only,
        }  # fmt: skip


@dataclass(frozen=True)
class _Unpaired:
    """A limit on a setting only one version scored: no Δ, no bound, no failing input; ``why`` says which."""

    setting: Paired
    threshold: Threshold
    baseline: str
    base_model: str
    why: str
    on: str = "interval"
    failing: tuple[FailingInput, ...] = ()
    n_failing: int = 0

    @property
    def bound(self) -> float:
        return float("nan")

    @property
    def name(self) -> str:
        return _limit_name(self.threshold, self.baseline)

    def describe(self) -> str:
        return self.why

    def _dict(self, **status: object) -> dict[str, object]:
        s = self.setting
        return {
            "model": s.model, "dataset": s.dataset, "panel": s.panel, "design": s.design, "n": 0,
            "metric": self.threshold.metric, "kind": "max_drop" if self.threshold.kind == "min" else "max_rise",
            "threshold": self.threshold.value, "baseline": self.baseline, "base_model": self.base_model,
            "on": self.on, **status, "bound": None, "failing_inputs": 0,
        }  # fmt: skip


@dataclass(frozen=True)
class MissingSetting(_Unpaired):
    """A limit on a setting BASE scored and CAND did not (``why``: "not scored by CAND"), or on no text in
    common ("no text scored by both"): it cannot be checked, and a gate that passed it would pass a
    candidate for not having run, so it fails."""

    passed: bool = False

    def failure_message(self) -> str:
        return f"{self.name} not met: {self.why} (BASE scored this setting; run CAND on it too)"

    def as_dict(self) -> dict[str, object]:
        return self._dict(missing=self.why, passed=False)


@dataclass(frozen=True)
class NewSetting(_Unpaired):
    """A limit on a setting CAND scored and BASE did not: there is nothing to regress from, so it is not
    checked (it neither passes nor fails the gate), but it is named, so a reader sees what went unchecked."""

    why: str = "not scored by BASE"
    passed: bool = True  # it does not block the gate; the output says "not checked"

    def skip_message(self) -> str:
        return f"{self.name} not checked: {self.why} (nothing to regress from)"

    def as_dict(self) -> dict[str, object]:
        return self._dict(skipped=self.why, passed=None)


#: what a limit on one setting gives: a checked change, a setting CAND lacks (fails), or one BASE lacks
Limited = RegressionResult | MissingSetting | NewSetting


def _limit_name(threshold: Threshold, baseline: str) -> str:
    """``ΔP4 vs BASE ≥ -0.02`` (a drop of at most 0.02), in display spelling."""
    sign = "≥" if threshold.kind == "min" else "≤"
    return f"Δ{display(threshold.metric)} vs {baseline} {sign} {threshold.value:g}"


def parse_limits(drops: Sequence[str] = (), rises: Sequence[str] = ()) -> list[Threshold]:
    """``--max-drop P4=0.02`` / ``--max-rise F+=0.02`` → bounds on Δ (drops first), checked like ``--max``:
    a known compared metric, a fraction in [0, 1], and the direction in which that metric gets worse."""
    out: list[Threshold] = []
    for option, items in (("max-drop", drops), ("max-rise", rises)):
        kind = LIMITS[option]
        for item in items:
            metric, sep, value = item.partition("=")
            if not sep or not metric.strip():
                raise PfrError(f"--{option} {item!r}: write METRIC=VALUE, e.g. --{option} P4=0.02")
            try:
                v = float(value)
            except ValueError:
                raise PfrError(f"--{option} {item!r}: {value!r} is not a number") from None
            keys = canonical(metric)
            if any(k not in COMPARED for k in keys):
                raise PfrError(f"--{option} {item!r}: a comparison has no {metric.strip()}; use one of A+, A−, "
                               "F+, J (each U and C, or _U / _C), DR-R, DR-F, P4, INV")  # fmt: skip
            _check_range(option, item, metric.strip(), value.strip(), v, delta=False)
            for key in keys:
                worse = "max" if key in LOWER_IS_BETTER else "min"
                if kind != worse:
                    other = "max-rise" if worse == "max" else "max-drop"
                    better = "lower" if worse == "max" else "higher"
                    raise PfrError(f"--{option} {item!r}: {better} is better for {display(key)}, so a regression "
                                   f"is a {other[4:]}: write --{other} {item.strip()}")  # fmt: skip
                out.append(Threshold(key, kind, -v if kind == "min" else v, item))
    return out


def check_pairing(baseline: str | None, limits: Sequence[Threshold]) -> None:
    """A limit needs a baseline to move from, and a baseline is there for its limits."""
    if limits and baseline is None:
        raise PfrError("--max-drop and --max-rise bound a change from a baseline: give --baseline BASE")
    if baseline is not None and not limits:
        raise PfrError("--baseline needs at least one --max-drop or --max-rise (e.g. --max-drop P4=0.02)")


def gate_against(
    baseline: str, cand: str, limits: Sequence[Threshold], *, on: str = "interval", draws: int = 10_000, seed: int = 0
) -> list[Limited]:
    """``cand`` (a store or ``STORE@MODEL``) against ``baseline``, as ``pfr compare`` pairs them."""
    return evaluate_limits(
        compare_sides(load_side(baseline, "BASE"), load_side(cand, "CAND"), draws=draws, seed=seed), limits, on
    )


def candidate_report(cand: str, *, draws: int = 10_000, seed: int = 0) -> Report:
    """The report of ``cand`` alone (one model of its store), for the ``--min``/``--max`` beside the limits."""
    side = load_side(cand, "CAND")
    return build_report(side.results, draws=check_draws(draws, seed), seed=seed, stores=[cand])


def evaluate_limits(comp: Comparison, limits: Sequence[Threshold], on: str = "interval") -> list[Limited]:
    """Every limit on every setting the comparison paired; a failed check carries the texts that pass its
    metric in BASE and fail it in CAND (for P4: the texts newly broken), with their decisions under both
    versions. A setting BASE scored and CAND did not fails each limit (:class:`MissingSetting`); one CAND
    alone scored has nothing to regress from: its limits are listed as not checked (:class:`NewSetting`)."""
    check_on(on)
    out: list[Limited] = []
    for s in comp.settings:
        where = Paired(comp.cand_model, s.dataset, s.panel, s.design, s.n)
        for t in limits:
            res = RegressionResult(where, t, s.metrics[t.metric], comp.base, comp.base_model, on,
                                   base_only=len(s.only_base))  # fmt: skip
            if not res.passed:  # the texts that pass this metric in BASE and fail it in CAND
                worse = s.regressed[t.metric]
                res = RegressionResult(where, t, res.change, comp.base, comp.base_model, on,
                                       _inputs(worse[:MAX_INPUTS]), len(worse), len(s.only_base))  # fmt: skip
            out.append(res)
    for key in comp.only_base:
        why = "no text scored by both" if key in comp.only_cand else "not scored by CAND"
        where = Paired(comp.cand_model, *key, 0)
        out.extend(MissingSetting(where, t, comp.base, comp.base_model, why, on) for t in limits)
    for key in comp.only_cand:
        if key not in comp.only_base:
            where = Paired(comp.cand_model, *key, 0)
            out.extend(NewSetting(where, t, comp.base, comp.base_model, on=on) for t in limits)
    return out


def check_stores(
    stores: Sequence[str],
    mins: Sequence[str],
    maxs: Sequence[str],
    on: str,
    draws: int,
    seed: int,
    baseline: str | None,
    drops: Sequence[str],
    rises: Sequence[str],
) -> list[CheckResult | Limited]:
    """What ``pfr check`` decides: every ``--min``/``--max`` on every setting of ``stores``, or with
    ``baseline`` the one candidate in ``stores`` against it (``--max-drop``/``--max-rise``), its
    absolute limits then on the candidate alone. Every option is checked before a store is read."""
    thresholds = parse_thresholds(mins, maxs)
    limits = parse_limits(drops, rises)
    check_on(on)
    check_pairing(baseline, limits)
    if baseline is None:
        return list(evaluate(load_report(list(stores), draws=draws, seed=seed), thresholds, on))
    if len(stores) != 1:
        raise DataError(f"--baseline compares one candidate (a store or STORE@MODEL), not {len(stores)} stores")
    results: list[CheckResult | Limited] = []
    if thresholds:
        results.extend(evaluate(candidate_report(stores[0], draws=draws, seed=seed), thresholds, on))
    return [*results, *gate_against(baseline, stores[0], limits, on=on, draws=draws, seed=seed)]


def _inputs(changes: Sequence[TextChange]) -> tuple[FailingInput, ...]:
    """A changed text as a failing input: each request's choice written ``BASE → CAND``."""
    return tuple(
        FailingInput(t.text_id, t.text, tuple((c, f"{t.base[c]} → {t.cand[c]}", t.expected[c]) for c in t.cand))
        for t in changes
    )
