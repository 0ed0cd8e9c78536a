"""The results store: one SQLite file per study, every request and its scores.

A result is keyed by the model's identity (a hash of everything that changes its scores) and a
content hash of the rendered request (the request's fields and the exact prompt). Each batch is
committed in one transaction as soon as it is scored, so ``kill -9`` at any moment loses at most
the batch in flight and never leaves half a result; a rerun skips what is already stored.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pfr.data.types import Category
from pfr.design.types import Request, content_id
from pfr.errors import StoreError

DB_NAME = "results.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS models(model_key TEXT PRIMARY KEY, identity TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS inventories(inventory_key TEXT PRIMARY KEY, inventory TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests(
    request_key TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    dataset TEXT NOT NULL, panel TEXT NOT NULL, design TEXT NOT NULL,
    request TEXT NOT NULL, inventory_key TEXT NOT NULL, prompt TEXT
);
CREATE TABLE IF NOT EXISTS results(
    model_key TEXT NOT NULL, request_key TEXT NOT NULL,
    logits TEXT NOT NULL, logprobs TEXT NOT NULL, censored TEXT NOT NULL,
    choice INTEGER NOT NULL, seconds REAL NOT NULL, meta TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY(model_key, request_key)
);
"""


def model_key(identity: dict[str, Any]) -> str:
    return content_id(identity)


def request_key(request: Request, prompt: str | None) -> str:
    body = request.to_dict()
    body.pop("inventory")
    return content_id({"request": body, "inventory": [c.id for c in request.inventory], "prompt": prompt})


@dataclass(frozen=True)
class StoredResult:
    """One scored request as read back from the store."""

    model: dict[str, Any]
    request: Request
    prompt: str | None
    logits: tuple[float, ...]
    logprobs: tuple[float, ...]
    censored: tuple[bool, ...]
    choice: int
    seconds: float
    meta: dict[str, Any]


class Store:
    """A results store in folder ``path`` (created on first write)."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self.path = Path(path)
        db = self.path / DB_NAME
        if not create and not db.is_file():
            raise StoreError(f"{self.path}: no results store here (expected {DB_NAME}); run `pfr run --store` first")
        if create:
            self.path.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(db, timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{db}: not a readable results store ({exc})") from None
        if row is None:
            with self._db:
                self._db.execute("INSERT OR IGNORE INTO meta VALUES('schema', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise StoreError(f"{db}: store schema {row[0]}, this pfr reads {SCHEMA_VERSION}")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_model(self, identity: dict[str, Any]) -> str:
        key = model_key(identity)
        with self._db:
            self._db.execute(
                "INSERT OR IGNORE INTO models VALUES(?,?,?)", (key, json.dumps(identity, sort_keys=True), time.time())
            )
        return key

    def done(self, mkey: str, rkeys: Iterable[str]) -> set[str]:
        """Which of ``rkeys`` already have a result for model ``mkey``."""
        found: set[str] = set()
        keys = list(rkeys)
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT request_key FROM results WHERE model_key=? AND request_key IN ({marks})", (mkey, *chunk)
            )
            found.update(r[0] for r in rows)
        return found

    def add_results(
        self,
        mkey: str,
        items: Sequence[
            tuple[
                str, Request, str | None, Sequence[float], Sequence[float], Sequence[bool], int, float, dict[str, Any]
            ]
        ],
    ) -> None:
        """Commit one batch atomically.

        Each item is (request_key, request, prompt, logits, logprobs, censored, choice, seconds, meta).
        """
        now = time.time()
        with self._db:
            for rkey, req, prompt, logits, logprobs, censored, choice, seconds, meta in items:
                inv = [{"id": c.id, "description": c.description, "parent": c.parent} for c in req.inventory]
                ikey = content_id({"inventory": inv})
                self._db.execute("INSERT OR IGNORE INTO inventories VALUES(?,?)", (ikey, json.dumps(inv)))
                body = req.to_dict()
                body.pop("inventory")
                self._db.execute(
                    "INSERT OR IGNORE INTO requests VALUES(?,?,?,?,?,?,?,?)",
                    (rkey, req.request_id, req.dataset, req.panel, req.design, json.dumps(body), ikey, prompt),
                )
                self._db.execute(
                    "INSERT OR IGNORE INTO results VALUES(?,?,?,?,?,?,?,?,?)",
                    (
                        mkey,
                        rkey,
                        json.dumps(list(logits)),
                        json.dumps(list(logprobs)),
                        json.dumps(list(censored)),
                        choice,
                        seconds,
                        json.dumps(meta),
                        now,
                    ),
                )

    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def results(self) -> Iterator[StoredResult]:
        """Every stored result, in insertion order."""
        inventories: dict[str, tuple[Category, ...]] = {}  # built once per inventory, shared by requests
        models: dict[str, dict[str, Any]] = {
            k: json.loads(v) for k, v in self._db.execute("SELECT model_key, identity FROM models")
        }
        q = (
            "SELECT r.model_key, q.request, q.inventory_key, q.prompt, r.logits, r.logprobs, r.censored, "
            "r.choice, r.seconds, r.meta FROM results r JOIN requests q ON q.request_key = r.request_key "
            "ORDER BY r.rowid"
        )
        for mkey, req, ikey, prompt, logits, logprobs, censored, choice, seconds, meta in self._db.execute(q):
            if ikey not in inventories:
                row = self._db.execute("SELECT inventory FROM inventories WHERE inventory_key=?", (ikey,)).fetchone()
                inventories[ikey] = tuple(Category(**c) for c in json.loads(row[0]))
            body = json.loads(req)
            body["inventory"] = ()
            yield StoredResult(
                model=models[mkey],
                request=dataclasses.replace(Request.from_dict(body), inventory=inventories[ikey]),
                prompt=prompt,
                logits=tuple(json.loads(logits)),
                logprobs=tuple(json.loads(logprobs)),
                censored=tuple(json.loads(censored)),
                choice=int(choice),
                seconds=float(seconds),
                meta=json.loads(meta),
            )
