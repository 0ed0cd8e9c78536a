"""Read datasets into :class:`~pfr.data.types.Dataset` objects.

Built-in datasets (``clinc150``, ``banking77``, ``trec``) read their original release files
(see :mod:`pfr.data.sources`); ``demo`` is a small original help-desk set bundled with the
package; ``hf:NAME[:CONFIG]`` is read through the Hugging Face ``datasets`` library (see
:mod:`pfr.data.hub`); any other name is taken as a path to a user file (CSV, JSONL or Parquet).
Every malformed record raises a :class:`~pfr.errors.DataError` that names the file and line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pfr.data.sources import SOURCES, data_dir, fetch_dataset
from pfr.data.types import Category, Dataset
from pfr.data.user import (
    UserFormat,
    check_labels,
    id_to_description,
    load_user_file,
    read_csv_rows,
    read_text,
    rows_to_examples,
)
from pfr.errors import DataError

__all__ = ["BUILTIN", "DEMO", "UserFormat", "available", "load_dataset", "load_user_file", "read_text"]

DEMO = "demo"


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
        splits[split] = rows_to_examples("clinc150", split, rows)
    intents = sorted({ex.y for ex in splits["train"]})
    inventory = tuple(Category(i, id_to_description(i)) for i in intents)
    ds = Dataset("clinc150", inventory, splits, source=str(path.parent))
    check_labels(ds, str(path))
    return ds


def _load_banking(root: Path | None) -> Dataset:
    files = fetch_dataset("banking77", root)
    cats = json.loads(files["categories.json"].read_text(encoding="utf-8"))
    inventory = tuple(Category(c, id_to_description(c)) for c in sorted(cats))
    splits = {
        split: rows_to_examples("banking77", split, read_csv_rows(files[f"{split}.csv"], "text", "category"))
        for split in ("train", "test")
    }
    ds = Dataset("banking77", inventory, splits, source=str(files["test.csv"].parent))
    check_labels(ds, str(files["test.csv"].parent))
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
        "train": rows_to_examples("trec", "train", _read_trec(files["train_5500.label"])),
        "test": rows_to_examples("trec", "test", _read_trec(files["TREC_10.label"])),
    }
    coarse = tuple(Category(label, defs[label]) for label in sorted(defs) if ":" not in label)
    ds = Dataset("trec", inventory, splits, source=str(files["TREC_10.label"].parent), parents=coarse)
    check_labels(ds, str(files["TREC_10.label"].parent))
    return ds


def _load_demo(fmt: UserFormat = UserFormat()) -> Dataset:
    base = resources.files("pfr.data").joinpath("demo")
    with resources.as_file(base) as folder:
        demo_fmt = UserFormat("text", "label", str(Path(folder) / "categories.csv"),
                              dev_fraction=fmt.dev_fraction, dev_seed=fmt.dev_seed)  # fmt: skip
        return load_user_file(Path(folder) / "requests.csv", demo_fmt, name=DEMO)


#: built-in dataset → its reader (from the data folder ``root``, or the default one when ``None``)
_READERS: dict[str, Callable[[Path | None], Dataset]] = {"clinc150": _load_clinc, "banking77": _load_banking,
                                                         "trec": _load_trec}  # fmt: skip
BUILTIN = tuple(_READERS)


@lru_cache(maxsize=16)
def _load_cached(name: str, root: str | None, fmt: UserFormat) -> Dataset:
    if name in _READERS:
        return _READERS[name](Path(root) if root else None)
    if name == DEMO:
        return _load_demo(fmt)
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
