"""Exact McNemar and Holm against scipy/statsmodels computed independently."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.multitest import multipletests

from pfr.analysis.metrics import INDICATORS
from pfr.analysis.stats_tests import binom_two_sided_half, holm, mcnemar_exact, setting_tests


def test_mcnemar_matches_binomtest_on_discordant_pairs() -> None:
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(5, 200))
        u = rng.random(n) < rng.random()
        c = rng.random(n) < rng.random()
        b, cc, p = mcnemar_exact(u, c)
        b_ref = sum(1 for x, y in zip(u, c) if x and not y)
        c_ref = sum(1 for x, y in zip(u, c) if y and not x)
        assert (b, cc) == (b_ref, c_ref)
        ref = binomtest(b_ref, b_ref + c_ref, 0.5).pvalue if b_ref + c_ref else 1.0
        assert p == pytest.approx(ref, rel=1e-12)


def test_exact_binomial_equals_scipy_on_a_grid() -> None:
    for n in [*range(0, 60), 99, 100, 257, 1000]:
        for k in sorted({0, 1, 2, n // 3, n // 2, n // 2 + 1, n - 1, n}):
            if 0 <= k <= n:
                ref = binomtest(k, n, 0.5).pvalue if n else 1.0
                assert binom_two_sided_half(k, n) == pytest.approx(ref, rel=1e-12, abs=1e-300), (k, n)


def test_no_discordant_pairs_gives_p_one() -> None:
    assert mcnemar_exact([True, False, True], [True, False, True]) == (0, 0, 1.0)
    assert mcnemar_exact([], []) == (0, 0, 1.0)


def test_known_values() -> None:
    # 10 vs 0 discordant: p = 2 * 0.5**10
    b, c, p = mcnemar_exact([True] * 10 + [False] * 5, [False] * 10 + [False] * 5)
    assert (b, c) == (10, 0)
    assert p == pytest.approx(2 * 0.5**10)


def test_holm_equals_statsmodels() -> None:
    rng = np.random.default_rng(4)
    mixed = 0
    gc.freeze()  # statsmodels' Holm calls gc.collect() on every call
    for trial in range(120):
        m = int(rng.integers(1, 60))
        p = list(rng.random(m) ** rng.uniform(1, 6))
        if trial % 5 == 0:  # ties and exact ones, as McNemar families have
            p[: m // 2] = [p[0]] * (m // 2)
            p[-1] = 1.0
        adj, rej = holm(p)
        ref_rej, ref_adj, _, _ = multipletests(p, alpha=0.05, method="holm")
        assert adj == pytest.approx(list(ref_adj), rel=1e-15)
        assert rej == list(ref_rej)
        mixed += any(rej) and not all(rej)
    gc.unfreeze()
    assert mixed > 20
    assert holm([]) == ([], [])


def test_setting_tests_use_the_fallback_columns() -> None:
    x = np.zeros((12, len(INDICATORS)))
    col = {c: i for i, c in enumerate(INDICATORS)}
    x[:7, col["FU_fb"]] = 1  # A-: 7 texts pick the fallback under U only
    x[:2, col["FC_fb"]] = 1
    x[5:8, col["RC_fb"]] = 1  # F+: 3 texts under C only
    tests = {t.metric: t for t in setting_tests(x, INDICATORS)}
    assert (tests["A-"].b, tests["A-"].c) == (5, 0)
    assert (tests["F+"].b, tests["F+"].c) == (0, 3)
    assert tests["A-"].p == pytest.approx(binomtest(5, 5, 0.5).pvalue)
