"""Two versions of one model on the same texts (docs/method.md §7.1): paired deltas, tests and the MDE.

A release asks whether the candidate is worse than the baseline *on the same inputs*. Each setting
(dataset × panel × design) found in both is paired on the texts both scored: the Δ of every metric is
a mean of per-text differences, its interval resamples texts jointly for both versions (one draw of
text indices applied to both indicator matrices), and an exact McNemar test counts the texts that
regressed (``b``) against those that improved (``c``). Nothing found on one side only is dropped
silently: such settings and texts are listed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pfr.analysis.bootstrap import check_draws, resample_blocks, setting_rng
from pfr.analysis.metrics import METRIC_COLUMNS, QUAD, identity_key, model_labels, quad_indicators, results_frame
from pfr.analysis.reference import expand
from pfr.analysis.stats_tests import holm, mcnemar_exact
from pfr.design.invalid import is_invalid
from pfr.errors import DataError
from pfr.run.store import Store, StoredResult

#: the compared metrics, in report order
COMPARED = ("A+_U", "A+_C", "A-_U", "A-_C", "F+_U", "F+_C", "J_U", "J_C", "DR_R", "DR_F", "P4", "INV")
#: rates where lower is better: a text *passes* when its indicator is 0 (no false fallback, no
#: decision change, no invalid answer), so ``b`` (pass in BASE, fail in CAND) always counts regressions
LOWER_IS_BETTER = frozenset({"F+_U", "F+_C", "DR_R", "DR_F", "INV"})
#: z_{1−α/2} + z_{power} at α = .05 and 80 % power
Z_MDE = 1.959963984540054 + 0.8416212335729143
COMPARE_KEY = "compare"  # mixed into each setting's bootstrap seed

Key = tuple[str, str, str]  # dataset, panel, design


def mde(b: int, c: int, n: int) -> float:
    """The smallest Δ the ``n`` paired texts detect with 80 % power at α = .05 (two-sided).

    From the observed discordant share p_d = (b + c) / n: ``Z_MDE · sqrt(p_d / n)``. With no
    discordant text p_d = 1/n is used as a floor (so the MDE is ``Z_MDE / n``, not 0).
    """
    if n <= 0:
        return math.nan
    p_d = (b + c) / n if b + c else 1.0 / n
    return Z_MDE * math.sqrt(p_d / n)


@dataclass(frozen=True)
class MetricChange:
    """One metric of one setting under both versions (fractions; ``delta`` = cand − base)."""

    base: float
    cand: float
    delta: float
    low: float
    high: float
    b: int  # texts that pass in BASE and fail in CAND (regressions)
    c: int  # texts that fail in BASE and pass in CAND
    p: float
    p_holm: float
    mde: float

    def as_dict(self) -> dict[str, float | int]:
        return {"base": self.base, "cand": self.cand, "delta": self.delta, "low": self.low, "high": self.high,
                "b": self.b, "c": self.c, "p": self.p, "p_holm": self.p_holm, "mde": self.mde}  # fmt: skip


@dataclass(frozen=True)
class TextChange:
    """A text whose P4 changed: its four decisions under both versions (option labels)."""

    text_id: str
    text: str
    expected: dict[str, str]  # cell → the correct option's label
    base: dict[str, str]  # cell → the label BASE chose ("(invalid)" for an invalid answer)
    cand: dict[str, str]

    def as_dict(self) -> dict[str, object]:
        return {"text_id": self.text_id, "text": self.text, "expected": self.expected, "base": self.base,
                "cand": self.cand}  # fmt: skip


@dataclass(frozen=True)
class SettingChange:
    """One setting found in both versions, paired on its ``n`` common texts."""

    dataset: str
    panel: str
    design: str
    n: int
    metrics: dict[str, MetricChange]
    newly_broken: tuple[TextChange, ...]  # P4 in BASE, not in CAND
    newly_fixed: tuple[TextChange, ...]  # P4 in CAND, not in BASE
    only_base: tuple[str, ...]  # text ids scored (a complete quad) only by BASE
    only_cand: tuple[str, ...]
    #: per metric, the texts that pass it in BASE and fail it in CAND (McNemar's b): a gate's failing inputs
    regressed: dict[str, tuple[TextChange, ...]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "dataset": self.dataset, "panel": self.panel, "design": self.design, "n": self.n,
            "metrics": {k: m.as_dict() for k, m in self.metrics.items()},
            "newly_broken": [t.text_id for t in self.newly_broken],
            "newly_fixed": [t.text_id for t in self.newly_fixed],
            "changed_texts": [{"status": s, **t.as_dict()} for s, ts in
                              (("broken", self.newly_broken), ("fixed", self.newly_fixed)) for t in ts],
            "only_base_texts": list(self.only_base), "only_cand_texts": list(self.only_cand),
        }  # fmt: skip


@dataclass(frozen=True)
class Side:
    """One version: where it was read from and which model it is."""

    spec: str
    model: str
    results: tuple[StoredResult, ...]


Quads = dict[tuple[str, str, str, str], dict[str, StoredResult]]  # (dataset, panel, design, text) → cell → result


@dataclass(frozen=True)
class PerText:
    """What a comparison was computed from, per text (the HTML viewer's cards): each version's indicator
    rows per setting (index: text id) and its four stored results per text."""

    base: dict[Key, pd.DataFrame]
    cand: dict[Key, pd.DataFrame]
    base_quads: Quads
    cand_quads: Quads


@dataclass(frozen=True)
class Comparison:
    """``cand`` against ``base`` on every setting both scored."""

    base: str
    cand: str
    base_model: str
    cand_model: str
    settings: tuple[SettingChange, ...]
    only_base: tuple[Key, ...]  # settings scored only by BASE
    only_cand: tuple[Key, ...]
    draws: int
    seed: int
    per_text: PerText | None = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict[str, object]:
        return {
            "base": {"spec": self.base, "model": self.base_model},
            "cand": {"spec": self.cand, "model": self.cand_model},
            "draws": self.draws, "seed": self.seed,
            "settings": [s.as_dict() for s in self.settings],
            "only_base_settings": [dict(zip(("dataset", "panel", "design"), k)) for k in self.only_base],
            "only_cand_settings": [dict(zip(("dataset", "panel", "design"), k)) for k in self.only_cand],
        }  # fmt: skip


def _split(spec: str) -> tuple[str, str | None]:
    """``STORE`` or ``STORE@MODEL``: a path that exists is a store even when its name holds an ``@``."""
    if Path(spec).exists():
        return spec, None
    for i, ch in enumerate(spec):
        if ch == "@" and i and Path(spec[:i]).is_dir():
            return spec[:i], spec[i + 1 :]
    return spec, None


def load_side(spec: str, role: str = "BASE") -> Side:
    """The results of one version: a store holding one model, or ``STORE@MODEL`` (a model label as
    ``pfr report`` names it) to pick one model of a store that holds several."""
    path, wanted = _split(spec)
    if not Path(path).is_dir():
        raise DataError(f"{role} {spec}: no results store {path} (give STORE or STORE@MODEL)")
    with Store(path, create=False) as st:
        results = list(st.results())
    labels = model_labels(results)
    names = sorted(set(labels.values()))
    if not names:
        raise DataError(f"{role} {spec}: the store {path} holds no scored request")
    if wanted is None:
        if len(names) > 1:
            raise DataError(f"{role} {spec}: the store holds {len(names)} models ({', '.join(names)}); "
                            f"pick one as {path}@MODEL")  # fmt: skip
        wanted = names[0]
    elif wanted not in names:
        raise DataError(f"{role} {spec}: no model {wanted!r} in {path} (it holds {', '.join(names)})")
    picked = [r for r in results if labels[identity_key(r.model)] == wanted]
    return Side(spec, wanted, tuple(expand(picked)[0]))  # classify-then-map: its four mapped requests per text


def _indicators(side: Side) -> pd.DataFrame:
    ind = quad_indicators(results_frame(side.results, [side.model] * len(side.results)))
    return ind.droplevel("model") if not ind.empty else ind


def _quads(side: Side) -> Quads:
    out: Quads = {}
    for r in side.results:
        q = r.request
        out.setdefault((q.dataset, q.panel, q.design, q.text_id), {}).setdefault(q.assignment + q.definition, r)
    return out


def _label(r: StoredResult, index: int) -> str:
    if bool(is_invalid(np.asarray([index]))[0]) or not 0 <= index < len(r.request.options):
        return "(invalid)"
    return r.request.options[index].label


def _text_change(tid: str, bq: dict[str, StoredResult], cq: dict[str, StoredResult]) -> TextChange:
    return TextChange(
        tid,
        bq["RU"].request.text,
        {c: _label(bq[c], bq[c].request.expected) for c in QUAD},
        {c: _label(bq[c], bq[c].choice) for c in QUAD},
        {c: _label(cq[c], cq[c].choice) for c in QUAD},
    )


def _passes(x: np.ndarray, metric: str) -> np.ndarray:
    return x == 0 if metric in LOWER_IS_BETTER else x == 1


def _setting(
    key: Key, xb: pd.DataFrame, xc: pd.DataFrame, bq: dict, cq: dict, draws: int, seed: int
) -> tuple[SettingChange, list[float]]:
    """One setting's point estimates, intervals, unadjusted tests and changed texts."""
    tb, tc = [str(t) for t in xb.index], [str(t) for t in xc.index]
    in_c = set(tc)
    common = [t for t in tb if t in in_c]
    in_b = set(tb)
    cols = [METRIC_COLUMNS[m] for m in COMPARED]
    b = xb.loc[common, cols].to_numpy(dtype=np.float64)
    c = xc.loc[common, cols].to_numpy(dtype=np.float64)
    n = len(common)
    diff = c - b
    boot = np.concatenate([cnt @ diff / n for cnt in resample_blocks(n, draws, setting_rng(seed, [*key, COMPARE_KEY]))])
    lows, highs = np.quantile(boot, [0.025, 0.975], axis=0)
    raw: list[tuple[float, float, float, float, float, int, int, float, float]] = []
    for j, metric in enumerate(COMPARED):
        pb, pc = _passes(b[:, j], metric), _passes(c[:, j], metric)
        nb, nc, p = mcnemar_exact(pb, pc)
        mb, mc = float(b[:, j].mean()), float(c[:, j].mean())
        delta = float(diff[:, j].mean())
        lo, hi = (delta, delta) if np.ptp(boot[:, j]) == 0 else (float(lows[j]), float(highs[j]))
        raw.append((mb, mc, delta, min(lo, delta), max(hi, delta), nb, nc, p, mde(nb, nc, n)))
    p4 = COMPARED.index("P4")
    broken = [t for t, x, y in zip(common, b[:, p4], c[:, p4]) if x == 1 and y == 0]
    fixed = [t for t, x, y in zip(common, b[:, p4], c[:, p4]) if x == 0 and y == 1]
    changes: dict[str, TextChange] = {}

    def change(t: str) -> TextChange:
        if t not in changes:
            changes[t] = _text_change(t, bq[(*key, t)], cq[(*key, t)])
        return changes[t]

    regressed = {}
    for j, metric in enumerate(COMPARED):
        worse = _passes(b[:, j], metric) & ~_passes(c[:, j], metric)
        regressed[metric] = tuple(change(t) for t, w in zip(common, worse) if w)
    setting = SettingChange(
        *key,
        n=n,
        metrics={m: MetricChange(*r[:8], p_holm=math.nan, mde=r[8]) for m, r in zip(COMPARED, raw)},
        newly_broken=tuple(change(t) for t in broken),
        newly_fixed=tuple(change(t) for t in fixed),
        only_base=tuple(t for t in tb if t not in in_c),
        only_cand=tuple(t for t in tc if t not in in_b),
        regressed=regressed,
    )
    return setting, [r[7] for r in raw]


def _by_setting(ind: pd.DataFrame) -> dict[Key, pd.DataFrame]:
    if ind.empty:
        return {}
    out: dict[Key, pd.DataFrame] = {}
    for key, block in ind.groupby(level=["dataset", "panel", "design"], sort=False):
        k = tuple(str(v) for v in key)
        out[(k[0], k[1], k[2])] = block.droplevel(["dataset", "panel", "design"])
    return out


def compare_sides(base: Side, cand: Side, *, draws: int = 10_000, seed: int = 0) -> Comparison:
    """``cand`` against ``base``: every setting both scored, paired on their common texts; Holm over
    all metrics × settings of the comparison."""
    draws = check_draws(draws, seed)
    sb, sc = _by_setting(_indicators(base)), _by_setting(_indicators(cand))
    bq, cq = _quads(base), _quads(cand)
    settings: list[SettingChange] = []
    pvalues: list[float] = []
    empty: list[Key] = []
    for key, xb in sb.items():
        if key not in sc:
            continue
        if not set(map(str, xb.index)) & set(map(str, sc[key].index)):
            empty.append(key)
            continue
        s, ps = _setting(key, xb, sc[key], bq, cq, draws, seed)
        settings.append(s)
        pvalues.extend(ps)
    if not settings:

        def names(keys: Sequence[Key]) -> str:
            return ", ".join(" · ".join(k) for k in keys) or "none"

        raise DataError(f"{base.spec} and {cand.spec} share no scored text: BASE has {names(list(sb))}; CAND has "
                        f"{names(list(sc))}")  # fmt: skip
    adjusted, _ = holm(pvalues)
    it = iter(adjusted)
    settings = [
        SettingChange(
            s.dataset, s.panel, s.design, s.n,
            {k: _with_holm(m, next(it)) for k, m in s.metrics.items()},
            s.newly_broken, s.newly_fixed, s.only_base, s.only_cand, s.regressed,
        )
        for s in settings
    ]  # fmt: skip
    return Comparison(
        base.spec, cand.spec, base.model, cand.model, tuple(settings),
        only_base=tuple(k for k in sb if k not in sc) + tuple(empty),
        only_cand=tuple(k for k in sc if k not in sb) + tuple(empty),
        draws=draws, seed=seed, per_text=PerText(sb, sc, bq, cq),
    )  # fmt: skip


def _with_holm(m: MetricChange, p_holm: float) -> MetricChange:
    return MetricChange(m.base, m.cand, m.delta, m.low, m.high, m.b, m.c, m.p, p_holm, m.mde)


def compare(base: str, cand: str, *, draws: int = 10_000, seed: int = 0) -> Comparison:
    """Compare two versions given as ``STORE`` or ``STORE@MODEL`` (see :func:`compare_sides`)."""
    return compare_sides(load_side(base, "BASE"), load_side(cand, "CAND"), draws=draws, seed=seed)
