"""Deterministic panels of texts (docs/method.md §3.2).

Everything here depends only on the texts, the dataset name, the panel name and the seed, through
sha256: never on ``PYTHONHASHSEED``, the platform or library versions. Panels are built in a fixed
order (main, diagnostic, development, calibration, then named extras); each excludes every text
whose normalised form occurs in an earlier panel, so panels that a comparison calls disjoint are.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from pfr.data.types import Dataset, Example
from pfr.errors import DataError

_WS = re.compile(r"\s+")


@lru_cache(maxsize=65536)
def normalise(text: str) -> str:
    """NFKC, lower-case, Unicode punctuation (category P*) removed, white space collapsed."""
    t = unicodedata.normalize("NFKC", text).lower()
    t = "".join(ch for ch in t if not unicodedata.category(ch).startswith("P"))
    return _WS.sub(" ", t).strip()


def text_id(dataset: str, text: str) -> str:
    """First 16 hex digits of ``sha256(f"{dataset}|{normalised text}")``."""
    return hashlib.sha256(f"{dataset}|{normalise(text)}".encode()).hexdigest()[:16]


def hash_rank(seed: int, dataset: str, panel: str, text: str) -> int:
    """``sha256(f"{seed}|{dataset}|{panel}|{normalised text}")`` read as an integer."""
    return int(hashlib.sha256(f"{seed}|{dataset}|{panel}|{normalise(text)}".encode()).hexdigest(), 16)


@dataclass(frozen=True)
class PanelSpec:
    """How one panel is drawn: its source split, selection rule and size.

    ``rule`` is ``per_class`` (class-balanced, ``size`` texts per class), ``round_robin``,
    ``rank`` (global lowest rank), ``quota`` (lowest rank within each parent, ``quotas``), or
    ``full`` (the whole split in file order).
    """

    name: str
    split: str
    rule: str
    size: int = 0
    quotas: tuple[tuple[str, int], ...] = ()


# Source splits per dataset: where the main panel comes from, and where every other panel does.
MAIN_SPLIT = {"clinc150": "test", "banking77": "test", "trec": "test"}
POOL_SPLIT = {"clinc150": "val", "banking77": "train", "trec": "train"}
MAIN_PER_CLASS = {"clinc150": 3, "banking77": 5}

#: Named extra panels in build order, after main, diagnostic, development and calibration.
EXTRA_PANELS: dict[str, tuple[str, int]] = {
    "naming": ("rank", 128),
    "replacement": ("rank", 128),
    "layout": ("rank", 128),
    "policy": ("round_robin", 128),
    "boundary-zero-gain": ("rank", 64),
    "boundary-negative-gain": ("rank", 64),
    "boundary-tie": ("rank", 64),
    "category-policy": ("round_robin", 128),
}
CROSS_BACKBONE_QUOTAS = (("ABBR", 43), ("DESC", 43), ("ENTY", 43), ("HUM", 43), ("LOC", 42), ("NUM", 42))
BUILD_ORDER = ("main", "diagnostic", "development", "calibration", *EXTRA_PANELS, "cross-backbone")


def panel_spec(dataset: Dataset, panel: str) -> PanelSpec:
    """The rule that draws ``panel`` from ``dataset`` (docs/method.md §3.2)."""
    name = dataset.name
    builtin = name in MAIN_SPLIT
    if panel == "main":
        if not builtin:
            return PanelSpec("main", next(iter(dataset.splits)), "full")
        if name in MAIN_PER_CLASS:
            return PanelSpec("main", MAIN_SPLIT[name], "per_class", MAIN_PER_CLASS[name])
        return PanelSpec("main", MAIN_SPLIT[name], "full")
    if not builtin:
        if panel == "development" and "development" in dataset.splits:  # --dev-fraction (pfr.data.devsplit)
            return PanelSpec(panel, "development", "full")
        raise DataError(
            f"dataset {name!r} has one split, which is the main panel; to fit thresholds on its own texts, "
            "add --dev-fraction F (its development panel), or give a second file with the same --dataset-name"
        )
    pool = POOL_SPLIT[name]
    if panel == "diagnostic":
        return PanelSpec(panel, pool, "round_robin", 128)
    if panel in ("development", "calibration"):
        return PanelSpec(panel, pool, "rank", 128)
    if panel in ("development-32", "development-64"):
        return PanelSpec(panel, pool, "nested", int(panel.rsplit("-", 1)[1]))
    if panel in EXTRA_PANELS:
        rule, size = EXTRA_PANELS[panel]
        return PanelSpec(panel, pool, rule, size)
    if panel == "cross-backbone":
        if name != "trec":
            raise DataError("the cross-backbone panel is defined for trec only (coarse-class quotas)")
        return PanelSpec(panel, pool, "quota", 256, CROSS_BACKBONE_QUOTAS)
    raise DataError(f"unknown panel {panel!r}: use one of {', '.join(BUILD_ORDER)}, development-32 or development-64")


def _ranked(dataset: Dataset, split: str, panel: str, seed: int, exclude: set[str]) -> list[Example]:
    """Eligible examples of a split, sorted by (rank, raw text, source order), one per normalised text."""
    if split not in dataset.splits:
        raise DataError(f"dataset {dataset.name!r} has no split {split!r}")
    keyed = []
    for ex in dataset.splits[split]:
        norm = normalise(ex.text)
        if norm in exclude:
            continue
        keyed.append((hash_rank(seed, dataset.name, panel, ex.text), ex.text, ex.source_index, norm, ex))
    keyed.sort(key=lambda k: (k[0], k[1], k[2]))
    seen: set[str] = set()
    out = []
    for *_, norm, ex in keyed:
        if norm not in seen:
            seen.add(norm)
            out.append(ex)
    return out


def _by_class(examples: Iterable[Example]) -> dict[str, list[Example]]:
    groups: dict[str, list[Example]] = defaultdict(list)
    for ex in examples:
        groups[ex.y].append(ex)
    return groups


def is_user_dataset(dataset: Dataset) -> bool:
    """A user's file (or the bundled demo): one split, which is its main panel."""
    return dataset.name not in MAIN_SPLIT


@dataclass(frozen=True)
class Dropped:
    """A record of a user file that no panel uses: a repeated text (``duplicate``: the first copy
    is kept) or a text given different labels (``conflict``: every copy is dropped, since the gold
    label is unknown)."""

    reason: str
    example: Example
    detail: str

    def line(self) -> str:
        where = self.example.where or f"record {self.example.source_index + 1}"
        return f"{where}: {self.reason}: {self.example.text!r} ({self.detail})"


def _short(ex: Example) -> str:
    """``line 7`` out of ``path: line 7`` (the file is named once per message)."""
    return ex.where.rsplit(": ", 1)[-1] if ex.where else f"record {ex.source_index + 1}"


def dropped_examples(dataset: Dataset) -> list[Dropped]:
    """What the main panel of a user dataset leaves out, in file order (empty for built-ins, whose
    panels follow docs/method.md §3.2: the first copy by rank is kept, with its label)."""
    if not is_user_dataset(dataset):
        return []
    groups: dict[str, list[Example]] = defaultdict(list)
    for examples in dataset.splits.values():  # one split, or the two parts of --dev-fraction
        for ex in examples:
            groups[normalise(ex.text)].append(ex)
    out = []
    for copies in groups.values():
        if len(copies) < 2:
            continue
        labels = sorted({ex.y for ex in copies})
        if len(labels) > 1:
            wheres = ", ".join(f"{ex.y!r} at {_short(ex)}" for ex in copies)
            out += [Dropped("conflicting labels", ex, wheres) for ex in copies]
        else:
            out += [Dropped("duplicate", ex, f"same text as {_short(copies[0])}, which is kept") for ex in copies[1:]]
    return sorted(out, key=lambda d: d.example.source_index)


def _conflicts(dataset: Dataset) -> set[str]:
    return {normalise(d.example.text) for d in dropped_examples(dataset) if d.reason == "conflicting labels"}


def _select(dataset: Dataset, spec: PanelSpec, seed: int, exclude: set[str]) -> list[Example]:
    if spec.rule == "full":
        seen: set[str] = _conflicts(dataset) if is_user_dataset(dataset) else set()
        out = []
        for ex in dataset.splits[spec.split]:
            norm = normalise(ex.text)
            if norm not in exclude and norm not in seen:
                seen.add(norm)
                out.append(ex)
        return out
    ranked = _ranked(dataset, spec.split, spec.name, seed, exclude)
    if spec.rule == "per_class":
        groups = _by_class(ranked)
        out = []
        for cid in sorted(groups):
            if len(groups[cid]) < spec.size:
                raise DataError(
                    f"{dataset.name}/{spec.split}: class {cid!r} has {len(groups[cid])} < {spec.size} texts"
                )
            out.extend(groups[cid][: spec.size])
        return out
    if spec.rule == "rank":
        return ranked[: spec.size]
    if spec.rule == "round_robin":
        groups = _by_class(ranked)
        queues = {cid: list(reversed(groups[cid])) for cid in sorted(groups)}
        out = []
        while len(out) < spec.size and any(queues.values()):
            for cid in sorted(queues):
                if queues[cid] and len(out) < spec.size:
                    out.append(queues[cid].pop())
        return out
    if spec.rule == "quota":
        parents = {c.id: c.parent for c in dataset.inventory}
        out = []
        for parent, n in spec.quotas:
            members = [ex for ex in ranked if parents.get(ex.y) == parent]
            if len(members) < n:
                raise DataError(f"{dataset.name}/{spec.split}: parent {parent!r} has {len(members)} < {n} texts")
            out.extend(members[:n])
        return out
    raise DataError(f"unknown panel rule {spec.rule!r}")


def build_panels(dataset: Dataset, upto: str, seed: int = 0) -> dict[str, tuple[Example, ...]]:
    """Build every panel up to and including ``upto``, in build order, with exclusions applied."""
    target = upto
    if upto.startswith("development-"):
        target = "development"
    if dataset.name not in MAIN_SPLIT:
        order: Sequence[str] = ("main",)
    else:
        order = BUILD_ORDER
    if target not in order:
        panel_spec(dataset, upto)  # raises the right error
        order = (*order, target)
    built: dict[str, tuple[Example, ...]] = {}
    exclude: set[str] = set()
    for name in order:
        spec = panel_spec(dataset, name)
        chosen = _select(dataset, spec, seed, exclude)
        built[name] = tuple(replace(ex, panel=name) for ex in chosen)
        exclude.update(normalise(ex.text) for ex in chosen)
        if name == target:
            break
    if upto != target:
        size = panel_spec(dataset, upto).size
        built[upto] = tuple(replace(ex, panel=upto) for ex in built["development"][:size])
    return built


def user_sample(examples: Sequence[Example], dataset: str, seed: int, limit: int) -> tuple[Example, ...]:
    """``limit`` texts of a user file's panel: hash-ranked and balanced over the labels like the
    built-in diagnostic panels (labels in lexicographic order, round-robin, each time the label's
    lowest-ranked remaining text), then in file order. Smaller limits give nested samples."""
    groups: dict[str, list[tuple[int, str, int, Example]]] = defaultdict(list)
    for ex in examples:
        groups[ex.y].append((hash_rank(seed, dataset, "main", ex.text), ex.text, ex.source_index, ex))
    queues = {cid: sorted(rows, key=lambda r: r[:3], reverse=True) for cid, rows in groups.items()}
    chosen: list[Example] = []
    while len(chosen) < limit and any(queues.values()):
        for cid in sorted(queues):
            if queues[cid] and len(chosen) < limit:
                chosen.append(queues[cid].pop()[3])
    return tuple(sorted(chosen, key=lambda ex: ex.source_index))


def build_panel(dataset: Dataset, panel: str = "main", seed: int = 0, limit: int | None = None) -> tuple[Example, ...]:
    """One panel of ``dataset`` in panel order.

    ``limit`` keeps the first texts of a built-in panel; on a user file (one split, file order)
    it takes :func:`user_sample` instead, so the sample is not the first rows of a sorted file.
    """
    if limit is not None:
        from pfr.options import Number

        limit = Number(whole=True, low=0).parse("limit", limit)
    examples = build_panels(dataset, panel, seed)[panel]
    if limit is None or limit >= len(examples):
        return examples
    if is_user_dataset(dataset):
        return user_sample(examples, dataset.name, seed, limit)
    return examples[:limit]
