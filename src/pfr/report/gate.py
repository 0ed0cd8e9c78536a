"""The PFR Test as a release gate: thresholds on a report's metrics, each a pass or a fail.

A check is one metric of one setting (model × dataset × panel × design) against one threshold.
By default the bound of the 95 % paired-bootstrap interval must clear it (the lower bound for
``--min``, the upper bound for ``--max``), so a pass is evidence rather than a lucky sample;
``on="point"`` compares the point estimate instead. A failed check carries the inputs that pulled
its metric the wrong way, so that a CI log shows what to look at.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pfr.analysis.bootstrap import Interval
from pfr.analysis.metrics import DELTA_OF, METRIC_COLUMNS
from pfr.design.invalid import answered
from pfr.errors import PfrError
from pfr.report.model import Report, Setting

#: metrics a check may name (``A+`` etc. expand to their U and C versions), in display spelling
CHECKABLE = ("A+", "A−", "F+", "J", "DR-R", "DR-F", "P4", "INV", "ΔA+", "ΔA−", "ΔF+", "ΔJ")
ON = ("interval", "point")
#: failing inputs a failed check lists
MAX_INPUTS = 5


@dataclass(frozen=True)
class Threshold:
    """One ``--min``/``--max`` as given: ``metric`` in its canonical key (``A-_U``, ``DR_F``, ``ΔA-``)."""

    metric: str
    kind: str  # "min" or "max"
    value: float
    given: str  # the text the user wrote, for messages


@dataclass(frozen=True)
class FailingInput:
    """One text whose indicator works against a failed check, with the four decisions made."""

    text_id: str
    text: str
    choices: tuple[tuple[str, str, str], ...]  # (cell, chosen option, expected option) for RU, RC, FU, FC


@dataclass(frozen=True)
class CheckResult:
    """One threshold applied to one setting."""

    setting: Setting
    threshold: Threshold
    interval: Interval
    on: str
    failing: tuple[FailingInput, ...] = ()
    n_failing: int = 0

    @property
    def bound(self) -> float:
        """What is compared: the point estimate, or the interval bound on the threshold's side."""
        if self.on == "point":
            return self.interval.value
        return self.interval.lo if self.threshold.kind == "min" else self.interval.hi

    @property
    def passed(self) -> bool:
        return clears(self.bound, self.threshold)

    @property
    def name(self) -> str:
        """``P4 ≥ 0.9`` style, in display spelling."""
        sign = "≥" if self.threshold.kind == "min" else "≤"
        return f"{display(self.threshold.metric)} {sign} {self.threshold.value:g}"

    def describe(self) -> str:
        """The value and its interval, as a table cell and a JUnit message state them."""
        return describe_interval(self)

    def failure_message(self) -> str:
        side = "lower bound" if self.threshold.kind == "min" else "upper bound"
        side = "point estimate" if self.on == "point" else side
        return (f"{self.name} not met: value {self.describe()}, {side} {self.bound:.3f} vs threshold "
                f"{self.threshold.value:g} (n = {self.setting.n})")  # fmt: skip

    def as_dict(self) -> dict[str, object]:
        s = self.setting
        return {
            "model": s.model, "dataset": s.dataset, "panel": s.panel, "design": s.design, "n": s.n,
            "metric": self.threshold.metric, "kind": self.threshold.kind, "threshold": self.threshold.value,
            "on": self.on, **self.interval.as_dict(), "bound": self.bound, "passed": self.passed,
            "failing_inputs": self.n_failing,
        }  # fmt: skip


def clears(bound: float, threshold: Threshold) -> bool:
    """Whether ``bound`` is on the passing side of ``threshold`` (an undefined bound never is)."""
    if math.isnan(bound):
        return False
    return bound >= threshold.value if threshold.kind == "min" else bound <= threshold.value


def display(metric: str) -> str:
    """``A-_U`` → ``A− (U)``, ``DR_F`` → ``DR-F``, ``ΔA-`` → ``ΔA−``, ``INV_RC`` → ``INV (RC)``."""
    m = metric.replace("A-", "A−").replace("DR_", "DR-")
    if m.startswith("INV_"):
        return f"INV ({m[4:]})"
    if m.endswith(("_U", "_C")):
        return f"{m[:-2]} ({m[-1]})"
    return m


_DELTA_PREFIX = re.compile(r"^(?:Δ|delta[-_ ]?|d)(?=[AFJ])", re.IGNORECASE)


def canonical(name: str) -> list[str]:
    """The metric keys a name stands for: ``A+`` → ``A+_U``, ``A+_C``; ``A-_U`` → itself; ``dA-`` → ``ΔA-``.

    Accepts ``−`` or ``-``, ``DR-F``/``DR_F``/``DRF``, a Δ written ``Δ``, ``d``, ``D`` or ``delta-``,
    any letter case. Raises :class:`PfrError` naming the allowed spellings otherwise.
    """
    raw = name.strip().replace("−", "-").replace("–", "-")
    m = _DELTA_PREFIX.match(raw)
    if m:
        base = raw[m.end() :].upper()
        if base in DELTA_OF and base != "B":
            return [f"Δ{base}"]
        raise PfrError(_unknown(name))
    up = raw.upper().replace(" ", "")
    dr = re.fullmatch(r"DR[-_]?([RF])", up)
    if dr:
        return [f"DR_{dr.group(1)}"]
    if up == "P4":
        return ["P4"]
    inv = re.fullmatch(r"INV(?:[-_ ]?\(?([RF][UC])\)?)?", up)
    if inv:
        return [f"INV_{inv.group(1)}" if inv.group(1) else "INV"]
    parts = re.fullmatch(r"(A\+|A-|F\+|J)(?:[-_ ]?\(?([UC])\)?)?", up)
    if not parts:
        raise PfrError(_unknown(name))
    base, which = parts.group(1), parts.group(2)
    return [f"{base}_{d}" for d in ((which,) if which else ("U", "C"))]


def _unknown(name: str) -> str:
    return (
        f"unknown metric {name!r}: use one of {', '.join(CHECKABLE)} (ASCII: A-, DR_F, dA-; "
        "_U or _C picks one definition; INV_RU … one request kind)"
    )


def parse_thresholds(mins: Sequence[str] = (), maxs: Sequence[str] = ()) -> list[Threshold]:
    """``--min P4=0.8`` / ``--max DR-F=0.1`` → thresholds, in the order given (mins first)."""
    out: list[Threshold] = []
    for kind, items in (("min", mins), ("max", maxs)):
        for item in items:
            metric, sep, value = item.partition("=")
            if not sep or not metric.strip():
                raise PfrError(f"--{kind} {item!r}: write METRIC=VALUE, e.g. --{kind} P4=0.8")
            try:
                v = float(value)
            except ValueError:
                raise PfrError(f"--{kind} {item!r}: {value!r} is not a number") from None
            if not math.isfinite(v):
                raise PfrError(f"--{kind} {item!r}: the threshold must be a finite number")
            keys = canonical(metric)
            _check_range(kind, item, metric.strip(), value.strip(), v, delta=keys[0].startswith("Δ"))
            out.extend(Threshold(key, kind, v, item) for key in keys)
    return out


def _check_range(kind: str, item: str, metric: str, given: str, v: float, delta: bool) -> None:
    """A rate is a fraction in [0, 1], a Δ one in [−1, 1]: anything else (a percentage, most often)
    would pass or fail every setting whatever its value, so it is refused with the fraction it may mean."""
    lo = -1.0 if delta else 0.0
    if lo <= v <= 1.0:
        return
    what = "a Δ is a difference of fractions, in [-1, 1]" if delta else f"{metric} is a fraction in [0, 1]"
    hint = f"; write {metric}={v / 100:g}, not {given}" if lo <= v / 100 <= 1.0 else ""
    raise PfrError(f"--{kind} {item!r}: {what}{hint}")


def metric_interval(s: Setting, metric: str) -> Interval:
    if metric.startswith("Δ"):
        return s.delta[metric[1:]]
    return s.metrics[metric]


def require_quads(report: Report) -> None:
    """An empty outcome is an error: a report or gate with no complete quad has nothing to say."""
    if not report.settings:
        where = ", ".join(report.stores) or "the results given"
        raise PfrError(
            f"{where}: no complete quads (texts with all four requests RU, RC, FU, FC scored); "
            "run `pfr run` into this store first"
        )


def check_on(on: str) -> None:
    """``--on`` (or a study's ``on``) names what must clear a threshold: the interval bound or the point."""
    if on not in ON:
        raise PfrError(f"--on {on!r}: use interval or point")


def evaluate(report: Report, thresholds: Sequence[Threshold], on: str = "interval") -> list[CheckResult]:
    """Every threshold on every setting of the report (reference-correct subsets are left out)."""
    check_on(on)
    if not thresholds:
        raise PfrError("pfr check needs at least one --min or --max (e.g. --min P4=0.8)")
    require_quads(report)
    out = []
    for s in report.settings:
        if s.subset is not None:
            continue
        for t in thresholds:
            res = CheckResult(s, t, metric_interval(s, t.metric), on)
            if not res.passed:
                bad = _failing_texts(report, s, t)
                res = CheckResult(s, t, res.interval, on, tuple(_inputs(report, s, bad[:MAX_INPUTS])), len(bad))
            out.append(res)
    return out


def _columns(metric: str) -> tuple[str, str | None]:
    """The indicator column of a metric; for a Δ the U column and the C column."""
    if metric.startswith("Δ"):
        base = metric[1:]
        return METRIC_COLUMNS[f"{base}_U"], METRIC_COLUMNS[f"{base}_C"]
    return METRIC_COLUMNS[metric], None


def _failing_texts(report: Report, s: Setting, t: Threshold) -> list[str]:
    """Text ids, in panel order, whose indicator pulls the metric across the threshold."""
    rows, _ = report.block(s)
    col, col_c = _columns(t.metric)
    # a Δ's per-text value is C − U; a rate's is 0 or 1 (INV: the share of the text's four requests)
    values = rows[col].to_numpy() if col_c is None else rows[col_c].to_numpy() - rows[col].to_numpy()
    bad = values < 1 if col_c is None else values < 0
    if t.kind == "max":
        bad = values > 0
    ids = [str(k[-1]) for k in rows.index]
    return [tid for tid, b in zip(ids, bad) if b]


def _inputs(report: Report, s: Setting, text_ids: Sequence[str]) -> list[FailingInput]:
    out = []
    for tid in text_ids:
        cells = report.quads.get((*s.key, tid), {})
        choices = []
        text = ""
        for cell in ("RU", "RC", "FU", "FC"):
            r = cells.get(cell)
            if r is None:
                continue
            text = r.request.text
            opts = r.request.options
            choices.append((cell, _label(opts, r.choice), _label(opts, r.request.expected)))
        out.append(FailingInput(tid, text, tuple(choices)))
    return out


def _label(options: Sequence[object], i: int) -> str:
    if not answered(i) or i >= len(options):  # docs/method.md §6.1: an invalid answer names no option
        return "(invalid: no option)"
    o = options[i]
    category = getattr(o, "category", None)
    return str(category if category is not None else getattr(o, "label", "?"))


def exit_code(results: Sequence[CheckResult]) -> int:
    """0 when every check passes, 1 when any fails."""
    return 0 if all(r.passed for r in results) else 1


def describe_interval(r: CheckResult) -> str:
    iv = r.interval
    return f"{iv.value:.3f} [{iv.lo:.3f}, {iv.hi:.3f}]"
