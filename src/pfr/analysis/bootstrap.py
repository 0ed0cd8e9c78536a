"""Paired text bootstrap (docs/method.md §7): percentile intervals for every metric and every Δ.

Rows of the indicator matrix are texts, so resampling rows keeps each text's four requests
together. One draw of the resampling matrix per setting serves every metric and every Δ, which
keeps the Δ intervals paired. Every reported quantity is linear in the indicator means, so the
whole table is ``counts @ (X @ L) / n``: a (B × n) count matrix, the (n × m) indicators and an
(m × K) map from indicator columns to metrics and Δs. Texts with equal rows are interchangeable, so
the counts are drawn per distinct row where that is cheaper (:func:`bootstrap_means`).
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from pfr.analysis.metrics import DELTA_OF, INDICATORS, METRIC_COLUMNS, METRICS
from pfr.options import DRAWS, SEED, check_memory, parse

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
    extra: tuple[Interval, ...] = ()  # the columns of ``paired_bootstrap(extra=...)``, on the same resamples


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


#: elements of one block of resampling counts (draws × texts): 2**22 float64 is 32 MiB, so the bootstrap of
#: 10^5 texts needs tens of MiB, not draws × texts × 16 bytes (16 GB at 10,000 draws).
BLOCK_ELEMENTS = 1 << 22


def _counts(idx: np.ndarray, n: int) -> np.ndarray:
    rows = idx.shape[0]
    flat = idx.astype(np.int64) + (np.arange(rows, dtype=np.int64) * n)[:, None]
    return np.bincount(flat.ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)


def _check_draws(draws: int) -> None:
    parse("draws", draws, DRAWS)


def check_draws(draws: int, seed: int = 0) -> int:
    """``draws`` if it is a whole number >= 1 whose bootstrap fits in memory (and ``seed`` a valid seed);
    refused up front otherwise.

    One setting at a time holds its (draws × indicators) resample means, their (draws × quantities)
    metrics and a sorted copy of each for the percentiles: about draws × 2 × (indicators + quantities)
    × 8 bytes, whatever the number of texts (the resampling itself runs in bounded blocks).
    """
    parse("seed", seed, SEED)
    n = int(parse("draws", draws, DRAWS))
    check_memory(f"draws={n}", n * 2 * (len(INDICATORS) + len(QUANTITIES) + 1) * 8.0)
    return n


def _index_blocks(
    n: int, draws: int, rng: np.random.Generator, strata: Sequence[object] | np.ndarray | None, block_elements: int
) -> Iterator[np.ndarray]:
    """The resampled text indices (rows × n, n ≥ 1), block by block; what :func:`resample_blocks` counts."""
    step = max(1, block_elements // n)
    if strata is not None:
        parts = []
        for members in _strata_members(strata, n):
            parts.append(members[rng.integers(0, len(members), size=(draws, len(members)))])
        whole = np.concatenate(parts, axis=1)
        for start in range(0, draws, step):
            yield whole[start : start + step]
        return
    for start in range(0, draws, step):
        rows = min(step, draws - start)
        yield rng.integers(0, n, size=(rows, n), dtype=np.int32)


def _strata_members(strata: Sequence[object] | np.ndarray, n: int) -> list[np.ndarray]:
    """The text indices of each stratum, strata in sorted label order (the order both samplers draw in)."""
    labels = np.asarray(strata, dtype=object)
    if len(labels) != n:
        raise ValueError(f"strata has {len(labels)} labels for {n} texts")
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    codes = codes.reshape(-1)
    return [np.flatnonzero(codes == s) for s in range(int(codes.max()) + 1)]


def resample_blocks(
    n: int,
    draws: int,
    rng: np.random.Generator,
    strata: Sequence[object] | np.ndarray | None = None,
    block_elements: int = BLOCK_ELEMENTS,
) -> Iterator[np.ndarray]:
    """The rows of :func:`resample_counts`, in blocks of at most ``block_elements`` counts.

    The blocks concatenate to exactly ``resample_counts(n, draws, rng, strata)``: the generator
    hands out the same integers whether it is asked for all draws at once or block by block
    (PCG64 keeps a leftover 32-bit half in its state), so intervals do not depend on the block size.
    A stratified bootstrap draws each stratum for all draws in turn; it is computed whole and cut
    into blocks (its memory is draws × texts; the compact tasks that use strata are small).
    """
    _check_draws(draws)
    if n == 0:
        yield np.zeros((draws, 0))
        return
    for idx in _index_blocks(n, draws, rng, strata, block_elements):
        yield _counts(idx, n)


def resample_counts(
    n: int, draws: int, rng: np.random.Generator, strata: Sequence[object] | np.ndarray | None = None
) -> np.ndarray:
    """(draws × n) multiplicities of a text bootstrap: each row sums to ``n``.

    With ``strata`` (one label per text) each stratum is resampled within itself, so every row
    keeps the stratum sizes (the compact tasks' coarse-category quotas).
    """
    return np.concatenate(list(resample_blocks(n, draws, rng, strata)), axis=0)


def bootstrap_means(
    q: np.ndarray,
    draws: int,
    rng: np.random.Generator,
    strata: Sequence[object] | np.ndarray | None = None,
    block_elements: int = BLOCK_ELEMENTS,
) -> np.ndarray:
    """(draws × K) column means of the (n × K) matrix ``q`` over text resamples, in bounded memory.

    The report's rows are 0/1 indicator patterns, and 10^4 texts share a few dozen distinct rows.
    A resample's mean depends only on how often it drew each distinct row, and those counts are
    multinomial: ``n`` draws with replacement, row pattern ``c`` with probability ``n_c / n`` (within
    each stratum for a stratified bootstrap). With few patterns (``MULTINOMIAL_RATIO`` · patterns ≤ n)
    they are drawn directly: the same bootstrap distribution as :func:`resample_counts` ``@ q / n``,
    at draws × patterns cost instead of draws × texts (``tests/analysis/test_bootstrap.py`` checks the
    moments against the text bootstrap's). Otherwise the texts' indices are drawn and counted per
    distinct row (or per text, when rows rarely repeat): then the result equals
    ``resample_counts(n, draws, rng, strata) @ q / n``. Either way any ``block_elements`` gives the same
    draws, so intervals do not depend on it.
    """
    _check_draws(draws)
    n = q.shape[0]
    if n == 0:
        return np.zeros((draws, q.shape[1]))
    distinct, inverse = np.unique(q, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    p = len(distinct)
    if MULTINOMIAL_RATIO * p <= n:
        return _multinomial_means(distinct, inverse, draws, rng, strata, block_elements)
    out = np.empty((draws, q.shape[1]))
    row = 0
    if 4 * p > n:  # few repeated rows: count the texts themselves
        for counts in resample_blocks(n, draws, rng, strata, block_elements):
            out[row : row + len(counts)] = counts @ q / n
            row += len(counts)
        return out

    def count(start: int, idx: np.ndarray) -> None:
        rows = idx.shape[0]
        flat = inverse[idx]
        flat += (np.arange(rows, dtype=np.int64) * p)[:, None]
        counts = np.bincount(flat.ravel(), minlength=rows * p).reshape(rows, p).astype(np.float64)
        out[start : start + rows] = counts @ distinct / n

    # The draws stay in this thread, in order (the same indices as without a worker); a worker counts
    # each block while the next one is drawn, and at most two blocks wait, so memory stays bounded.
    with ThreadPoolExecutor(max_workers=1) as worker:
        pending: deque[Future[None]] = deque()
        for idx in _index_blocks(n, draws, rng, strata, block_elements):
            pending.append(worker.submit(count, row, idx))
            row += idx.shape[0]
            if len(pending) > 2:
                pending.popleft().result()
        for job in pending:
            job.result()
    return out


#: draw distinct-row counts as multinomials when texts ≥ this many times the distinct rows: one
#: category of numpy's multinomial costs about ten random indices (about 100 vs 10 ns here)
MULTINOMIAL_RATIO = 16


def _multinomial_means(
    distinct: np.ndarray,
    inverse: np.ndarray,
    draws: int,
    rng: np.random.Generator,
    strata: Sequence[object] | np.ndarray | None,
    block_elements: int,
) -> np.ndarray:
    """The text bootstrap's means drawn as multinomial counts of the distinct rows (see
    :func:`bootstrap_means`). Each stratum draws all its draws in turn, block by block (numpy draws
    a multinomial sample after sample, so blocks concatenate to one call's samples); the strata's
    sums are added before the one division by n (exact for the report's 0, ½ and 1 entries)."""
    n, p = len(inverse), len(distinct)
    groups = [np.arange(n)] if strata is None else _strata_members(strata, n)
    total = np.zeros((draws, distinct.shape[1]))
    step = max(1, block_elements // p)
    for members in groups:
        present, sizes = np.unique(inverse[members], return_counts=True)
        pvals = sizes / len(members)
        for start in range(0, draws, step):
            rows = min(step, draws - start)
            counts = rng.multinomial(len(members), pvals, size=rows).astype(np.float64)
            total[start : start + rows] += counts @ distinct[present]
    return total / n


def paired_bootstrap(
    x: np.ndarray,
    draws: int = 10_000,
    rng: np.random.Generator | None = None,
    strata: Sequence[object] | np.ndarray | None = None,
    level: float = 0.95,
    extra: np.ndarray | None = None,
) -> BootstrapResult:
    """Percentile intervals of every metric and Δ from an (n × len(INDICATORS)) 0/1 matrix.

    ``extra`` (n × E, e.g. the classify-then-map reference's per-text correctness) adds E column
    means resampled with the same texts, so their intervals are paired with the metrics'.
    A quantity that is constant over the resamples (e.g. a disagreement rate of 0) gets the
    interval [value, value], never NaN.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(INDICATORS) or x.shape[0] == 0:
        raise ValueError(f"need a non-empty (n × {len(INDICATORS)}) indicator matrix, got shape {x.shape}")
    rng = rng if rng is not None else np.random.default_rng(0)
    q = x @ linear_map()  # (n × K) per-text contributions
    if extra is not None:
        extra = np.asarray(extra, dtype=np.float64).reshape(len(x), -1)
        q = np.concatenate([q, extra], axis=1)
    point = q.mean(axis=0)
    boot = bootstrap_means(q, draws, rng, strata)  # (B × K), in blocks of bounded memory
    alpha = (1 - level) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha], axis=0)
    # The percentile of a constant column is that constant up to rounding; pin it to the point.
    const = np.ptp(boot, axis=0) <= 1e-12
    lo = np.where(const, point, np.minimum(lo, hi))
    hi = np.where(const, point, hi)
    ivs = [Interval(float(point[i]), float(lo[i]), float(hi[i])) for i in range(q.shape[1])]
    named = dict(zip(QUANTITIES, ivs))
    return BootstrapResult(
        metrics={k: named[k] for k in METRICS},
        delta={k: named[f"Δ{k}"] for k in DELTA_OF},
        draws=draws,
        stratified=strata is not None,
        extra=tuple(ivs[len(QUANTITIES) :]),
    )
