"""Paired text bootstrap: coverage, determinism, degenerate columns, strata, linearity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pfr.analysis.bootstrap import QUANTITIES, paired_bootstrap, resample_counts, setting_rng
from pfr.analysis.metrics import INDICATORS, deltas, metrics_from_means
from pfr.errors import PfrError

COL = {c: i for i, c in enumerate(INDICATORS)}


def _matrix(n: int, rng: np.random.Generator, p: float = 0.3) -> np.ndarray:
    return (rng.random((n, len(INDICATORS))) < p).astype(float)


def test_point_values_match_metrics_module() -> None:
    x = _matrix(150, np.random.default_rng(1))
    res = paired_bootstrap(x, draws=200, rng=np.random.default_rng(0))
    m = metrics_from_means(pd.Series(x.mean(axis=0), index=INDICATORS))
    for k, v in m.items():
        assert res.metrics[k].value == pytest.approx(v, abs=1e-12)
    for k, v in deltas(m).items():
        assert res.delta[k].value == pytest.approx(v, abs=1e-12)
    for iv in [*res.metrics.values(), *res.delta.values()]:
        assert iv.lo <= iv.value + 1e-12 and iv.value <= iv.hi + 1e-12


def test_coverage_is_near_nominal() -> None:
    """200 simulated data sets of n=200: the 95 % percentile interval covers the true A+ (p=0.3)
    and the true paired Δ of a correlated pair at about the nominal rate."""
    gen = np.random.default_rng(12345)
    hits_mean = hits_delta = 0
    trials, n = 200, 200
    true_c = 0.3 * 0.9 + 0.7 * 0.1
    for t in range(trials):
        x = np.zeros((n, len(INDICATORS)))
        u = gen.random(n) < 0.3
        flip = gen.random(n) < 0.1
        x[:, COL["RU_ok"]] = u
        x[:, COL["RC_ok"]] = u ^ flip
        res = paired_bootstrap(x, draws=2000, rng=np.random.default_rng(t))
        a = res.metrics["A+_U"]
        d = res.delta["A+"]
        hits_mean += a.lo <= 0.3 <= a.hi
        hits_delta += d.lo <= true_c - 0.3 <= d.hi
    assert 0.90 <= hits_mean / trials <= 0.98
    assert 0.90 <= hits_delta / trials <= 0.98


def test_same_seed_same_intervals_and_other_seed_differs() -> None:
    x = _matrix(300, np.random.default_rng(7))
    a = paired_bootstrap(x, draws=1000, rng=setting_rng(0, ("m", "d", "p", "direct")))
    b = paired_bootstrap(x, draws=1000, rng=setting_rng(0, ("m", "d", "p", "direct")))
    c = paired_bootstrap(x, draws=1000, rng=setting_rng(1, ("m", "d", "p", "direct")))
    assert a == b
    assert a != c


def test_degenerate_columns_give_point_intervals_not_nan() -> None:
    x = _matrix(80, np.random.default_rng(3))
    x[:, COL["DR_R"]] = 0.0
    x[:, COL["P4"]] = 1.0
    x[:, COL["FU_fb"]] = x[:, COL["FC_fb"]] = 1.0
    res = paired_bootstrap(x, draws=500, rng=np.random.default_rng(0))
    assert (res.metrics["DR_R"].lo, res.metrics["DR_R"].hi) == (0.0, 0.0)
    assert (res.metrics["P4"].lo, res.metrics["P4"].hi) == (1.0, 1.0)
    assert (res.delta["A-"].value, res.delta["A-"].lo, res.delta["A-"].hi) == (0.0, 0.0, 0.0)
    for iv in [*res.metrics.values(), *res.delta.values()]:
        assert np.isfinite([iv.value, iv.lo, iv.hi]).all()


def test_single_text_is_valid() -> None:
    x = _matrix(1, np.random.default_rng(0), p=0.5)
    res = paired_bootstrap(x, draws=50, rng=np.random.default_rng(0))
    for iv in res.metrics.values():
        assert iv.lo == iv.value == iv.hi


def test_counts_rows_sum_to_n_and_strata_keep_quotas() -> None:
    rng = np.random.default_rng(0)
    counts = resample_counts(50, 400, rng)
    assert counts.shape == (400, 50)
    assert (counts.sum(axis=1) == 50).all()
    strata = np.array(["ABBR"] * 7 + ["DESC"] * 20 + ["NUM"] * 23)
    rng.shuffle(strata)
    sc = resample_counts(50, 400, np.random.default_rng(1), strata)
    for s in ("ABBR", "DESC", "NUM"):
        assert (sc[:, strata == s].sum(axis=1) == (strata == s).sum()).all()
    # unstratified draws do not keep them
    assert not (counts[:, strata == "ABBR"].sum(axis=1) == 7).all()


def test_stratified_interval_is_narrower_when_strata_explain_the_outcome() -> None:
    """Outcome fully determined by stratum → stratified resampling has no variance."""
    strata = np.array(["a"] * 60 + ["b"] * 40)
    x = np.zeros((100, len(INDICATORS)))
    x[:60, COL["RU_ok"]] = 1.0
    strat = paired_bootstrap(x, draws=500, rng=np.random.default_rng(0), strata=strata)
    plain = paired_bootstrap(x, draws=500, rng=np.random.default_rng(0))
    assert strat.stratified and not plain.stratified
    assert (strat.metrics["A+_U"].lo, strat.metrics["A+_U"].hi) == (0.6, 0.6)
    assert plain.metrics["A+_U"].hi - plain.metrics["A+_U"].lo > 0.1


def test_bad_inputs() -> None:
    with pytest.raises(PfrError):
        resample_counts(10, 0, np.random.default_rng(0))
    with pytest.raises(ValueError):
        paired_bootstrap(np.zeros((5, 3)))
    with pytest.raises(ValueError):
        resample_counts(3, 10, np.random.default_rng(0), strata=["a", "b"])
    assert len(QUANTITIES) == 23  # 13 metrics, B_U, B_C, 5 invalid rates (INV, INV_RU …), 5 Δs


@pytest.mark.parametrize("strata", [None, "labels"])
def test_blocks_give_the_same_draws_as_one_matrix(strata: str | None) -> None:
    """Bounded-memory blocks change nothing: the same seed gives bit-identical resamples and means
    for any block size, including blocks that do not divide the draws."""
    from pfr.analysis.bootstrap import bootstrap_means, resample_blocks

    n, draws = 37, 250
    labels = np.array(["a", "b", "c"])[np.arange(n) % 3] if strata else None
    q = np.random.default_rng(7).random((n, 5))
    whole = resample_counts(n, draws, np.random.default_rng(3), labels)
    reference = whole @ q / n
    for block in (n, 5 * n + 3, 64 * n, 10**9):
        blocks = list(resample_blocks(n, draws, np.random.default_rng(3), labels, block_elements=block))
        assert max(len(b) for b in blocks) == max(1, min(draws, block // n))
        np.testing.assert_array_equal(np.concatenate(blocks), whole)
        means = bootstrap_means(q, draws, np.random.default_rng(3), labels, block)
        np.testing.assert_allclose(means, reference, rtol=1e-13, atol=0)  # BLAS may add in another order
        x = (q > 0.5).astype(np.float64)  # 0/1 indicators, as the report's: sums are exact, so bit-identical
        np.testing.assert_array_equal(bootstrap_means(x, draws, np.random.default_rng(3), labels, block), whole @ x / n)
    assert (whole.sum(axis=1) == n).all()


@pytest.mark.parametrize("strata", [None, "labels"])
def test_distinct_rows_give_the_means_of_the_text_counts(strata: str | None) -> None:
    """Texts with repeated 0/1 rows, but too many patterns for multinomial draws, are counted per
    distinct row: the same random indices, the same sums, so the means equal ``counts @ x / n`` bit for
    bit, in any block size."""
    from pfr.analysis.bootstrap import MULTINOMIAL_RATIO, bootstrap_means

    n, draws = 150, 300
    labels = np.array(["a", "b", "c", "d"])[np.arange(n) % 4] if strata else None
    x = (np.random.default_rng(5).random((n, 4)) > 0.4).astype(np.float64)  # at most 16 distinct rows
    p = len(np.unique(x, axis=0))
    assert 4 * p <= n < MULTINOMIAL_RATIO * p
    whole = resample_counts(n, draws, np.random.default_rng(9), labels)
    for block in (n, 7 * n + 1, 10**9):
        got = bootstrap_means(x, draws, np.random.default_rng(9), labels, block)
        np.testing.assert_array_equal(got, whole @ x / n)


def _patterns(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n texts with 3 columns of 0/1 (8 patterns) whose rates depend on the text's stratum (a, b, c)."""
    gen = np.random.default_rng(seed)
    labels = np.array(["a", "b", "c"])[gen.integers(0, 3, n)]
    rate = np.select([labels == "a", labels == "b"], [0.1, 0.5], 0.9)[:, None]
    return (gen.random((n, 3)) < rate).astype(np.float64), labels


@pytest.mark.parametrize("stratified", [False, True])
def test_multinomial_draws_have_the_text_bootstraps_moments(stratified: bool) -> None:
    """Few patterns among many texts (the report's case) are drawn as multinomial pattern counts: the
    means have the text bootstrap's expectation and covariance, Σ_s (n_s/n)² S_s / n_s with S_s each
    stratum's population covariance (S / n unstratified), and each stratum keeps its size."""
    from pfr.analysis.bootstrap import MULTINOMIAL_RATIO, bootstrap_means

    n, draws = 900, 40_000
    x, labels = _patterns(n, 1)
    assert MULTINOMIAL_RATIO * len(np.unique(x, axis=0)) <= n
    got = bootstrap_means(x, draws, np.random.default_rng(2), labels if stratified else None)
    groups = [labels == s for s in "abc"] if stratified else [np.ones(n, bool)]
    expected_cov = sum((g.sum() / n) ** 2 * np.cov(x[g], rowvar=False, ddof=0) / g.sum() for g in groups)
    se = np.sqrt(np.diag(expected_cov) / draws)
    assert (np.abs(got.mean(axis=0) - x.mean(axis=0)) < 4.5 * se).all()
    np.testing.assert_allclose(np.cov(got, rowvar=False), expected_cov, rtol=0.05, atol=0.05 * expected_cov.max())
    if stratified:  # the strata explain much of the variance: ignoring them would miss the covariance above
        assert (np.diag(np.cov(x, rowvar=False, ddof=0) / n) > 1.5 * np.diag(expected_cov)).all()
    # the same moments as the text bootstrap's own counts, drawn independently
    texts = resample_counts(n, 4000, np.random.default_rng(3), labels if stratified else None) @ x / n
    np.testing.assert_allclose(texts.std(axis=0), got.std(axis=0), rtol=0.06)


@pytest.mark.parametrize("stratified", [False, True])
def test_multinomial_draws_do_not_depend_on_the_block_size(stratified: bool) -> None:
    from pfr.analysis.bootstrap import bootstrap_means

    x, labels = _patterns(400, 4)
    strata = labels if stratified else None
    whole = bootstrap_means(x, 301, np.random.default_rng(5), strata, block_elements=10**9)
    for block in (1, 8, 8 * 7 + 3):
        np.testing.assert_array_equal(bootstrap_means(x, 301, np.random.default_rng(5), strata, block), whole)
    assert not np.array_equal(whole, bootstrap_means(x, 301, np.random.default_rng(6), strata))
