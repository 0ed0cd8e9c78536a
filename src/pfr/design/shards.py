"""Which shard a text belongs to: a stable hash of its id, so a text's requests (its quad, every
wording and setting) always land in one shard, and every run, model and machine agrees.

``pfr study --executor ray`` cuts each request set into units with it; a batch array that shards by
text can use the same function, so a text is in the same shard everywhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pfr.design.types import Request


def text_shard(text_id: str, count: int) -> int:
    """The 0-based shard of ``text_id`` among ``count`` (sha256 of the id, not Python's salted ``hash``)."""
    if count < 1:
        raise ValueError(f"shard count must be >= 1, got {count}")
    return int.from_bytes(hashlib.sha256(text_id.encode("utf-8")).digest()[:8], "big") % count


def split_by_text(requests: Sequence[Request], count: int) -> list[list[Request]]:
    """``requests`` in ``count`` shards of whole texts, each in the original order (some may be empty)."""
    shards: list[list[Request]] = [[] for _ in range(count)]
    for r in requests:
        shards[text_shard(r.text_id, count)].append(r)
    return shards
