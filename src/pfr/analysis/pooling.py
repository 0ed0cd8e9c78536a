"""Pooled settings (paper Appendix A): a text's indicators averaged over the templates, mappings or
choice-set × position combinations of a comparison *before* the bootstrap.

Settings of one model × dataset × panel whose design factors differ only in a pooled factor group
form one pooled setting. Its rows are the texts scored under every member; each row is the mean of
that text's indicator rows over the members, so the bootstrap resamples texts (all their variants
together) and every metric of the pooled setting is the mean of the members' metrics on those
texts. Pooled settings are descriptive: they carry intervals, not tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from pfr.design.types import Design

Key = tuple[str, str, str, str]

#: pooled factor group → the Design fields it averages over
POOLS: dict[str, tuple[str, ...]] = {
    "wording": ("wording",),  # the three U/C templates
    "choice-set×position": ("choice_set", "position"),
    "seed": ("seed",),  # hash-seeded mappings (choice sets, category partitions)
}
_FIELDS = {f.name for f in fields(Design)}


@dataclass(frozen=True)
class PoolGroup:
    """One pooled setting: its key, the factor group, and its members' setting keys."""

    key: Key
    pool: str
    members: tuple[Key, ...]


def pooled_design_name(factors: Mapping[str, Any], pool: str) -> str:
    base = {k: v for k, v in factors.items() if k in _FIELDS and k not in POOLS[pool]}
    return f"{Design(**base).name} [pooled: {pool}]"


def pool_groups(factors: Mapping[Key, Mapping[str, Any]]) -> list[PoolGroup]:
    """Every pooled setting the report's settings allow: groups of ≥ 2 settings of one model ×
    dataset × panel that differ only in one pooled factor group (and do differ in it)."""
    out: list[PoolGroup] = []
    for pool, names in POOLS.items():
        groups: dict[tuple[Any, ...], list[Key]] = {}
        for key, f in factors.items():
            if not set(names) <= set(f) or "[" in key[3]:  # subsets and pooled settings are not pooled again
                continue
            rest = tuple(sorted((k, repr(v)) for k, v in f.items() if k in _FIELDS and k not in names))
            groups.setdefault((key[0], key[1], key[2], rest), []).append(key)
        for (model, dataset, panel, _), members in groups.items():
            varied = {tuple(factors[m][n] for n in names) for m in members}
            if len(members) >= 2 and len(varied) == len(members):
                name = pooled_design_name(factors[members[0]], pool)
                out.append(PoolGroup((model, dataset, panel, name), pool, tuple(members)))
    return out


def pooled_matrix(
    matrix: np.ndarray, positions: Mapping[Key, np.ndarray], text_ids: np.ndarray, members: Sequence[Key]
) -> tuple[np.ndarray, np.ndarray]:
    """(texts × indicators) means over the members for the texts every member has, in the first
    member's order, and those texts' rows in the first member (for strata and labels)."""
    rows = []
    for m in members:
        pos = positions[m]
        rows.append({str(t): p for t, p in zip(text_ids[pos], pos)})
    common = [t for t in rows[0] if all(t in r for r in rows[1:])]
    stacked = np.stack([matrix[[r[t] for t in common]] for r in rows])  # (members × texts × indicators)
    return stacked.mean(axis=0), np.asarray([rows[0][t] for t in common], dtype=np.int64)
