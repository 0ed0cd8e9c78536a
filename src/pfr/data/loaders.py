"""Read datasets into :class:`~pfr.data.types.Dataset` objects.

Built-in datasets (``clinc150``, ``banking77``, ``trec``) read their original release files
(see :mod:`pfr.data.sources`); ``demo`` is a small original help-desk set bundled with the
package; ``hf:NAME[:CONFIG]`` is read through the Hugging Face ``datasets`` library (see
:mod:`pfr.data.hub`); any other name is taken as a path to a user file (CSV, JSONL or Parquet).
Every malformed record raises a :class:`~pfr.errors.DataError` that names the file and line.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pfr.data import panels as _panels
from pfr.data.delimited import clean_label, delimited_records, json_field, jsonl_records
from pfr.data.sources import SOURCES, data_dir, fetch_dataset
from pfr.data.types import Category, Dataset, Example
from pfr.errors import DataError

BUILTIN = ("clinc150", "banking77", "trec")
DEMO = "demo"


@dataclass(frozen=True)
class UserFormat:
    """How to read a user's data: its column names, optional descriptions file, encoding and split."""

    text_col: str = "text"
    label_col: str = "label"
    descriptions: str | None = None
    encoding: str = "utf-8"  # of the data and descriptions files; a UTF-8 byte-order mark is always accepted
    split: str | None = None  # of an ``hf:`` dataset (--split); None: its only split


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


def _id_to_description(cid: str) -> str:
    return cid.replace("_", " ")


def _examples(
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


def _check_labels(dataset: Dataset, where: str) -> None:
    ids = set(dataset.category_ids)
    for split, examples in dataset.splits.items():
        for ex in examples:
            if ex.y not in ids:
                raise DataError(
                    f"{where} ({split}, record {ex.source_index + 1}): unknown label {ex.y!r}, "
                    f"not in the inventory of {len(ids)} categories"
                )


# --- built-in datasets -------------------------------------------------------------------------


def _load_clinc(root: Path | None) -> Dataset:
    path = fetch_dataset("clinc150", root)["data_full.json"]
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    splits = {}
    for split in ("train", "val", "test"):
        if split not in raw:
            raise DataError(f"{path}: missing key {split!r}")
        rows = (
            (f"{path} [{split}][{i}]", rec[0], rec[1]) for i, rec in enumerate(raw[split])
        )  # out-of-scope items live under oos_* keys and are excluded everywhere
        splits[split] = _examples("clinc150", split, rows)
    intents = sorted({ex.y for ex in splits["train"]})
    inventory = tuple(Category(i, _id_to_description(i)) for i in intents)
    ds = Dataset("clinc150", inventory, splits, source=str(path.parent))
    _check_labels(ds, str(path))
    return ds


def _read_csv_rows(
    path: Path, text_col: str, label_col: str, encoding: str = "utf-8"
) -> Iterator[tuple[str, str, str]]:
    for line, row in delimited_records(path, read_text(path, encoding), (text_col, label_col)):
        yield f"{path}: line {line}", row[text_col], row[label_col]


def _load_banking(root: Path | None) -> Dataset:
    files = fetch_dataset("banking77", root)
    cats = json.loads(files["categories.json"].read_text(encoding="utf-8"))
    inventory = tuple(Category(c, _id_to_description(c)) for c in sorted(cats))
    splits = {
        split: _examples("banking77", split, _read_csv_rows(files[f"{split}.csv"], "text", "category"))
        for split in ("train", "test")
    }
    ds = Dataset("banking77", inventory, splits, source=str(files["test.csv"].parent))
    _check_labels(ds, str(files["test.csv"].parent))
    return ds


def trec_definitions() -> dict[str, str]:
    """The dataset authors' class definitions, keyed by the label strings of the data files."""
    text = resources.files("pfr.data").joinpath("trec_question_classes.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t", 1) for line in text.splitlines()[1:] if line.strip()]
    return {label: definition for label, definition in rows}


def _read_trec(path: Path) -> Iterator[tuple[str, str, str]]:
    # The original train file has one 0xF0 byte (line 66): read as latin-1, never strict UTF-8.
    with path.open(encoding="latin-1", newline="\n") as f:
        for n, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            label, _, text = line.partition(" ")
            if ":" not in label:
                raise DataError(f"{path}: line {n}: expected 'COARSE:fine question', got {line[:40]!r}")
            yield f"{path}: line {n}", text, label


def _load_trec(root: Path | None) -> Dataset:
    files = fetch_dataset("trec", root)
    defs = trec_definitions()
    inventory = tuple(
        Category(label, defs[label], parent=label.split(":", 1)[0]) for label in sorted(defs) if ":" in label
    )
    splits = {
        "train": _examples("trec", "train", _read_trec(files["train_5500.label"])),
        "test": _examples("trec", "test", _read_trec(files["TREC_10.label"])),
    }
    coarse = tuple(Category(label, defs[label]) for label in sorted(defs) if ":" not in label)
    ds = Dataset("trec", inventory, splits, source=str(files["TREC_10.label"].parent), parents=coarse)
    _check_labels(ds, str(files["TREC_10.label"].parent))
    return ds


# --- user files ----------------------------------------------------------------------------------


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
        return _read_csv_rows(path, text_col, label_col, encoding)
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
    examples = _examples(name, split, rows, known)
    if not examples:
        raise DataError(f"{where}: no records")
    if inventory is None:
        inventory = tuple(Category(c, _id_to_description(c)) for c in sorted({ex.y for ex in examples}))
    ds = Dataset(name, inventory, {split: examples}, source=source)
    _check_labels(ds, where)
    return ds


def _load_demo() -> Dataset:
    base = resources.files("pfr.data").joinpath("demo")
    with resources.as_file(base) as folder:
        return load_user_file(
            Path(folder) / "requests.csv",
            UserFormat("text", "label", str(Path(folder) / "categories.csv")),
            name=DEMO,
        )


@lru_cache(maxsize=16)
def _load_cached(name: str, root: str | None, fmt: UserFormat) -> Dataset:
    root_path = Path(root) if root else None
    if name == "clinc150":
        return _load_clinc(root_path)
    if name == "banking77":
        return _load_banking(root_path)
    if name == "trec":
        return _load_trec(root_path)
    if name == DEMO:
        return _load_demo()
    if name.startswith("hf:"):
        from pfr.data import hub

        return hub.load(name, fmt)
    path = Path(name).expanduser()
    if path.suffix or os.sep in name:
        return load_user_file(path, fmt)
    raise DataError(
        f"unknown dataset {name!r}: use one of {', '.join((*BUILTIN, DEMO))}, "
        "a path to a .csv, .jsonl or .parquet file, or hf:NAME[:CONFIG] (a Hugging Face dataset or folder)"
    )


def load_dataset(name: str, data_root: str | os.PathLike[str] | None = None, fmt: UserFormat | None = None) -> Dataset:
    """Load a built-in dataset, the bundled demo, a user file (by path) or ``hf:NAME[:CONFIG]``."""
    root = data_dir(data_root)
    return _load_cached(name, str(root) if root else None, fmt or UserFormat())


def available(data_root: str | os.PathLike[str] | None = None) -> list[dict[str, str]]:
    """What ``pfr datasets`` lists: each dataset and where its files are (or would be fetched from)."""
    from pfr.data.sources import locate

    root = data_dir(data_root)
    out = []
    for name in BUILTIN:
        where: list[str] = []
        for src in SOURCES[name]:
            try:
                found = locate(src, root)
            except DataError as exc:
                found, where = None, [*where, f"{src.name}: {exc}"]
                continue
            where.append(str(found) if found else f"{src.name}: not local, downloads from {src.urls[0]}")
        out.append({"name": name, "files": "; ".join(where)})
    out.append({"name": DEMO, "files": "bundled with the package (original help-desk requests)"})
    return out
