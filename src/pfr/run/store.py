"""The results store: one SQLite file per study, every request and its scores.

A result is keyed by the model's identity (a hash of everything that changes its scores) and a
content hash of the rendered request (the request's fields and the exact prompt). Each batch is
committed in one transaction as soon as it is scored, so ``kill -9`` at any moment loses at most
the batch in flight and never leaves half a result; a rerun skips what is already stored.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from pfr.data.types import Category
from pfr.design.types import Request, content_id
from pfr.errors import StoreError
from pfr.run.records import (
    ScoredRow,
    StoredResult,
    inventory_rows,
    model_key,
    request_key,
    request_problem,
    result_problem,
)

__all__ = [
    "DB_NAME",
    "RESULTS_QUERY",
    "Store",
    "StoredResult",
    "model_key",
    "request_key",
    "request_problem",
]

DB_NAME = "results.sqlite"
SCHEMA_VERSION = 1
#: how much of a store a read-only connection maps into memory (SQLite caps it at the file size)
READ_MMAP_BYTES = 1 << 30

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


#: every result row with its request, in insertion order (what :meth:`Store.results` reads)
RESULTS_QUERY = (
    "SELECT r.rowid, r.model_key, q.request, q.inventory_key, q.prompt, r.logits, r.logprobs, r.censored, "
    "r.choice, r.seconds, r.meta, r.request_key FROM results r LEFT JOIN requests q ON q.request_key = r.request_key "
    "ORDER BY r.rowid"
)

_TABLES = ("meta", "models", "inventories", "requests", "results")


class Store:
    """A results store in folder ``path``.

    ``create=True`` (what ``pfr run`` uses) creates the folder and opens it for writing;
    ``create=False`` (report, export, thresholds) opens an existing store read-only, so a store on
    a read-only disk or in a folder the user may not write can still be read. Opening runs
    SQLite's ``quick_check``: a damaged file is an error, never an empty report. Every problem
    is a :class:`~pfr.errors.StoreError` that names the file.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, check: bool = True) -> None:
        self.path = Path(path)
        self.readonly = not create
        db = self.db = self.path / DB_NAME
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"{self.path}: is a file, not a store folder (a store is a folder with {DB_NAME})")
        if db.exists() and not db.is_file():
            raise StoreError(f"{db}: is not a file")
        if not create and not db.is_file():
            raise StoreError(f"{self.path}: no results store here (expected {DB_NAME}); run `pfr run --store` first")
        if create:
            try:
                self.path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{self.path}: cannot create the store folder ({exc.strerror or exc})") from None
            if not os.access(self.path, os.W_OK | os.X_OK):
                raise StoreError(f"{self.path}: the store folder is not writable")
            if db.exists() and not os.access(db, os.W_OK):
                raise StoreError(f"{db}: the store file is read-only (reports and exports can still read it)")
        try:
            self._db = self._connect(db)
        except sqlite3.Error as exc:
            raise StoreError(f"{db}: cannot open the results store ({exc})") from None
        try:
            if check:
                self._check()
            if create:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.executescript(_SCHEMA)
            else:
                names = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                missing = [t for t in _TABLES if t not in names]
                if missing:
                    raise StoreError(f"{db}: not a pfr results store (no table {missing[0]!r})")
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None and create:
                self._write(lambda: self._db.execute("INSERT OR IGNORE INTO meta VALUES('schema', ?)",
                                                     (str(SCHEMA_VERSION),)))  # fmt: skip
            elif row is not None and row[0] != str(SCHEMA_VERSION):
                raise StoreError(f"{db}: store schema {row[0]}, this pfr reads {SCHEMA_VERSION}")
        except StoreError:
            self._db.close()
            raise
        except sqlite3.Error as exc:
            self._db.close()
            raise StoreError(f"{db}: not a readable results store ({exc})") from None

    def _connect(self, db: Path) -> sqlite3.Connection:
        if not self.readonly:
            con = sqlite3.connect(db, timeout=60, isolation_level=None)
            return con
        uri = f"file:{quote(str(db.resolve()))}?mode=ro"
        try:
            con = sqlite3.connect(uri, uri=True, timeout=60, isolation_level=None)
            con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            # reads through a memory map, not one read() per page: on a cached 200 MB store the integrity
            # check took about 60 % less time and the results query about 20 % less (docs/performance.md)
            con.execute(f"PRAGMA mmap_size={READ_MMAP_BYTES}")
            return con
        except sqlite3.OperationalError:
            # A WAL store in a folder we may not write: SQLite cannot create the -shm file. When
            # no -wal file holds uncheckpointed data, the main file is complete: read it immutable.
            wal = db.with_name(db.name + "-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise StoreError(
                    f"{db}: read-only, and its write-ahead log {wal.name} still holds results; "
                    "open it once where it is writable (any pfr report there) to fold them in"
                ) from None
            con = sqlite3.connect(uri + "&immutable=1", uri=True, timeout=60, isolation_level=None)
            con.execute(f"PRAGMA mmap_size={READ_MMAP_BYTES}")
            return con

    def _check(self) -> None:
        rows = [r[0] for r in self._db.execute("PRAGMA quick_check")]
        if rows != ["ok"]:
            first = rows[0] if rows else "no answer"
            raise StoreError(
                f"{self.db}: the store is damaged (SQLite integrity check: {first}"
                f"{f'; {len(rows) - 1} more problems' if len(rows) > 1 else ''}); restore it from a copy or rerun "
                "into a new store"
            )

    def _write(self, body: Any) -> Any:
        """Run ``body`` in one IMMEDIATE transaction (the write lock is taken up front, so concurrent
        writers queue on the busy timeout instead of failing); disk and permission errors become
        one-line :class:`StoreError`s and roll the transaction back."""
        if self.readonly:
            raise StoreError(f"{self.db}: opened read-only")
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._write_error(exc) from None
        try:
            out = body()
            self._db.execute("COMMIT")
            return out
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise self._write_error(exc) from None
            raise

    def _write_error(self, exc: sqlite3.Error) -> StoreError:
        text = str(exc)
        if "disk is full" in text or "disk I/O" in text:
            return StoreError(
                f"{self.db}: cannot write results: the disk is full ({text}); results committed before are kept"
            )
        if "readonly" in text or "read-only" in text:
            return StoreError(f"{self.db}: cannot write results: the store is read-only ({text})")
        if "locked" in text or "busy" in text:
            return StoreError(f"{self.db}: another process held the store locked for too long ({text})")
        return StoreError(f"{self.db}: cannot write results ({text})")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_model(self, identity: dict[str, Any]) -> str:
        key = model_key(identity)
        blob = json.dumps(identity, sort_keys=True)
        self._write(lambda: self._db.execute("INSERT OR IGNORE INTO models VALUES(?,?,?)", (key, blob, time.time())))
        return key

    def done(self, mkey: str, rkeys: Iterable[str]) -> set[str]:
        """Which of ``rkeys`` already have a result for model ``mkey``."""
        found: set[str] = set()
        keys = list(rkeys)
        try:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT request_key FROM results WHERE model_key=? AND request_key IN ({marks})", (mkey, *chunk)
                )
                found.update(r[0] for r in rows)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.db}: cannot read the store ({exc})") from None
        return found

    def add_results(
        self,
        mkey: str,
        items: Sequence[ScoredRow],
    ) -> None:
        """Commit one batch of :class:`ScoredRow` atomically."""
        now = time.time()

        inv_keys: dict[int, tuple[tuple[Category, ...], str]] = {}  # id(inventory) → key: most requests share one

        def body() -> None:
            for rkey, req, prompt, logits, logprobs, censored, choice, seconds, meta in items:
                hit = inv_keys.get(id(req.inventory))
                if hit is None or hit[0] is not req.inventory:
                    inv = inventory_rows(req)
                    hit = (req.inventory, content_id({"inventory": inv}))
                    inv_keys[id(req.inventory)] = hit
                    self._db.execute("INSERT OR IGNORE INTO inventories VALUES(?,?)", (hit[1], json.dumps(inv)))
                ikey = hit[1]
                req_body = req.to_dict()
                req_body.pop("inventory")
                # options as [symbol, category, is_fallback, label] lists: a quarter of the stored bytes
                req_body["options"] = [[o.symbol, o.category, o.is_fallback, o.label] for o in req.options]
                self._db.execute(
                    "INSERT OR IGNORE INTO requests VALUES(?,?,?,?,?,?,?,?)",
                    (rkey, req.request_id, req.dataset, req.panel, req.design, json.dumps(req_body), ikey, prompt),
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

        self._write(body)

    def count(self) -> int:
        try:
            return int(self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.db}: cannot read the store ({exc})") from None

    def results(self, *, superseded: bool = False) -> Iterator[StoredResult]:
        """The stored results, in insertion order.

        A result is *superseded* when the same model later scored the same cell (dataset, panel,
        design, text, assignment, definition) again because something that changes scores was
        edited (a description, a parent, the text): only the latest counts, and only results whose
        inventory is the one of the latest result of their model × dataset × panel × design, so a
        rerun after editing descriptions never mixes old and new scores in one report.
        ``superseded=True`` yields everything that is stored.
        """
        try:
            rows = self._rows()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.db}: cannot read the store ({exc}); the file may be damaged") from None
        if superseded:
            yield from (r for _, _, r in rows)
            return
        latest_cell: dict[tuple[str, ...], int] = {}
        inventory: dict[tuple[str, ...], str] = {}  # each setting's inventory: the first, then the latest
        mixed = False
        for i, (mkey, ikey, r) in enumerate(rows):
            q = r.request
            latest_cell[(mkey, q.dataset, q.panel, q.design, q.text_id, q.assignment, q.definition)] = i
            if inventory.setdefault((mkey, q.dataset, q.panel, q.design), ikey) != ikey:
                mixed = True
        if not mixed and len(latest_cell) == len(rows):  # nothing scored twice, one inventory per setting
            yield from (r for _, _, r in rows)
            return
        for mkey, ikey, r in rows:
            q = r.request
            inventory[(mkey, q.dataset, q.panel, q.design)] = ikey
        for i in sorted(latest_cell.values()):
            mkey, ikey, r = rows[i]
            q = r.request
            if inventory[(mkey, q.dataset, q.panel, q.design)] == ikey:
                yield r

    def _rows(self) -> list[tuple[str, str, StoredResult]]:
        """Every result row as (model key, inventory key, result), checked field by field.

        The cyclic garbage collector is paused meanwhile: the rows only add objects, and its
        passes over a heap that grows by 10^5 requests cost about a third of the read.
        """
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._read_rows()
        finally:
            if was_enabled:
                gc.enable()

    def _read_rows(self) -> list[tuple[str, str, StoredResult]]:
        inventories: dict[str, tuple[Category, ...]] = {}  # built once per inventory, shared by requests
        models: dict[str, dict[str, Any]] = {}
        for k, v in self._db.execute("SELECT model_key, identity FROM models"):
            try:
                models[k] = json.loads(v)
            except (TypeError, json.JSONDecodeError):
                raise StoreError(f"{self.db}: models row {k!r}: identity is not valid JSON") from None
        out: list[tuple[str, str, StoredResult]] = []
        append = out.append
        last: tuple[Any, Any] = (None, None)  # the last options read: a text's U and C requests share them
        requests: dict[str, Request] = {}  # each request read once, however many models scored it
        for row in self._db.execute(RESULTS_QUERY):
            rowid, mkey, req, ikey, prompt, logits, logprobs, censored, choice, seconds, meta, rkey = row
            if req is None or mkey not in models or ikey not in inventories:
                self._first_sight(rowid, req, mkey, models, ikey, inventories)
            field = "request"
            try:
                request = requests.get(rkey)
                if request is None:
                    body = _loads(req)
                    raw = body["options"]
                    if raw == last[0]:
                        body["options"] = last[1]
                    request = Request.from_dict(body, inventories[ikey])
                    last = (raw, request.options)
                    problem = request_problem(request)
                    if problem:
                        raise StoreError(f"{self.db}: results row {rowid}: {problem}")
                    requests[rkey] = request
                field = "scores"
                # one parse for the four JSON columns (each is checked to be one JSON value below)
                lg, lp, cz, mt = _loads(f"[{logits},{logprobs},{censored},{meta}]")
                result = StoredResult(
                    model=models[mkey],
                    request=request,
                    prompt=prompt,
                    logits=tuple(map(float, lg)),
                    logprobs=tuple(map(float, lp)),
                    censored=tuple(map(bool, cz)),
                    choice=int(choice),
                    seconds=float(seconds),
                    meta=mt,
                )
            except (TypeError, ValueError, KeyError, AttributeError) as exc:
                what = f"malformed {field} ({type(exc).__name__}: {exc})"
                raise StoreError(f"{self.db}: results row {rowid}: {what}") from None
            problem = result_problem(result)
            if problem:
                raise StoreError(f"{self.db}: results row {rowid}: {problem}")
            append((mkey, ikey, result))
        return out

    def _first_sight(
        self,
        rowid: int,
        req: str | None,
        mkey: str,
        models: dict[str, dict[str, Any]],
        ikey: str,
        inventories: dict[str, tuple[Category, ...]],
    ) -> None:
        """Check a result row's links the first time its model or inventory is seen; read its inventory."""
        where = f"{self.db}: results row {rowid}"
        if req is None:
            raise StoreError(f"{where}: its request is missing from the requests table")
        if mkey not in models:
            raise StoreError(f"{where}: its model {mkey!r} is missing from the models table")
        if ikey not in inventories:
            row = self._db.execute("SELECT inventory FROM inventories WHERE inventory_key=?", (ikey,)).fetchone()
            if row is None:
                raise StoreError(f"{where}: its inventory {ikey!r} is missing from the inventories table")
            try:
                inventories[ikey] = tuple(Category(**c) for c in json.loads(row[0]))
            except (TypeError, ValueError) as exc:
                raise StoreError(f"{self.db}: inventories row {ikey!r}: malformed ({exc})") from None


def _loads(text: str) -> Any:
    """``json.loads`` through orjson (several times faster on the score columns); Python's parser for
    what orjson refuses but ``json.dumps`` writes (``NaN``, ``Infinity``), and for its error message."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
