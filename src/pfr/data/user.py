"""User data files (CSV, JSONL, Parquet) and the checks every user dataset gets.

Shared by ``--dataset FILE`` (:mod:`pfr.data.loaders`) and ``hf:`` datasets (:mod:`pfr.data.hub`),
so both read, name and check rows the same way. Every malformed record raises a
:class:`~pfr.errors.DataError` that names the file and line.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pfr.data import panels as _panels
from pfr.data.delimited import clean_label, delimited_records, json_field, jsonl_records
from pfr.data.types import Category, Dataset, Example
from pfr.errors import DataError


@dataclass(frozen=True)
class UserFormat:
    """How to read a user's data: its column names, optional descriptions file, encoding and split."""

    text_col: str = "text"
    label_col: str = "label"
    descriptions: str | None = None
    encoding: str = "utf-8"  # of the data and descriptions files; a UTF-8 byte-order mark is always accepted
    split: str | None = None  # of an ``hf:`` dataset (--split); None: its only split
    dev_fraction: float | None = None  # --dev-fraction: this share of texts is the development panel
    dev_seed: int = 0  # … chosen by this hash seed (pfr.data.devsplit)
    name: str | None = None  # --dataset-name: a declared name instead of STEM@HASH (pairs two files)


def read_text(path: Path, encoding: str = "utf-8") -> str:
    """The whole of a user's text file, decoded; a bad byte is an error naming the line.

    UTF-8 (the default) accepts a leading byte-order mark, as Excel writes in "CSV UTF-8" files.
    """
    try:
        codec = codecs.lookup(encoding)
    except LookupError:
        raise DataError(f"unknown encoding {encoding!r} (--encoding takes a Python codec name, e.g. latin-1)") from None
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    name = "utf-8-sig" if codec.name == "utf-8" else codec.name
    try:
        return data.decode(name)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        hint = (
            "it looks like UTF-16: pass --encoding utf-16"
            if data[:2] in (b"\xff\xfe", b"\xfe\xff")
            else ("pass --encoding with the file's encoding, e.g. --encoding latin-1 or cp1252")
        )
        raise DataError(
            f"{path}: line {line}: not valid {encoding} (byte 0x{data[exc.start]:02x} at column {col}); {hint}"
        ) from None


def id_to_description(cid: str) -> str:
    return cid.replace("_", " ")


def rows_to_examples(
    dataset: str, split: str, rows: Iterable[tuple[str, str, str]], known: tuple[set[str], str] | None = None
) -> tuple[Example, ...]:
    """Build examples from (where, text, label) rows; ``where`` names the file and line for errors.

    ``known`` (label set, where it comes from) rejects an unknown label at its own line.
    """
    out = []
    for i, (where, text, raw_label) in enumerate(rows):
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{where}: empty text")
        label = clean_label(raw_label) if isinstance(raw_label, str) else ""
        if not label:
            raise DataError(f"{where}: empty label")
        if not label.isprintable():
            raise DataError(f"{where}: label {label!r} holds a control character (a binary file?)")
        if known is not None and label not in known[0]:
            raise DataError(
                f"{where}: unknown label {label!r}, not one of the {len(known[0])} categories in {known[1]}"
            )
        out.append(
            Example(
                text_id=_panels.text_id(dataset, text),
                text=text,
                y=label,
                split=split,
                source_index=i,
                where=where,
            )
        )
    return tuple(out)


def check_labels(dataset: Dataset, where: str) -> None:
    ids = set(dataset.category_ids)
    for split, examples in dataset.splits.items():
        for ex in examples:
            if ex.y not in ids:
                raise DataError(
                    f"{where} ({split}, record {ex.source_index + 1}): unknown label {ex.y!r}, "
                    f"not in the inventory of {len(ids)} categories"
                )


def read_csv_rows(
    path: Path, text_col: str, label_col: str, encoding: str = "utf-8"
) -> Iterator[tuple[str, str, str]]:
    for line, row in delimited_records(path, read_text(path, encoding), (text_col, label_col)):
        yield f"{path}: line {line}", row[text_col], row[label_col]




def _read_jsonl_rows(
    path: Path, text_col: str, label_col: str, encoding: str = "utf-8"
) -> Iterator[tuple[str, str, str]]:
    for n, rec in jsonl_records(path, read_text(path, encoding)):
        where = f"{path}: line {n}"
        for col in (text_col, label_col):
            if col not in rec:
                raise DataError(f"{where}: missing field {col!r}")
        yield where, json_field(rec[text_col], where, text_col), json_field(rec[label_col], where, label_col)


def _read_parquet_rows(path: Path, text_col: str, label_col: str) -> Iterator[tuple[str, str, str]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise DataError(f"{path}: not a readable Parquet file ({exc})") from None
    for col in (text_col, label_col):
        if col not in table.column_names:
            raise DataError(f"{path}: missing column {col!r} (columns: {', '.join(table.column_names)})")
    texts = table.column(text_col).to_pylist()
    labels = table.column(label_col).to_pylist()
    for i, (t, lab) in enumerate(zip(texts, labels)):
        yield f"{path}: row {i + 1}", "" if t is None else str(t), "" if lab is None else str(lab)


def _read_rows(path: Path, text_col: str, label_col: str, encoding: str = "utf-8") -> Iterator[tuple[str, str, str]]:
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv", ".tab"):
        return read_csv_rows(path, text_col, label_col, encoding)
    if suffix in (".jsonl", ".ndjson"):
        return _read_jsonl_rows(path, text_col, label_col, encoding)
    if suffix in (".parquet", ".pq"):
        return _read_parquet_rows(path, text_col, label_col)
    raise DataError(f"{path}: unsupported file type {suffix!r} (use .csv, .tsv, .jsonl or .parquet)")


def read_descriptions(path: Path, encoding: str = "utf-8") -> tuple[Category, ...]:
    """Category descriptions from CSV (``id,description[,parent]``), JSONL or a JSON object."""
    if not path.is_file():
        raise DataError(f"{path}: descriptions file not found")
    cats: list[Category] = []
    if path.suffix.lower() == ".json":
        try:
            raw = json.loads(read_text(path, encoding))
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(raw, dict):
            raise DataError(f"{path}: expected a JSON object mapping category id to description")
        for k, v in raw.items():
            if not isinstance(v, str) or not clean_label(k) or not v.strip():
                raise DataError(f"{path}: category {k!r}: the description must be a non-empty text")
            cats.append(Category(clean_label(k), v.strip()))
    elif path.suffix.lower() in (".jsonl", ".ndjson"):
        for where, cid, desc in _read_jsonl_rows(path, "id", "description", encoding):
            if not clean_label(cid) or not desc.strip():
                raise DataError(f"{where}: empty id or description")
            cats.append(Category(clean_label(cid), desc.strip()))
    else:
        for line, row in delimited_records(path, read_text(path, encoding), ("id", "description")):
            cid, desc = clean_label(row["id"]), row["description"].strip()
            if not cid or not desc:
                raise DataError(f"{path}: line {line}: empty id or description")
            cats.append(Category(cid, desc, clean_label(row.get("parent") or "") or None))
    seen: set[str] = set()
    for c in cats:
        if c.id in seen:
            raise DataError(f"{path}: category {c.id!r} is listed twice")
        seen.add(c.id)
    return tuple(sorted(cats, key=lambda c: c.id))


def user_dataset_name(path: Path, fmt: UserFormat = UserFormat()) -> str:
    """``STEM@HASH``: a user dataset is identified by its content, shown by its name.

    The hash (8 hex digits of sha256) covers the file's bytes and how it is read (text and label
    columns, encoding), so two different files called ``tickets.csv`` are two datasets, and a
    renamed but unchanged file is the same one. Text ids and hash ranks are keyed on this name.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    digest = hashlib.sha256(data)
    digest.update(f"\0{fmt.text_col}\0{fmt.label_col}\0{codecs.lookup(fmt.encoding).name}".encode())
    return f"{path.stem}@{digest.hexdigest()[:8]}"


def load_user_file(path: Path, fmt: UserFormat = UserFormat(), name: str | None = None) -> Dataset:
    """A user's dataset: one split ``all`` in file order, inventory from the descriptions or labels."""
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    name = name or fmt.name
    if name is None:
        try:
            codecs.lookup(fmt.encoding)
        except LookupError:
            raise DataError(f"unknown encoding {fmt.encoding!r} (--encoding takes a Python codec name)") from None
        name = user_dataset_name(path, fmt)
    rows = _read_rows(path, fmt.text_col, fmt.label_col, fmt.encoding)
    return user_dataset(name, "all", rows, fmt, str(path), str(path))


def user_dataset(
    name: str, split: str, rows: Iterable[tuple[str, str, str]], fmt: UserFormat, where: str, source: str
) -> Dataset:
    """A user's rows as a one-split dataset: inventory from ``fmt.descriptions`` or the labels.

    Shared by user files and ``hf:`` datasets (:mod:`pfr.data.hub`), so both check the same way.
    """
    inventory: tuple[Category, ...] | None = None
    known: tuple[set[str], str] | None = None
    if fmt.descriptions:
        inventory = read_descriptions(Path(fmt.descriptions), fmt.encoding)
        known = ({c.id for c in inventory}, fmt.descriptions)
    examples = rows_to_examples(name, split, rows, known)
    if not examples:
        raise DataError(f"{where}: no records")
    if inventory is None:
        inventory = tuple(Category(c, id_to_description(c)) for c in sorted({ex.y for ex in examples}))
    ds = Dataset(name, inventory, {split: examples}, source=source)
    check_labels(ds, where)
    if fmt.dev_fraction is not None:
        from pfr.data.devsplit import split_development

        ds = split_development(ds, fmt.dev_fraction, fmt.dev_seed)
    return ds
