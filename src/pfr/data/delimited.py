"""Reading a user's CSV, TSV and JSONL records strictly, each error naming the line where the record starts.

A spreadsheet export is forgiving in ways that silently change a dataset: a row with an unquoted
comma has one field too many, and a reader that keeps going turns the rest of the text into a new
"label". These readers refuse such rows instead, and keep labels as the file writes them (the JSONL
label ``0`` is the label ``"0"``, ``1.50`` stays ``"1.50"``).
"""

from __future__ import annotations

import csv
import io
import json
import unicodedata
from collections.abc import Iterator, Sequence
from pathlib import Path

from pfr.errors import DataError


def clean_label(label: str) -> str:
    """A label or category id as compared: NFKC, white space collapsed and trimmed, case kept.

    Texts are compared in the same NFKC, white-space-collapsed form, so ``billing`` and ``billing ``
    (or a no-break space) are one category, while ``Billing`` stays another.
    """
    return " ".join(unicodedata.normalize("NFKC", label).split())


def delimiter_of(path: Path) -> str:
    """Tab for ``.tsv`` / ``.tab``, comma otherwise."""
    return "\t" if path.suffix.lower() in (".tsv", ".tab") else ","


def delimited_records(path: Path, text: str, needed: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """``(start line, {column: value})`` per record of a CSV/TSV ``text`` with a header line.

    Refused, naming the line: a header without a ``needed`` column or with a column twice, a record
    with more or fewer fields than the header (an unquoted delimiter, a lost quote), and anything the
    csv module cannot parse. Blank lines are skipped.
    """
    delim = delimiter_of(path)
    name = "tab" if delim == "\t" else "comma"
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delim, strict=True)
    start = 1
    try:
        header = next(reader, None)
        while header == []:
            start = reader.line_num + 1
            header = next(reader, None)
        if header is None:
            raise DataError(f"{path}: no header line (expected columns {', '.join(needed)})")
        for col in needed:
            if col not in header:
                cols = ", ".join(repr(h) for h in header) or "none"
                raise DataError(f"{path}: line {start}: missing column {col!r} (columns: {cols})")
        twice = sorted({h for h in header if header.count(h) > 1 and h in needed})
        if twice:
            raise DataError(f"{path}: line {start}: column {twice[0]!r} appears twice in the header")
        while True:
            start = reader.line_num + 1
            row = next(reader, None)
            if row is None:
                return
            if row == []:
                continue
            if len(row) != len(header):
                more = len(row) > len(header)
                hint = (
                    f"an unquoted {name} inside a field? put the field in double quotes"
                    if more
                    else "a missing field or an unclosed double quote?"
                )
                raise DataError(f"{path}: line {start}: {len(row)} fields where the header has {len(header)} ({hint})")
            yield start, dict(zip(header, row))
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            raise DataError(f"{path}: line {start}: a double quote opened in this record is never closed") from None
        raise DataError(f"{path}: line {start}: not valid {'TSV' if delim == chr(9) else 'CSV'} ({exc})") from None


def json_field(value: object, where: str, field: str) -> str:
    """A JSON field as text: a string as is, a number as written; ``null`` is empty; anything else refused."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, NumberText):
        return str(value)
    raise DataError(f"{where}: field {field!r} must be a text or a number, got {json.dumps(value)[:40]}")


class NumberText(str):
    """A JSON number kept as the text the file writes (``0``, ``1.50``, ``2e3``)."""


def jsonl_records(path: Path, text: str) -> Iterator[tuple[int, dict[str, object]]]:
    """``(line, object)`` per non-blank line of a JSONL ``text``; numbers stay :class:`NumberText`."""
    for n, line in enumerate(text.split("\n"), start=1):  # not splitlines(): U+2028 may sit inside a string
        if not line.strip():
            continue
        try:
            rec = json.loads(line, parse_int=NumberText, parse_float=NumberText, parse_constant=NumberText)
        except (json.JSONDecodeError, RecursionError) as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise DataError(f"{path}: line {n}: not valid JSON ({msg})") from None
        if not isinstance(rec, dict):
            raise DataError(f"{path}: line {n}: expected a JSON object")
        yield n, rec
