"""Paired text bootstrap (DESIGN §7): percentile intervals for every metric and every Δ.

Rows of the indicator matrix are texts, so resampling rows keeps each text's four requests
together. One draw of the resampling matrix per setting serves every metric and every Δ, which
keeps the Δ intervals paired. Every reported quantity is linear in the indicator means, so the
whole table is ``counts @ (X @ L) / n``: a (B × n) count matrix, the (n × m) indicators and an
(m × K) map from indicator columns to metrics and Δs.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
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


#: elements of one block of resampling counts (draws × texts): 2**22 float64 is 32 MiB, so the bootstrap of
#: 10^5 texts needs tens of MiB, not draws × texts × 16 bytes (16 GB at 10,000 draws).
BLOCK_ELEMENTS = 1 << 22


def _counts(idx: np.ndarray, n: int) -> np.ndarray:
    rows = idx.shape[0]
    flat = idx.astype(np.int64) + (np.arange(rows, dtype=np.int64) * n)[:, None]
    return np.bincount(flat.ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)


def _check_draws(draws: int) -> None:
    if draws < 1:
        raise PfrError(f"bootstrap draws must be at least 1, got {draws}")


def _index_blocks(
    n: int, draws: int, rng: np.random.Generator, strata: Sequence[object] | np.ndarray | None, block_elements: int
) -> Iterator[np.ndarray]:
    """The resampled text indices (rows × n, n ≥ 1), block by block; what :func:`resample_blocks` counts."""
    step = max(1, block_elements // n)
    if strata is not None:
        labels = np.asarray(strata, dtype=object)
        if len(labels) != n:
            raise ValueError(f"strata has {len(labels)} labels for {n} texts")
        _, codes = np.unique(labels.astype(str), return_inverse=True)
        parts = []
        for s in range(int(codes.max()) + 1):
            members = np.flatnonzero(codes == s)
            parts.append(members[rng.integers(0, len(members), size=(draws, len(members)))])
        whole = np.concatenate(parts, axis=1)
        for start in range(0, draws, step):
            yield whole[start : start + step]
        return
    for start in range(0, draws, step):
        rows = min(step, draws - start)
        yield rng.integers(0, n, size=(rows, n), dtype=np.int32)


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

    Equal to ``resample_counts(n, draws, rng, strata) @ q / n`` for any ``block_elements``.
    The report's rows are 0/1 indicator patterns, and 10^4 texts share a few dozen distinct rows: a
    resample then counts how often it drew each *distinct row* (draws × P counts instead of draws × n),
    from the same random indices, so the means are the same sums (bit-identical for 0/1 rows) at a
    fraction of the memory traffic. The counting runs in one worker thread beside the drawing, so the
    two overlap on a second core (the 10^4-text report: docs/performance.md).
    """
    _check_draws(draws)
    n = q.shape[0]
    if n == 0:
        return np.zeros((draws, q.shape[1]))
    out = np.empty((draws, q.shape[1]))
    distinct, inverse = np.unique(q, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    p = len(distinct)
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
    rng = rng if rng is not None else np.random.default_rng(0)
    q = x @ linear_map()  # (n × K) per-text contributions
    point = q.mean(axis=0)
    boot = bootstrap_means(q, draws, rng, strata)  # (B × K), in blocks of bounded memory
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
