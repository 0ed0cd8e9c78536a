"""The per-request margin the report's figures and thresholds read."""

from __future__ import annotations

import math

import numpy as np

from pfr.report.model import margin


def _by_hand(logprobs: list[float], fb: int) -> tuple[float, int]:
    best = -1
    for i, v in enumerate(logprobs):
        if i != fb and (best < 0 or v > logprobs[best]):
            best = i
    return (math.inf, -1) if best < 0 else (logprobs[fb] - logprobs[best], best)


def test_margin_is_fallback_minus_best_regular_and_ties_go_to_the_first() -> None:
    gen = np.random.default_rng(0)
    for _ in range(2000):
        k = int(gen.integers(1, 9))
        lp = [float(v) for v in gen.integers(-4, 0, size=k)]  # few values: many ties
        fb = int(gen.integers(0, k))
        assert margin(tuple(lp), fb) == _by_hand(lp, fb), (lp, fb)
    assert margin((-1.0, -2.0, -0.5), 0) == (-0.5, 2)
    assert margin((-3.0, -1.0, -1.0), 0) == (-2.0, 1)
    assert margin((-1.0, -1.0, -3.0), 2) == (-2.0, 0)
    assert margin((-1.0,), 0) == (math.inf, -1)
