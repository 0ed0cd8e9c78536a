"""Shards of a run for batch arrays: ``pfr run --shard I/N`` scores only the texts of shard I.

A text belongs to one shard, chosen by a stable hash of its id (SHA-256, not Python's salted
``hash``), so every request of a text (its four settings, every wording) lands in the same shard,
and every run, model and dataset agrees on it: the N shards are disjoint and together cover
everything, whatever the order, the limit or the machine. ``pfr merge`` then unites the shard stores.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pfr.design.types import Request
from pfr.errors import DataError

#: the Slurm array variables ``--shard slurm`` reads
SLURM_ID, SLURM_COUNT, SLURM_MIN = "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN"


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (0-based) of ``count``; written ``I/N`` with I 1-based, as ``--shard`` takes it."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index + 1}/{self.count}"

    def holds(self, text_id: str) -> bool:
        return shard_of(text_id, self.count) == self.index


def shard_of(text_id: str, count: int) -> int:
    """The 0-based shard of ``text_id`` among ``count``: the first 8 bytes of its SHA-256, modulo ``count``."""
    digest = hashlib.sha256(text_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


def parse_shard(text: str, environ: Mapping[str, str] | None = None) -> Shard:
    """``I/N`` (1 ≤ I ≤ N) or ``slurm`` (the array task's place among the array's tasks: ``ID − MIN`` of
    ``COUNT``, MIN 0 when unset); anything else is a :class:`~pfr.errors.DataError` naming it."""
    if text.strip().lower() == "slurm":
        return _slurm(os.environ if environ is None else environ)
    i, sep, n = text.partition("/")
    try:
        index, count = int(i), int(n)
    except ValueError:
        index = count = 0
    if not sep or count < 1:
        raise DataError(f"--shard {text}: expected I/N (shard I of N, 1 ≤ I ≤ N, e.g. 1/4) or slurm")
    if not 1 <= index <= count:
        raise DataError(f"--shard {text}: shard {index} is not between 1 and {count} (shards are numbered from 1)")
    return Shard(index - 1, count)


def _slurm(environ: Mapping[str, str]) -> Shard:
    values: dict[str, int] = {}
    for name in (SLURM_ID, SLURM_COUNT, SLURM_MIN):
        raw = environ.get(name)
        if raw is None:
            if name == SLURM_MIN:
                continue
            raise DataError(f"--shard slurm: {name} is not set (run it as a task of `sbatch --array`)")
        try:
            values[name] = int(raw)
        except ValueError:
            raise DataError(f"--shard slurm: {name}={raw!r} is not an integer") from None
    count, index = values[SLURM_COUNT], values[SLURM_ID] - values.get(SLURM_MIN, 0)
    if count < 1 or not 0 <= index < count:
        raise DataError(
            f"--shard slurm: task {values[SLURM_ID]} (minimum {values.get(SLURM_MIN, 0)}) is not one of {count} "
            "consecutive tasks; give the array as a range without a step (--array=0-N or 1-N)"
        )
    return Shard(index, count)


def shard_requests(requests: Sequence[Request], shard: Shard | None) -> list[Request]:
    """The requests of ``requests`` whose text is in ``shard``, in their order (all of them for ``None``)."""
    if shard is None:
        return list(requests)
    memo: dict[str, bool] = {}
    out = []
    for r in requests:
        keep = memo.get(r.text_id)
        if keep is None:
            keep = memo[r.text_id] = shard.holds(r.text_id)
        if keep:
            out.append(r)
    return out
