"""The main PFR design (docs/method.md §4.1): four requests per input, {R, F} × {U, C}.

:mod:`pfr.design.tasks` picks the builder of each ``--task``; this module builds the main one.

All random choices are hash-seeded on ``text_id`` (never on anything a model produced), so the
same panel and design give byte-identical requests on any machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from pfr.data.types import Category, Dataset, Example
from pfr.design.types import (
    FALLBACK_NAMES,
    INFO_CONDITIONS,
    LAYOUTS,
    REPLACEMENTS,
    SYMBOLS,
    Design,
    Option,
    Request,
    content_id,
)
from pfr.design.wording import MATCHED_GROUPS, criterion
from pfr.errors import DesignError

_GOLD = "\x00gold-slot"


def _hash_order(items: Sequence[str], *key: object) -> list[str]:
    """``items`` sorted by ``sha256(key|item)``: a permutation that depends only on the key."""
    prefix = "|".join(str(k) for k in key)
    return sorted(items, key=lambda it: hashlib.sha256(f"{prefix}|{it}".encode()).hexdigest())


def check_design(design: Design, inventory: Sequence[Category], where: str = "") -> None:
    """Reject a design that cannot be built on this inventory, with the reason; ``where`` names the
    file the inventory came from."""
    if design.k < 2 or design.k > len(SYMBOLS):
        raise DesignError(f"option count k={design.k} must be between 2 and {len(SYMBOLS)}")
    if len(inventory) < design.k:
        raise DesignError(
            f"{where + ': ' if where else ''}the inventory has {len(inventory)} categories, "
            f"fewer than the {design.k} needed for "
            f"{design.k} options ({design.k - 1} regular + fallback, plus a replacement); "
            + (f"use --options {len(inventory)} or fewer" if len(inventory) >= 2 else "a design needs 2 or more")
        )
    if design.fallback not in FALLBACK_NAMES and not design.fallback.strip():
        raise DesignError("the fallback name is empty")
    if design.info not in INFO_CONDITIONS:
        raise DesignError(f"unknown category information {design.info!r} (use {', '.join(INFO_CONDITIONS)})")
    if design.layout not in LAYOUTS:
        raise DesignError(f"unknown layout {design.layout!r} (use {', '.join(LAYOUTS)})")
    if design.replacement not in REPLACEMENTS:
        raise DesignError(f"unknown replacement {design.replacement!r} (use {', '.join(REPLACEMENTS)})")
    if design.position is not None and not 1 <= design.position <= design.k:
        raise DesignError(f"fallback position {design.position} must be between 1 and {design.k}")
    ids = {c.id for c in inventory}
    if design.fallback in ids:
        raise DesignError(f"the fallback name {design.fallback!r} is also a category id; choose another")


def _draw(ex: Example, dataset: str, inventory: Sequence[Category], design: Design) -> tuple[list[str], str]:
    """The 14 shared regular categories and the replacement ``c15`` for one example."""
    others = [c.id for c in inventory if c.id != ex.y]
    perm = _hash_order(others, design.seed, dataset, "choice", design.choice_set, ex.text_id)
    n = design.k - 2
    if design.replacement == "any":
        return perm[:n], perm[n]
    parents = {c.id: c.parent for c in inventory}
    gold_parent = parents.get(ex.y)
    if gold_parent is None:
        raise DesignError(f"replacement={design.replacement} needs parent categories; {ex.y!r} has none")
    same = [c for c in perm if parents.get(c) == gold_parent]
    diff = [c for c in perm if parents.get(c) != gold_parent]
    if not same or not diff:
        raise DesignError(f"category {ex.y!r} has no {'same' if not same else 'different'}-parent replacement")
    # c1..c14 exclude both candidates, so the same- and different-parent variants share them.
    shared = [c for c in perm if c not in (same[0], diff[0])][:n]
    return shared, same[0] if design.replacement == "same" else diff[0]


def build_quad(ex: Example, index: int, dataset: Dataset, design: Design) -> list[Request]:
    """The four requests of one example at panel position ``index``: RU, RC, FU, FC."""
    inventory = dataset.inventory
    inv_ids = [c.id for c in inventory]
    shared, c15 = _draw(ex, dataset.name, inventory, design)
    regular_slots = _hash_order([*shared, _GOLD], design.seed, dataset.name, "order", ex.text_id)
    p = (design.position - 1) if design.position is not None else index % design.k
    slots: list[str | None] = list(regular_slots)
    slots.insert(p, None)
    gold_slot = slots.index(_GOLD)
    by_id = {c.id: c for c in inventory}
    supplied = by_id[ex.y] if design.info != "text" else None
    # computed once per quad (asdict is slow); every request still gets its own factors dict
    factors, name = design.factors(), design.name
    fixed: dict[str, Any] = {
        "text_id": ex.text_id, "dataset": dataset.name, "panel": ex.panel, "index": index, "text": ex.text, "y": ex.y,
        "fallback_index": p, "design": name, "factors": factors, "supplied": asdict(supplied) if supplied else None,
        "show_text": design.info != "label", "inventory": inv_ids,
    }  # fmt: skip
    out = []
    for assignment in ("R", "F"):
        filled = [ex.y if s == _GOLD and assignment == "R" else c15 if s == _GOLD else s for s in slots]
        options = tuple(
            Option(SYMBOLS[i], cid, cid is None, design.fallback if cid is None else cid)
            for i, cid in enumerate(filled)
        )
        regular = sorted(c for c in filled if c is not None)
        reg_set = set(regular)
        fallback_members = [c for c in inv_ids if c not in reg_set]
        expected = gold_slot if assignment == "R" else p
        option_dicts = [asdict(o) for o in options]
        for definition in ("U", "C"):
            rule = criterion(
                definition,
                design.fallback,
                regular,
                fallback_members,
                inv_ids,
                wording=design.wording,
                membership=design.membership,
                layout=design.layout,
                matched=design.task if design.task in MATCHED_GROUPS else None,
            )
            body: dict[str, Any] = {**fixed, "assignment": assignment, "definition": definition,
                                    "options": option_dicts, "expected": expected, "criterion": rule}  # fmt: skip
            # the Request holds the same fields as the body it is named by, typed instead of as JSON
            typed: dict[str, Any] = {"options": options, "inventory": inventory, "supplied": supplied,
                                     "factors": dict(factors)}  # fmt: skip
            out.append(Request(request_id=content_id(body), **{**body, **typed}))
    return out


def coarse_view(dataset: Dataset, examples: Sequence[Example]) -> tuple[Dataset, list[Example]]:
    """The compact task's view (docs/method.md §4.2): the inventory is the parents (TREC's six coarse
    classes) and each example's gold is its category's parent."""
    parents = {c.id: c.parent for c in dataset.inventory}
    if any(p is None for p in parents.values()):
        raise DesignError(f"the compact task needs parent categories; {dataset.name!r} has none")
    described = {c.id: c.description for c in dataset.parents}
    inventory = tuple(Category(p, described.get(p, p)) for p in sorted({str(p) for p in parents.values()}))
    relabelled = [replace(ex, y=str(parents[ex.y])) for ex in examples]
    return Dataset(dataset.name, inventory, {}, dataset.source), relabelled
