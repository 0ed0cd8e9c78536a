"""The request JSONL format (``pfr build --out``, ``pfr run --requests``), version 2.

Every request carries the full inventory (docs/method.md §4.1), but a file need not repeat it: on BANKING77
the inventory is 6.8 of the 9.8 KB of a version-1 line. Version 2 writes each distinct inventory and
each distinct set of design factors once, as its own line, before the first request that uses it,
and requests point to them by key; options are ``[symbol, category, is_fallback, label]`` arrays.
The file stays one JSON object per line, readable as a stream (a record is always defined before it
is used), and a reader shares one inventory tuple among all the requests that use it.

Lines::

    {"format": "pfr-requests", "version": 2}
    {"kind": "inventory", "key": K, "categories": [[id, description, parent], ...]}
    {"kind": "factors", "key": F, "factors": {...}}
    {"kind": "request", "request_id": ..., "options": [[s, c, fb, label], ...], "inventory": K, "factors": F, ...}

Version 1 (no header; every line a whole :meth:`Request.to_dict`) is still read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from pfr.data.types import Category
from pfr.design.types import Option, Request, content_id

FORMAT = "pfr-requests"
VERSION = 2


class FormatError(ValueError):
    """A line that is not a valid record of the format; the caller adds the file and line."""


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def encode(requests: Iterable[Request]) -> Iterator[str]:
    """The lines of a version-2 file for ``requests`` (in order)."""
    yield _dumps({"format": FORMAT, "version": VERSION})
    inventories: dict[int, str] = {}  # id() of an inventory tuple → key; most requests share one object
    known: set[str] = set()
    factor_keys: dict[str, str] = {}
    for r in requests:
        ikey = inventories.get(id(r.inventory))
        if ikey is None:
            cats = [[c.id, c.description, c.parent] for c in r.inventory]
            ikey = content_id({"inventory": cats})
            inventories[id(r.inventory)] = ikey
            if ikey not in known:
                known.add(ikey)
                yield _dumps({"kind": "inventory", "key": ikey, "categories": cats})
        blob = json.dumps(r.factors, sort_keys=True, ensure_ascii=False)
        fkey = factor_keys.get(blob)
        if fkey is None:
            fkey = content_id({"factors": r.factors})
            factor_keys[blob] = fkey
            yield _dumps({"kind": "factors", "key": fkey, "factors": r.factors})
        sup = r.supplied
        yield _dumps(
            {
                "kind": "request",
                "request_id": r.request_id,
                "text_id": r.text_id,
                "dataset": r.dataset,
                "panel": r.panel,
                "index": r.index,
                "assignment": r.assignment,
                "definition": r.definition,
                "text": r.text,
                "y": r.y,
                "options": [[o.symbol, o.category, o.is_fallback, o.label] for o in r.options],
                "expected": r.expected,
                "fallback_index": r.fallback_index,
                "criterion": r.criterion,
                "inventory": ikey,
                "design": r.design,
                "factors": fkey,
                "supplied": None if sup is None else [sup.id, sup.description, sup.parent],
                "show_text": r.show_text,
            }
        )


class Decoder:
    """Reads the lines of a version-1 or version-2 file one at a time (:meth:`feed`)."""

    def __init__(self) -> None:
        self.version: int | None = None
        self._inventories: dict[str, tuple[Category, ...]] = {}
        self._factors: dict[str, dict[str, Any]] = {}

    def feed(self, obj: Any) -> Request | None:
        """The request a parsed line holds, or ``None`` for a header or a shared record."""
        if not isinstance(obj, dict):
            raise FormatError("a line must be a JSON object")
        if self.version is None:
            if obj.get("format") == FORMAT:
                version = obj.get("version")
                if version != VERSION:
                    raise FormatError(f"request file version {version!r}; this pfr reads 1 and {VERSION}")
                self.version = VERSION
                return None
            self.version = 1
        if self.version == 1:
            return Request.from_dict(obj)
        kind = obj.get("kind")
        if kind == "inventory":
            self._inventories[str(obj["key"])] = tuple(Category(str(i), str(d), p) for i, d, p in obj["categories"])
            return None
        if kind == "factors":
            self._factors[str(obj["key"])] = dict(obj["factors"])
            return None
        if kind is None:
            raise FormatError("missing field 'kind' (a version-2 record is an inventory, factors or request)")
        if kind != "request":
            raise FormatError(f"unknown record kind {kind!r} (inventory, factors or request)")
        try:
            inventory = self._inventories[obj["inventory"]]
        except KeyError:
            raise FormatError(f"inventory {obj.get('inventory')!r} is not defined on an earlier line") from None
        try:
            factors = self._factors[obj["factors"]]
        except KeyError:
            raise FormatError(f"factors {obj.get('factors')!r} are not defined on an earlier line") from None
        sup = obj.get("supplied")
        return Request(
            request_id=obj["request_id"],
            text_id=obj["text_id"],
            dataset=obj["dataset"],
            panel=obj["panel"],
            index=obj["index"],
            assignment=obj["assignment"],
            definition=obj["definition"],
            text=obj["text"],
            y=obj["y"],
            options=tuple(Option(s, c, bool(fb), lab) for s, c, fb, lab in obj["options"]),
            expected=obj["expected"],
            fallback_index=obj["fallback_index"],
            criterion=obj["criterion"],
            inventory=inventory,
            design=obj["design"],
            factors=dict(factors),
            supplied=None if not sup else Category(*sup),
            show_text=bool(obj.get("show_text", True)),
        )
