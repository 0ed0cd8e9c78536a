"""``pfr export``: one JSON line per scored request, with the exact prompt, scores and timing.

Each row holds the request's fields, ``prompt``, ``scores`` (normalised log-probabilities), ``logits``,
``censored``, ``choice``, ``model`` (the identity), ``seconds``, ``meta`` and ``inventory_key``; the
first row of each inventory also carries ``inventory`` as ``[[id, description, parent], ...]`` (written
once, not on each of the thousands of rows that share it). ``pfr import`` (:mod:`pfr.run.importer`)
reads it back.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pfr.data.types import Category
from pfr.design.types import content_id
from pfr.run.store import Store


def _inventory_rows(inventory: tuple[Category, ...]) -> list[list[Any]]:
    return [[c.id, c.description, c.parent] for c in inventory]


def export_lines(store: str | os.PathLike[str]) -> list[str]:
    """The lines of ``pfr export``: one JSON object per (current) scored request of ``store``."""
    rows = []
    keys: dict[int, tuple[tuple[Category, ...], str]] = {}  # id(inventory) → key; requests share one tuple
    written: set[str] = set()
    with Store(store, create=False) as st:
        for r in st.results():
            row = r.request.to_dict()
            row.pop("inventory")
            hit = keys.get(id(r.request.inventory))
            if hit is None or hit[0] is not r.request.inventory:
                hit = (r.request.inventory, content_id({"inventory": _inventory_rows(r.request.inventory)}))
                keys[id(r.request.inventory)] = hit
            row.update(
                prompt=r.prompt,
                scores=list(r.logprobs),
                logits=list(r.logits),
                censored=list(r.censored),
                choice=r.choice,
                model=r.model,
                seconds=r.seconds,
                meta=r.meta,
                inventory_key=hit[1],
            )
            if hit[1] not in written:
                written.add(hit[1])
                row["inventory"] = _inventory_rows(r.request.inventory)
            rows.append(json.dumps(row, ensure_ascii=False))
    return rows
