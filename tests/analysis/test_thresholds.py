"""Selection rules on fixed scores (docs/method.md §8) against brute-force recomputations."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from pfr import api
from pfr.analysis.metrics import quad_indicators, results_frame, setting_metrics
from pfr.analysis.thresholds import (
    MarginTable,
    OneSidedCalibrator,
    candidates,
    fit_development,
    individual_oracle,
    margin_tables,
    rates,
    refit_sensitivity,
    shared_oracle,
)
from pfr.run.store import Store


def _table(seed: int, n: int = 60) -> MarginTable:
    rng = np.random.default_rng(seed)
    margin = rng.normal(0, 1.5, size=(n, 4)).round(1)  # rounding creates ties on purpose
    margin[:, 2:] += 0.8
    wins = rng.random((n, 2)) < 0.8
    return MarginTable(tuple(f"t{i}" for i in range(n)), margin, wins)


def _brute_p4(t: MarginTable, tau: float) -> int:
    return sum(
        bool(t.gold_wins[i].all() and max(t.margin[i, :2]) <= tau and min(t.margin[i, 2:]) > tau) for i in range(t.n)
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_oracles_match_brute_force(seed: int) -> None:
    t = _table(seed)
    assert individual_oracle(t) == sum(
        bool(t.gold_wins[i].all() and max(t.margin[i, :2]) < min(t.margin[i, 2:])) for i in range(t.n)
    )
    grid = np.unique(np.concatenate([t.margin.ravel(), t.margin.ravel() - 1e-9, [0.0]]))
    best = max(_brute_p4(t, float(x)) for x in grid)
    count, tau = shared_oracle(t)
    assert count == best == _brute_p4(t, tau)
    assert count <= individual_oracle(t)


@pytest.mark.parametrize("seed", [3, 4])
def test_development_threshold_maximises_mean_b_with_tie_rules(seed: int) -> None:
    t = _table(seed)
    cands = candidates(t.margin)
    assert 0.0 in cands and cands.min() < t.margin.min() and cands.max() > t.margin.max()
    tau = fit_development(t)
    r = rates(t, cands)
    mean_b = (r["B_U"] + r["B_C"]) / 2
    best = mean_b.max()
    tied = [i for i in range(len(cands)) if math.isclose(mean_b[i], best, abs_tol=1e-12)]
    ff = r["F+_U"] + r["F+_C"]
    tied = [i for i in tied if math.isclose(ff[i], min(ff[j] for j in tied), abs_tol=1e-12)]
    expected = sorted(tied, key=lambda i: (abs(cands[i]), -cands[i]))[0]
    assert tau == cands[expected]


def test_calibration_order_statistic() -> None:
    margins = np.zeros((19, 4))
    margins[:, 0] = np.arange(19)  # U: 0..18
    margins[:, 1] = np.arange(19) * 2.0  # C: 0..36
    t = MarginTable(tuple(map(str, range(19))), margins, np.ones((19, 2), bool))
    cal = OneSidedCalibrator(alpha=0.05).fit(t)
    assert cal.per_definition_ == {"U": 18.0, "C": 36.0}  # rank ceil(20 * 0.95) = 19 = n
    assert cal.tau_ == 36.0
    assert math.isinf(OneSidedCalibrator(alpha=0.01).fit(t).tau_)  # rank 20 > n
    assert cal.false_fallback(t) == {"F+_U": 0.0, "F+_C": 0.0}


def test_zero_threshold_reproduces_native_decisions(tmp_path: Path, data_dir: Path) -> None:
    reqs = api.build("trec", "main", data_dir=data_dir, limit=80)
    api.run("baseline:random", reqs, tmp_path / "s", progress=False)
    with Store(tmp_path / "s", create=False) as st:
        results = list(st.results())
    (table,) = margin_tables(results).values()
    native = setting_metrics(quad_indicators(results_frame(results)))[0]
    r = rates(table, 0.0)  # random Gaussian scores have no tied maxima
    for k in ("A+_U", "A+_C", "A-_U", "A-_C", "F+_U", "F+_C", "P4"):
        assert r[k][0] == pytest.approx(native[k]), k


def test_refit_is_deterministic_and_bounded() -> None:
    dev, test = _table(5), _table(6, n=90)
    a = refit_sensitivity(dev, test, draws=300, seed=1)
    assert a == refit_sensitivity(dev, test, draws=300, seed=1)
    assert 0.0 <= a["share_improving"] <= 1.0
    assert all(np.isfinite(list(a.values())))


def test_candidate_grid_covers_all_distinct_rules() -> None:
    t = _table(7, n=20)
    cands = candidates(t.margin)
    distinct = {tuple(t.margin.ravel() > c) for c in cands}
    # every split of the sorted margins is reachable from some candidate
    values = np.unique(t.margin)
    splits = {tuple(t.margin.ravel() > v) for v in itertools.chain(values, [values[0] - 1])}
    assert splits <= distinct


def _brute_refit(dev: MarginTable, counts: np.ndarray) -> float:
    """One refit in plain Python: expand the resample, list its own candidates, score every one,
    pick by (highest mean B, fewest false fallbacks, smallest |τ|, larger τ)."""
    rows = [i for i in range(dev.n) for _ in range(int(counts[i]))]
    values = sorted({float(dev.margin[i, j]) for i in rows for j in range(4)})
    cands = {(a + b) / 2 for a, b in itertools.pairwise(values)} | {0.0, values[0] - 1.0, values[-1] + 1.0}
    n = len(rows)

    def key(tau: float) -> tuple[float, int, float, float]:
        total_b, false_fb = 0.0, 0
        for d in range(2):
            a_plus = sum(bool(dev.gold_wins[i, d]) and not dev.margin[i, d] > tau for i in rows) / n
            a_minus = sum(bool(dev.margin[i, 2 + d] > tau) for i in rows) / n
            total_b += (a_plus + a_minus) / 2
            false_fb += sum(bool(dev.margin[i, d] > tau) for i in rows)
        return (-round(total_b / 2, 12), false_fb, abs(tau), -tau)

    return min(cands, key=key)


def _brute_test_b(test: MarginTable, tau: float) -> float:
    total = 0.0
    for d in range(2):
        a_plus = sum(bool(test.gold_wins[i, d]) and not test.margin[i, d] > tau for i in range(test.n)) / test.n
        a_minus = sum(bool(test.margin[i, 2 + d] > tau) for i in range(test.n)) / test.n
        total += (a_plus + a_minus) / 2
    return total / 2


@pytest.mark.parametrize("seed", [8, 9])
def test_refit_matches_brute_force(seed: int) -> None:
    """Every refit recomputes its candidates from its own resample, as an independent refit does."""
    from pfr.analysis.thresholds import refit_thresholds, refit_weights

    dev, test = _table(seed, n=25), _table(seed + 10, n=40)
    draws = 60
    weights = refit_weights(dev.n, draws, seed=seed)
    assert weights.shape == (draws, dev.n) and (weights.sum(axis=1) == dev.n).all()
    # the resamples are the documented multinomial draws of whole texts
    ref = np.random.default_rng(seed).multinomial(dev.n, np.full(dev.n, 1 / dev.n), size=draws)
    assert (weights == ref).all()
    taus = refit_thresholds(dev, weights)
    brute = [_brute_refit(dev, w) for w in weights]
    assert list(taus) == pytest.approx(brute, abs=1e-12)
    # candidates come from the resample: some refit must land off the full-panel grid
    full = set(np.round(candidates(dev.margin), 12))
    assert any(round(t, 12) not in full for t in brute)
    got = refit_sensitivity(dev, test, draws=draws, seed=seed)
    base = _brute_test_b(test, 0.0)
    changes = [_brute_test_b(test, t) - base for t in brute]
    assert got["median_change_B"] == pytest.approx(float(np.median(changes)), abs=1e-12)
    assert got["share_improving"] == pytest.approx(sum(c > 0 for c in changes) / draws)
