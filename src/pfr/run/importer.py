"""``pfr import``: scored requests from a file (a ``pfr export`` file, :mod:`pfr.run.export`) into a store.

A long run can be committed in parts and resumed on another machine: export the store, import the
file into a store there, and ``pfr run`` scores only what is missing (the model identity and the
request's content key are the same, so a restored result counts as done). ``pfr report`` on the
restored store equals ``pfr report`` on the original.

The export format (``--from pfr``) is one JSON object per scored request, in the store's order: the
request's fields, ``prompt``, ``scores`` (normalised log-probabilities), ``logits``, ``censored``,
``choice``, ``model`` (the identity), ``seconds``, ``meta`` and ``inventory_key``; the first row of
each inventory also carries ``inventory`` as ``[[id, description, parent], ...]`` (an inventory is
written once, not on each of the thousands of rows that share it). Other formats are readers
registered in :data:`READERS` under the name ``--from`` takes.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pfr.data.types import Category
from pfr.design.types import Request
from pfr.errors import DataError
from pfr.run.records import Imported, ScoredRow
from pfr.run.records import RowError as _RowError
from pfr.run.store import Store, model_key, request_key, request_problem

#: rows per store transaction while importing
BATCH = 500


@dataclass(frozen=True)
class ImportSummary:
    """What an import did: rows read, results added, results the store already had."""

    rows: int
    added: int
    present: int
    models: int


# ------------------------------------------------------------------------------------------ import
def _floats(row: dict[str, Any], name: str, n: int) -> tuple[float, ...]:
    value = row.get(name)
    if not isinstance(value, list) or len(value) != n:
        raise _RowError(f"{name}: need a list of {n} numbers (one per option)")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        raise _RowError(f"{name}: need numbers")
    out = tuple(float(x) for x in value)
    if name == "scores" and not all(math.isfinite(x) and x <= 0 for x in out):
        raise _RowError("scores: need finite log-probabilities (≤ 0)")
    return out


def _json_rows(
    lines: Iterator[tuple[int, str]], read: Callable[[Any], Imported]
) -> Iterator[tuple[int, Imported]]:
    """Each line parsed as JSON and read by ``read``; an error names the line."""
    for n, line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _RowError(f"line {n}: not JSON ({exc.msg})") from None
        try:
            yield n, read(row)
        except _RowError as exc:
            raise _RowError(f"line {n}: {exc}") from None


def _pfr_rows(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, Imported]]:
    """Rows of a ``pfr export`` file (the format in the module docstring)."""
    inventories: dict[str, tuple[Category, ...]] = {}
    return _json_rows(lines, lambda row: _pfr_row(row, inventories))


def _pfr_row(row: Any, inventories: dict[str, tuple[Category, ...]]) -> Imported:
    if not isinstance(row, dict):
        raise _RowError("not a JSON object")
    for name in ("model", "inventory_key", "options", "choice", "seconds"):
        if name not in row:
            hint = " (a file from an older pfr export: export the store again)" if name == "inventory_key" else ""
            raise _RowError(f"missing field {name!r}{hint}")
    key = row["inventory_key"]
    if "inventory" in row:
        cats = row["inventory"]
        try:
            inventories[str(key)] = tuple(Category(str(c[0]), str(c[1]), c[2]) for c in cats)
        except (TypeError, IndexError, KeyError):
            raise _RowError("inventory: need [[id, description, parent], ...]") from None
    if key not in inventories:
        raise _RowError(f"inventory_key: {key!r} is not defined on this or an earlier line")
    if not isinstance(row["model"], dict) or not row["model"]:
        raise _RowError("model: need the model identity (a JSON object)")
    try:
        request = Request.from_dict(row, inventories[key])
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise _RowError(f"not a pfr request ({type(exc).__name__}: {exc})") from None
    problem = request_problem(request)
    if problem:
        raise _RowError(problem)
    k = len(request.options)
    censored = row.get("censored")
    if not isinstance(censored, list) or len(censored) != k or not all(isinstance(c, bool) for c in censored):
        raise _RowError(f"censored: need a list of {k} true/false values")
    choice, seconds, meta, prompt = row["choice"], row["seconds"], row.get("meta", {}), row.get("prompt")
    if isinstance(choice, bool) or not isinstance(choice, int) or not 0 <= choice < k:
        raise _RowError(f"choice: need an option index 0..{k - 1}")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise _RowError("seconds: need a non-negative number")
    if not isinstance(meta, dict):
        raise _RowError("meta: need a JSON object")
    if prompt is not None and not isinstance(prompt, str):
        raise _RowError("prompt: need a string or null")
    return Imported(row["model"], request, prompt, _floats(row, "logits", k), _floats(row, "scores", k),
                    tuple(censored), choice, float(seconds), meta)  # fmt: skip


def _lmeval_rows(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, Imported]]:
    """Rows of an lm-eval ``--log_samples`` file (``samples_<task>_<date>.jsonl``) of an exported task."""
    from pfr.run.lmeval import lmeval_row  # loaded on use

    return _json_rows(lines, lmeval_row)


#: ``--from`` formats: a reader turns (line number, line) pairs into scored requests
READERS: dict[str, Callable[[Iterator[tuple[int, str]]], Iterator[tuple[int, Imported]]]] = {
    "pfr": _pfr_rows,
    "lm-eval": _lmeval_rows,
}


def read_scored(path: str | os.PathLike[str], fmt: str = "pfr") -> list[Imported]:
    """Every scored request of a file, checked row by row before anything is stored."""
    if fmt not in READERS:
        raise DataError(f"--from {fmt}: unknown format (known: {', '.join(sorted(READERS))})")
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: file not found")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    lines = ((n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip())
    try:
        return [item for _, item in READERS[fmt](lines)]
    except _RowError as exc:
        raise DataError(f"{p}: {exc}") from None


def import_scored(path: str | os.PathLike[str], store: str | os.PathLike[str], fmt: str = "pfr") -> ImportSummary:
    """Restore the scored requests of ``path`` into ``store`` (created if missing), in file order.

    A malformed file stores nothing. A result the store already holds (same model, same request
    content) is kept as it is, so importing a file twice changes nothing."""
    items = read_scored(path, fmt)
    added = present = 0
    models: set[str] = set()
    with Store(store) as st:
        i = 0
        while i < len(items):
            mkey = model_key(items[i].model)
            j = i
            while j < len(items) and j - i < BATCH and model_key(items[j].model) == mkey:
                j += 1
            if mkey not in models:
                st.add_model(items[i].model)
                models.add(mkey)
            chunk = [(request_key(x.request, x.prompt), x) for x in items[i:j]]
            done = st.done(mkey, (k for k, _ in chunk))
            fresh = [ScoredRow(k, x.request, x.prompt, x.logits, x.logprobs, x.censored, x.choice, x.seconds, x.meta)
                     for k, x in chunk if k not in done]  # fmt: skip
            st.add_results(mkey, fresh)
            added += len(fresh)
            present += len(chunk) - len(fresh)
            i = j
    return ImportSummary(len(items), added, present, len(models))
