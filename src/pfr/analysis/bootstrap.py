"""Paired text bootstrap (DESIGN §7): percentile intervals for every metric and every Δ.

Rows of the indicator matrix are texts, so resampling rows keeps each text's four requests
together. One draw of the resampling matrix per setting serves every metric and every Δ, which
keeps the Δ intervals paired. Every reported quantity is linear in the indicator means, so the
whole table is ``counts @ (X @ L) / n``: a (B × n) count matrix, the (n × m) indicators and an
(m × K) map from indicator columns to metrics and Δs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pfr.analysis.metrics import DELTA_OF, INDICATORS, METRIC_COLUMNS, METRICS
from pfr.errors import PfrError

#: every bootstrapped quantity, in the column order of :func:`linear_map`
QUANTITIES: tuple[str, ...] = (*METRICS, *(f"Δ{k}" for k in DELTA_OF))


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile interval (fractions, not percent)."""

    value: float
    lo: float
    hi: float

    def as_dict(self) -> dict[str, float]:
        return {"value": self.value, "lo": self.lo, "hi": self.hi}


@dataclass(frozen=True)
class BootstrapResult:
    """Intervals of one setting: ``metrics`` keyed like :data:`~pfr.analysis.metrics.METRICS`,
    ``delta`` keyed like :data:`~pfr.analysis.metrics.DELTA_OF`."""

    metrics: dict[str, Interval]
    delta: dict[str, Interval]
    draws: int
    stratified: bool


def linear_map() -> np.ndarray:
    """(len(INDICATORS) × len(QUANTITIES)) matrix: indicator means → metrics, B and Δ = C − U."""
    col = {c: i for i, c in enumerate(INDICATORS)}
    vec: dict[str, np.ndarray] = {}
    for name, c in METRIC_COLUMNS.items():
        v = np.zeros(len(INDICATORS))
        v[col[c]] = 1.0
        vec[name] = v
    for d in ("U", "C"):
        vec[f"B_{d}"] = (vec[f"A+_{d}"] + vec[f"A-_{d}"]) / 2
    for k in DELTA_OF:
        vec[f"Δ{k}"] = vec[f"{k}_C"] - vec[f"{k}_U"]
    return np.stack([vec[q] for q in QUANTITIES], axis=1)


def setting_rng(seed: int, key: Sequence[str]) -> np.random.Generator:
    """The generator of one setting: seeded by the report seed and the setting's names.

    A setting's intervals therefore do not depend on which other settings share the report.
    """
    digest = hashlib.sha256("\x1f".join(key).encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "big")])


def resample_counts(
    n: int, draws: int, rng: np.random.Generator, strata: Sequence[object] | np.ndarray | None = None
) -> np.ndarray:
    """(draws × n) multiplicities of a text bootstrap: each row sums to ``n``.

    With ``strata`` (one label per text) each stratum is resampled within itself, so every row
    keeps the stratum sizes (the compact tasks' coarse-category quotas).
    """
    if draws < 1:
        raise PfrError(f"bootstrap draws must be at least 1, got {draws}")
    if n == 0:
        return np.zeros((draws, 0))
    if strata is None:
        idx = rng.integers(0, n, size=(draws, n), dtype=np.int32).astype(np.int64)
    else:
        labels = np.asarray(strata, dtype=object)
        if len(labels) != n:
            raise ValueError(f"strata has {len(labels)} labels for {n} texts")
        _, codes = np.unique(labels.astype(str), return_inverse=True)
        parts = []
        for s in range(int(codes.max()) + 1):
            members = np.flatnonzero(codes == s)
            parts.append(members[rng.integers(0, len(members), size=(draws, len(members)))])
        idx = np.concatenate(parts, axis=1)
    idx += (np.arange(draws, dtype=np.int64) * n)[:, None]
    return np.bincount(idx.ravel(), minlength=draws * n).reshape(draws, n).astype(np.float64)


def paired_bootstrap(
    x: np.ndarray,
    draws: int = 10_000,
    rng: np.random.Generator | None = None,
    strata: Sequence[object] | np.ndarray | None = None,
    level: float = 0.95,
) -> BootstrapResult:
    """Percentile intervals of every metric and Δ from an (n × len(INDICATORS)) 0/1 matrix.

    A quantity that is constant over the resamples (e.g. a disagreement rate of 0) gets the
    interval [value, value], never NaN.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(INDICATORS) or x.shape[0] == 0:
        raise ValueError(f"need a non-empty (n × {len(INDICATORS)}) indicator matrix, got shape {x.shape}")
    n = x.shape[0]
    rng = rng if rng is not None else np.random.default_rng(0)
    q = x @ linear_map()  # (n × K) per-text contributions
    point = q.mean(axis=0)
    boot = resample_counts(n, draws, rng, strata) @ q / n  # (B × K)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha], axis=0)
    # The percentile of a constant column is that constant up to rounding; pin it to the point.
    const = np.ptp(boot, axis=0) <= 1e-12
    lo = np.where(const, point, np.minimum(lo, hi))
    hi = np.where(const, point, hi)
    ivs = {name: Interval(float(point[i]), float(lo[i]), float(hi[i])) for i, name in enumerate(QUANTITIES)}
    return BootstrapResult(
        metrics={k: ivs[k] for k in METRICS},
        delta={k: ivs[f"Δ{k}"] for k in DELTA_OF},
        draws=draws,
        stratified=strata is not None,
    )
