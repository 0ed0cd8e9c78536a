"""Selection rules on fixed scores (docs/method.md §8, paper §5.3–5.4 and Appendix E).

Scores stay fixed; only the rule that turns them into a decision changes. The margin of a request
is ``m = log p_fallback − log max p_regular``; a threshold rule selects the fallback iff ``m > τ``,
else the best regular option (choice order breaks ties). ``τ = 0`` reproduces the native decision
except on tied maxima.

* :func:`fit_development` — the threshold that maximises mean B over U and C on a development panel;
* :func:`individual_oracle`, :func:`shared_oracle` — what any per-input / one shared threshold
  could recover on the test set (they use test labels: analysis only);
* :class:`OneSidedCalibrator` — order-statistic calibration of false fallback at level α;
* :func:`refit_sensitivity` — paired bootstrap refits of the development threshold.

Development and test are kept apart by panel, never by which rows were stored last: the
development panel of a setting is dev, every other panel is test (:func:`pair_panels`), and a
text in both stops the analysis (:func:`shared_texts`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pfr.analysis.metrics import SETTING, identity_key, model_labels
from pfr.data.panels import normalise
from pfr.design.invalid import answered
from pfr.design.reference import is_reference
from pfr.design.types import Request
from pfr.errors import DataError
from pfr.options import ALPHA, DRAWS, PROBABILITY_OPEN, SEED, check_memory, parse
from pfr.run.store import StoredResult

CELLS = ("RU", "RC", "FU", "FC")
DEVELOPMENT = "development"

Setting = tuple[str, str, str, str]  # model, dataset, panel, design


def is_development_panel(panel: str) -> bool:
    """``development`` and its prefixes (``development-32``, ``development-64``): texts to fit on."""
    return panel == DEVELOPMENT or panel.startswith(DEVELOPMENT + "-")


@dataclass(frozen=True)
class MarginTable:
    """Per-text margins and regular-winner correctness of one setting (rows = texts).

    ``margin[:, j]`` is the margin of cell ``CELLS[j]``; ``gold_wins[:, d]`` says whether the best
    regular option of the gold-regular request under definition ``d`` (0 = U, 1 = C) is the gold.
    """

    text_ids: tuple[str, ...]
    margin: np.ndarray  # (n, 4)
    gold_wins: np.ndarray  # (n, 2) bool
    texts: tuple[str, ...] = ()  # the normalised texts, in row order (what two panels may share)

    @property
    def n(self) -> int:
        return len(self.text_ids)


def _margin(logprobs: tuple[float, ...], fallback_index: int) -> tuple[float, int]:
    regular = [(v, i) for i, v in enumerate(logprobs) if i != fallback_index]
    best_v = max(v for v, _ in regular)
    best_i = next(i for v, i in regular if v == best_v)  # first in order among tied maxima
    return logprobs[fallback_index] - best_v, best_i


def _unscored(r: StoredResult) -> str | None:
    """Why a result has no margin: an invalid answer (never a fallback pick, never correct) or a
    label-only one (no per-option scores); ``None`` for a scored, valid answer."""
    if not answered(r.choice) or (isinstance(r.meta, dict) and r.meta.get("invalid") is True):
        return "invalid"
    return "label-only" if r.label_only else None


def unscored_settings(results: Iterable[StoredResult]) -> dict[Setting, str]:
    """The settings with a request that has no margin, each with a one-line reason: thresholds
    leave the whole setting out (dropping its texts would flatter it), and the rest are analysed."""
    results = list(results)
    labels = model_labels(results)
    counts: dict[Setting, dict[str, int]] = {}
    for r in results:
        q = r.request
        why = None if is_reference(q) else _unscored(r)
        if why is not None:
            per = counts.setdefault((labels[identity_key(r.model)], q.dataset, q.panel, q.design), {})
            per[why] = per.get(why, 0) + 1
    said = {"invalid": "{} invalid answer(s) (naming no option)", "label-only": "{} label-only answer(s) (no scores)"}
    return {
        key: "; ".join(said[why].format(n) for why, n in sorted(per.items()))
        + ": not analysed (margins, thresholds and calibration need per-option scores)"
        for key, per in counts.items()
    }


def margin_tables(results: Iterable[StoredResult], labels: dict[str, str] | None = None) -> dict[Setting, MarginTable]:
    """Margin tables per setting (model, dataset, panel, design), complete quads only, panel order;
    ``labels``: the model labels of the whole store, when ``results`` are part of it."""
    rows = []
    results = list(results)
    labels = model_labels(results) if labels is None else labels
    normalised: dict[str, str] = {}
    for r in results:
        q = r.request
        if is_reference(q):  # a classification without a fallback has no margin
            continue
        if _unscored(r) is not None:  # a margin needs scores: refuse rather than read a label as one
            raise DataError(
                f"{labels[identity_key(r.model)]} · {q.dataset} · {q.panel} · {q.design} is {_unscored(r)} (answers "
                "without per-option scores); thresholds and calibration need a model that gives scores"
            )
        if q.text_id not in normalised:
            normalised[q.text_id] = normalise(q.text)
        m, best = _margin(r.logprobs, q.fallback_index)
        rows.append(
            {
                "model": labels[identity_key(r.model)],
                "dataset": q.dataset,
                "panel": q.panel,
                "design": q.design,
                "text_id": q.text_id,
                "index": q.index,
                "cell": q.assignment + q.definition,
                "margin": m,
                "gold_wins": best == q.expected if q.assignment == "R" else False,
            }
        )
    frame = pd.DataFrame(rows)
    out: dict[tuple[str, str, str, str], MarginTable] = {}
    if frame.empty:
        return out
    for key, block in frame.groupby(SETTING, sort=False):
        wide = block.pivot_table(index=["index", "text_id"], columns="cell", values="margin", aggfunc="first")
        wins = block.pivot_table(index=["index", "text_id"], columns="cell", values="gold_wins", aggfunc="first")
        wide = wide.reindex(columns=list(CELLS)).dropna()
        wins = wins.reindex(index=wide.index, columns=["RU", "RC"]).fillna(False)
        ids = tuple(str(t) for t in wide.index.get_level_values("text_id"))
        out[tuple(str(k) for k in key)] = MarginTable(  # type: ignore[index]
            ids, wide.to_numpy(dtype=np.float64), wins.to_numpy(dtype=bool), tuple(normalised[t] for t in ids)
        )
    return out


def pair_panels(
    dev: dict[Setting, MarginTable], test: dict[Setting, MarginTable], one_store: bool = False
) -> list[tuple[Setting, Setting]]:
    """(test setting, development setting) pairs, keyed by panel, never by storage order.

    A model × dataset × design is fitted on its development panel (``development``, or a prefix
    ``development-N``) in the development store, or, from a separate store, on its one panel there
    (a second file under the same ``--dataset-name``); it is tested on every other panel of the
    test store. One store may be both (``one_store``): its development panel is dev, the rest test.
    """
    panels: dict[tuple[str, str, str], list[str]] = {}
    for model, dataset, panel, design in dev:
        panels.setdefault((model, dataset, design), []).append(panel)
    fit_on: dict[tuple[str, str, str], str] = {}
    for (model, dataset, design), names in panels.items():
        chosen = [p for p in names if is_development_panel(p)] or ([] if one_store else names)
        if not chosen:
            continue
        if len(chosen) > 1:
            kind = "development panels" if is_development_panel(chosen[0]) else "panels (none a development panel)"
            raise DataError(
                f"{model} · {dataset} · {design}: the --dev store holds {kind} {', '.join(chosen)}; thresholds "
                "are fitted on one: give --dev a store with one development panel (pfr run --panel development)"
            )
        fit_on[(model, dataset, design)] = chosen[0]
    return [
        ((model, dataset, panel, design), (model, dataset, fit_on[(model, dataset, design)], design))
        for model, dataset, panel, design in test
        if (model, dataset, design) in fit_on and not is_development_panel(panel)
    ]


def shared_texts(pairs: Iterable[tuple[MarginTable, MarginTable, str]]) -> int:
    """Distinct normalised texts of a dataset in both a development table and its test table
    (``(dev, test, dataset)`` triples): a threshold fitted on a test text is not a development fit."""
    both = set()
    for dev, test, dataset in pairs:
        both |= {(dataset, t) for t in set(dev.texts) & set(test.texts)}
    return len(both)


def min_calibration_texts(alpha: float) -> int:
    """The fewest development texts whose ``⌈(n+1)(1−α)⌉``-th order statistic exists (19 at α=0.05):
    with fewer, :class:`OneSidedCalibrator` gives ``τ = +∞`` (the fallback is never picked)."""
    n = max(1, math.floor((1 - alpha) / alpha) - 1)
    while math.ceil((n + 1) * (1 - alpha)) > n:
        n += 1
    return n


def rates(table: MarginTable, tau: float | np.ndarray) -> dict[str, np.ndarray]:
    """A+, A−, F+ and B per definition under threshold(s) ``tau`` (scalar or 1-D array)."""
    t = np.atleast_1d(np.asarray(tau, dtype=np.float64))[:, None]  # (k, 1)
    m = table.margin
    out: dict[str, np.ndarray] = {}
    for d, name in enumerate(("U", "C")):
        r_fb = m[None, :, d] > t
        out[f"A+_{name}"] = (table.gold_wins[None, :, d] & ~r_fb).mean(axis=1)
        out[f"F+_{name}"] = r_fb.mean(axis=1)
        out[f"A-_{name}"] = (m[None, :, 2 + d] > t).mean(axis=1)
        out[f"B_{name}"] = (out[f"A+_{name}"] + out[f"A-_{name}"]) / 2
    all_gold: np.ndarray = np.all(table.gold_wins, axis=1)
    out["P4"] = (all_gold[None, :] & (m[:, :2].max(axis=1)[None, :] <= t) & (m[:, 2:].min(axis=1)[None, :] > t)).mean(
        axis=1
    )
    return out


def candidates(margins: np.ndarray) -> np.ndarray:
    """Midpoints of the sorted distinct margins, 0, and the two extreme endpoints."""
    v = np.unique(margins[np.isfinite(margins)])
    if v.size == 0:
        return np.array([0.0])
    mids = (v[:-1] + v[1:]) / 2
    return np.unique(np.concatenate([mids, [0.0, v[0] - 1.0, v[-1] + 1.0]]))


def _choose(cands: np.ndarray, mean_b: np.ndarray, false_fb: np.ndarray) -> float:
    """Highest mean B; ties prefer fewer false fallbacks, then smaller |τ|, then the larger τ."""
    order = np.lexsort((-cands, np.abs(cands), false_fb, -np.round(mean_b, 12)))
    return float(cands[order[0]])


def fit_development(dev: MarginTable) -> float:
    """The development threshold: maximise the mean over U and C of B on the development panel."""
    cands = candidates(dev.margin)
    r = rates(dev, cands)
    return _choose(cands, (r["B_U"] + r["B_C"]) / 2, r["F+_U"] + r["F+_C"])


def individual_oracle(test: MarginTable) -> int:
    """Inputs some per-input threshold gets right on all four requests (uses test labels)."""
    m = test.margin
    ok = test.gold_wins.all(axis=1) & (m[:, :2].max(axis=1) < m[:, 2:].min(axis=1))
    return int(ok.sum())


def shared_oracle(test: MarginTable) -> tuple[int, float]:
    """The single τ that maximises the count of inputs correct on all four requests, and that count."""
    m = test.margin
    cands = np.unique(np.concatenate([m[:, :2].max(axis=1), [0.0]]))
    counts = np.rint(rates(test, cands)["P4"] * test.n).astype(int)
    best = int(counts.max())
    ties = cands[counts == best]
    return best, float(ties[np.argmin(np.abs(ties))])


@dataclass
class OneSidedCalibrator:
    """Order-statistic control of false fallback at level ``alpha`` (scikit-learn conventions).

    ``fit`` takes the gold-regular margins of each definition; ``tau_`` is the larger of the
    per-definition thresholds, each the ``⌈(n+1)(1−α)⌉``-th order statistic (``+∞`` when that rank
    exceeds n), so both marginal one-sided bounds hold under exchangeability.
    """

    alpha: float = ALPHA

    def __post_init__(self) -> None:
        self.alpha = parse("alpha", self.alpha, PROBABILITY_OPEN)

    def fit(self, dev: MarginTable) -> OneSidedCalibrator:
        self.per_definition_: dict[str, float] = {}
        for d, name in enumerate(("U", "C")):
            scores = np.sort(dev.margin[:, d])
            n = scores.size
            rank = math.ceil((n + 1) * (1 - self.alpha))
            self.per_definition_[name] = float(scores[rank - 1]) if rank <= n else math.inf
        self.tau_ = max(self.per_definition_.values())
        return self

    def false_fallback(self, test: MarginTable) -> dict[str, float]:
        """Empirical F+ per definition on ``test`` under the fitted threshold."""
        r = rates(test, self.tau_)
        return {"F+_U": float(r["F+_U"][0]), "F+_C": float(r["F+_C"][0])}


def refit_weights(n: int, draws: int, seed: int = 0) -> np.ndarray:
    """(draws × n) multiplicities of the paired development resamples (each text with its four
    requests): ``default_rng(seed).multinomial(n, uniform, size=draws)``."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=draws)


def refit_thresholds(dev: MarginTable, weights: np.ndarray) -> np.ndarray:
    """The development threshold refitted on each resample (one row of ``weights`` each).

    Each refit recomputes its candidates from the resample's own margins (midpoints of its sorted
    distinct margins, 0, and its extremes ± 1), then maximises the resample's mean B with the
    usual tie-breaks."""
    taus = np.empty(len(weights))
    for i, w in enumerate(weights):
        keep = w > 0
        m, wins, share = dev.margin[keep], dev.gold_wins[keep], w[keep] / w.sum()
        cands = candidates(m)
        t = cands[None, :]
        b = np.zeros(len(cands))
        false_fb = np.zeros(len(cands))
        for d in range(2):
            r_fb = m[:, d, None] > t
            b += share @ (wins[:, d, None] & ~r_fb) + share @ (m[:, 2 + d, None] > t)  # A+ + A−
            false_fb += share @ r_fb
        taus[i] = _choose(cands, b / 4, false_fb)
    return taus


def refit_sensitivity(dev: MarginTable, test: MarginTable, draws: int = 2000, seed: int = 0) -> dict[str, float]:
    """Refit the development threshold on paired bootstrap resamples of the development texts
    (their four requests together; candidates recomputed from each resample), test scores fixed.
    Returns the median change of test mean B against native selection (τ = 0) and the share of
    refits that improve it."""
    check_memory(f"draws={draws}", draws * dev.n * 8.0 * 2)  # the (draws × texts) resample weights
    taus = refit_thresholds(dev, refit_weights(dev.n, draws, seed))
    test_r = rates(test, taus)
    base = rates(test, 0.0)
    change = (test_r["B_U"] + test_r["B_C"]) / 2 - float((base["B_U"][0] + base["B_C"][0]) / 2)
    return {"median_change_B": float(np.median(change)), "share_improving": float(np.mean(change > 0))}


def _calibration_note(n_dev: int, cal: OneSidedCalibrator) -> list[str]:
    if math.isfinite(cal.tau_):
        return []
    need = min_calibration_texts(cal.alpha)
    return [
        f"one-sided calibration: τ = {'+' if cal.tau_ > 0 else '-'}∞, {n_dev} development texts are too few "
        f"for α={cal.alpha:g} (at least {need}): the calibrated rule {'never' if cal.tau_ > 0 else 'always'} "
        "picks the fallback, so its test F+ is no evidence of calibration"
    ]


def _analyse(dev: MarginTable, test: MarginTable, alpha: float, draws: int, seed: int) -> dict[str, Any]:
    tau = fit_development(dev)
    native = {k: float(v[0]) for k, v in rates(test, 0.0).items()}
    tuned = {k: float(v[0]) for k, v in rates(test, tau).items()}
    shared_n, shared_tau = shared_oracle(test)
    cal = OneSidedCalibrator(alpha).fit(dev)
    return {
        "n": test.n,
        "n_dev": dev.n,
        "tau_dev": tau,
        "native": native,
        "dev_threshold": tuned,
        "oracle_individual": individual_oracle(test),
        "oracle_shared": shared_n,
        "oracle_shared_tau": shared_tau,
        "dev_threshold_p4": round(tuned["P4"] * test.n),
        "calibration": {
            "alpha": alpha,
            "tau_U": cal.per_definition_["U"],
            "tau_C": cal.per_definition_["C"],
            "tau": cal.tau_,
            **cal.false_fallback(test),
        },
        "refit": refit_sensitivity(dev, test, draws=draws, seed=seed),
        "notes": _calibration_note(dev.n, cal),
    }


def threshold_summary(
    dev_results: Iterable[StoredResult],
    test_results: Iterable[StoredResult],
    *,
    alpha: float = ALPHA,
    draws: int = 2000,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Every §8 analysis per model × dataset × test panel × design, fitted on that setting's
    development panel (:func:`pair_panels`; the same list object as both means one store). A text
    in both stops it (:class:`DataError`); a setting without scores (label-only or invalid answers)
    or, in one store, without a development panel is a row with ``skipped`` and the reason."""
    alpha, draws = parse("alpha", alpha, PROBABILITY_OPEN), parse("draws", draws, DRAWS)
    seed = parse("seed", seed, SEED)
    one_store = dev_results is test_results
    dev_results = list(dev_results)
    dev_tables, dev_skipped = _scored_tables(dev_results)
    test_tables, test_skipped = (dev_tables, dev_skipped) if one_store else _scored_tables(list(test_results))
    pairs = pair_panels(dev_tables, test_tables, one_store)
    n_shared = shared_texts((dev_tables[d], test_tables[t], t[1]) for t, d in pairs)
    if n_shared:
        raise DataError(
            f"{n_shared} text(s) are in both the development and the test set (normalised text); fit and "
            "test on texts kept apart: split one file with --dev-fraction F and give its development panel "
            "to --dev (docs/usage.md, Thresholds on your own data)"
        )
    out: list[dict[str, Any]] = []
    for (model, dataset, panel, design), dev_key in pairs:
        row = _analyse(dev_tables[dev_key], test_tables[(model, dataset, panel, design)], alpha, draws, seed)
        setting = {"model": model, "dataset": dataset, "panel": panel, "design": design}
        out.append({**setting, "dev_panel": dev_key[2], **row})
    unpaired = {t: NO_DEVELOPMENT for t in test_tables if one_store and not is_development_panel(t[2])}
    for t, _ in pairs:
        unpaired.pop(t, None)
    for (model, dataset, panel, design), why in {**dev_skipped, **test_skipped, **unpaired}.items():
        out.append({"model": model, "dataset": dataset, "panel": panel, "design": design, "skipped": why})
    return out


NO_DEVELOPMENT = (
    "no development panel in the store: not analysed (score one with pfr run --panel development; "
    "a user file needs --dev-fraction F for it)"
)


def _scored_tables(results: list[StoredResult]) -> tuple[dict[Setting, MarginTable], dict[Setting, str]]:
    """The margin tables of the settings with scores, and the settings without (with the reason)."""
    labels = model_labels(results)
    skipped = unscored_settings(results)
    kept = [r for r in results if (labels[identity_key(r.model)], *_where(r.request)) not in skipped]
    return margin_tables(kept, labels=labels), skipped


def _where(q: Request) -> tuple[str, str, str]:
    return q.dataset, q.panel, q.design
