"""Merge results stores into one: shard stores of a batch array, a cluster's unit stores.

A result is keyed by model and request (:mod:`pfr.run.records`), so merging is a union: the same
result met twice is kept once, and the merged store reads back as the one run that scored
everything would have (the report depends on the results, not on the order they were stored in).
What a union would get wrong is refused before anything is written, one line naming it:

* two different scores for one model × request key (the runs were not the same model);
* one model × dataset × panel × design × text × assignment × definition scored from two different
  requests, or one setting read with two category inventories (a data file or the descriptions
  were edited between shards: the store would keep only the later ones, silently);
* among the stores merged, one model (by name) scoring one setting under two identities (an option
  or a version differed between shards: the report would show two partial models).

Everything is written in one transaction: a refused or interrupted merge leaves the destination
as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pfr.errors import StoreError
from pfr.models.scores import model_label
from pfr.run.store import DB_NAME, Store

#: (model key, dataset, panel, design): one setting of one model
Setting = tuple[str, str, str, str]
#: a setting and (text id, assignment, definition): one scored cell
Cell = tuple[str, str, str, str, str, str, str]

_LATEST_CELLS = (
    "SELECT r.model_key, q.dataset, q.panel, q.design, json_extract(q.request, '$.text_id'), "
    "json_extract(q.request, '$.assignment'), json_extract(q.request, '$.definition'), r.request_key, "
    "q.inventory_key, MAX(r.rowid) FROM results r JOIN requests q ON q.request_key = r.request_key "
    "GROUP BY 1, 2, 3, 4, 5, 6, 7"
)
_SCORES = ("logits", "logprobs", "censored", "choice")


@dataclass(frozen=True)
class MergeSummary:
    """What one merge did: results read from the sources, added to ``dest``, and already there."""

    dest: Path
    sources: int
    read: int
    added: int
    duplicates: int
    seconds: float


@dataclass(frozen=True)
class _Source:
    """What the checks read of a source: its models and its latest result per cell (no scores, no
    prompts); its rows are streamed into the destination one source at a time."""

    path: Path
    models: list[tuple[Any, ...]]
    latest: list[tuple[Any, ...]]
    results: int


def merge_stores(dest: str | os.PathLike[str], sources: Sequence[str | os.PathLike[str]]) -> MergeSummary:
    """Merge the results of ``sources`` (store folders) into ``dest`` (created if missing); idempotent.

    Each source's results are added in their stored order; a result ``dest`` already holds with the
    same scores is skipped. Refuses (:class:`~pfr.errors.StoreError`, ``dest`` unchanged) two
    different scores for one request key, two requests for one cell, two inventories for one
    setting, and one model name under two identities on one setting among the sources (module
    docstring). The write is one transaction; the sources are streamed through it one at a time, so
    memory does not grow with their number.
    """
    t0 = time.perf_counter()
    dest = Path(dest)
    paths = [Path(s) for s in sources]
    if not paths:
        raise StoreError("pfr merge: no store to merge")
    for p in paths:
        if p.resolve() == dest.resolve():
            raise StoreError(f"{p}: is the destination store itself; merge other stores into it")
    read = [_read(p) for p in paths]
    _check_identities(read)
    fresh = not (dest / DB_NAME).exists()
    with Store(dest):  # creates dest (and its tables) or checks the existing one
        pass
    try:
        added = _transaction(dest, read)
    except BaseException:
        if fresh:  # a refused merge into a new store leaves no empty store behind
            for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"):
                (dest / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                dest.rmdir()
        raise
    total = sum(s.results for s in read)
    return MergeSummary(dest, len(read), total, added, total - added, time.perf_counter() - t0)


def _transaction(dest: Path, read: Sequence[_Source]) -> int:
    con = sqlite3.connect(dest / DB_NAME, timeout=60, isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
        try:
            added = _write(con, dest, read)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise StoreError(f"{dest / DB_NAME}: cannot merge into the store ({exc}); it is left as it was") from None
    finally:
        con.close()
    return added


def _read(path: Path) -> _Source:
    """The models and latest cells of the store at ``path`` (checked by opening it as a :class:`Store`)."""
    with Store(path, create=False) as st:
        db = st._db
        try:
            return _Source(
                path,
                list(db.execute("SELECT model_key, identity, created FROM models")),
                list(db.execute(_LATEST_CELLS)),
                int(db.execute("SELECT COUNT(*) FROM results").fetchone()[0]),
            )
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{st.db}: cannot read the store ({exc})") from None


def _check_identities(read: Sequence[_Source]) -> None:
    """One model name under two identities on one setting, among the sources: refused."""
    seen: dict[tuple[str, str, str, str], tuple[str, dict[str, Any], Path]] = {}
    for src in read:
        identities = {k: json.loads(v) for k, v, _ in src.models}
        for mkey, dataset, panel, design, *_ in src.latest:
            ident = identities.get(mkey, {})
            label = model_label(ident)
            hit = seen.setdefault((label, dataset, panel, design), (mkey, ident, src.path))
            if hit[0] != mkey:
                differ = sorted(k for k in {*ident, *hit[1]} if ident.get(k) != hit[1].get(k))
                raise StoreError(
                    f"{src.path} and {hit[2]} score {label} on {dataset}/{panel}/{design} under two identities "
                    f"(they differ in {', '.join(differ) or 'their keys'}); shards of one run must score one model"
                )


def _write(con: sqlite3.Connection, dest: Path, read: Sequence[_Source]) -> int:
    """Add every source to the open transaction on ``con``; the number of results added."""
    labels = {k: model_label(json.loads(v)) for k, v in con.execute("SELECT model_key, identity FROM models")}
    cells: dict[Cell, tuple[str, str]] = {}
    settings: dict[Setting, tuple[str, str]] = {}
    for row in con.execute(_LATEST_CELLS):
        cells[row[:7]] = (row[7], str(dest))
        settings[row[:4]] = (row[8], str(dest))
    con.execute("CREATE TEMP TABLE incoming(model_key TEXT, request_key TEXT, logits TEXT, logprobs TEXT, "
                "censored TEXT, choice INTEGER, seconds REAL, meta TEXT, created REAL)")  # fmt: skip
    # which source added a result in this merge (none: it was in dest before), to name both sides of a clash
    con.execute("CREATE TEMP TABLE origin(model_key TEXT, request_key TEXT, src INTEGER, "
                "PRIMARY KEY(model_key, request_key))")  # fmt: skip
    differ = " OR ".join(f"d.{c} != n.{c}" for c in _SCORES)
    added = 0
    for i, src in enumerate(read):
        labels.update({k: model_label(json.loads(v)) for k, v, _ in src.models})
        _check_cells(src, labels, cells, settings)
        with Store(src.path, create=False, check=False) as st:
            db = st._db
            con.execute("DELETE FROM incoming")
            con.executemany("INSERT INTO incoming VALUES(?,?,?,?,?,?,?,?,?)",
                            db.execute("SELECT * FROM results ORDER BY rowid"))  # fmt: skip
            clash = con.execute(
                "SELECT n.model_key, n.request_key, o.src FROM incoming n JOIN results d USING(model_key, request_key) "
                f"LEFT JOIN origin o USING(model_key, request_key) WHERE {differ} LIMIT 1"
            ).fetchone()
            if clash is not None:
                mkey, rkey, other = clash
                q = db.execute("SELECT request_id, dataset, panel, design FROM requests WHERE request_key = ?",
                               (rkey,)).fetchone()  # fmt: skip
                what = f"request {q[0]} ({q[1]}/{q[2]}/{q[3]})" if q else "a request"
                there = str(dest) if other is None else str(read[other].path)
                raise StoreError(
                    f"{src.path}: {what} of {labels.get(mkey, mkey)} has other scores than in {there} (model key "
                    f"{mkey}, request key {rkey}); nothing merged"
                )
            con.execute(
                f"INSERT OR IGNORE INTO origin SELECT model_key, request_key, {i} FROM incoming n WHERE NOT EXISTS "
                "(SELECT 1 FROM results d WHERE d.model_key = n.model_key AND d.request_key = n.request_key)"
            )
            con.executemany("INSERT OR IGNORE INTO models VALUES(?,?,?)", src.models)
            con.executemany("INSERT OR IGNORE INTO inventories VALUES(?,?)", db.execute("SELECT * FROM inventories"))
            con.executemany("INSERT OR IGNORE INTO requests VALUES(?,?,?,?,?,?,?,?)",
                            db.execute("SELECT * FROM requests"))  # fmt: skip
            before = con.total_changes
            con.execute("INSERT OR IGNORE INTO results SELECT * FROM incoming ORDER BY rowid")
            added += con.total_changes - before
    return added


def _check_cells(
    src: _Source, labels: dict[str, str], cells: dict[Cell, tuple[str, str]], settings: dict[Setting, tuple[str, str]]
) -> None:
    """A cell scored from two requests, or a setting under two inventories, across stores: refused."""
    for row in src.latest:
        where = f"{labels.get(row[0], row[0])} on {row[1]}/{row[2]}/{row[3]}"
        got = cells.setdefault(row[:7], (row[7], str(src.path)))
        if got[0] != row[7]:
            raise StoreError(
                f"{src.path}: text {row[4]} ({row[5]}/{row[6]}) of {where} was scored from another request in "
                f"{got[1]} (request key {row[7]} vs {got[0]}: the data or design differ); nothing merged"
            )
        inv = settings.setdefault(row[:4], (row[8], str(src.path)))
        if inv[0] != row[8]:
            raise StoreError(
                f"{src.path}: {where} uses another category inventory than {inv[1]} (descriptions or data "
                "edited between runs); nothing merged"
            )
