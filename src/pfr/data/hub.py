"""User data through the Hugging Face ``datasets`` library: ``--dataset hf:NAME[:CONFIG] --split S``.

``NAME`` is one of

* a folder written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk`` (it holds
  ``dataset_dict.json``, or ``state.json`` and ``dataset_info.json``): read with
  ``datasets.load_from_disk``, the split picked out of a ``DatasetDict``;
* any other local folder (CSV, Parquet or JSONL files, split by file name as ``datasets`` does):
  read with ``datasets.load_dataset(FOLDER, split=S)``;
* a Hub id such as ``SetFit/emotion``: ``datasets.load_dataset(NAME, CONFIG, split=S)``, which
  downloads it once (or reads the ``datasets`` cache when offline).

A path is taken as local when it exists or starts with ``/``, ``.`` or ``~``; ``:CONFIG`` is the
text after the last colon (a Hub configuration; a saved folder has none). Without ``--split`` a
dataset with exactly one split uses it; with several, the error lists them.

The text and label columns are :class:`~pfr.data.user.UserFormat`'s ``text_col`` and
``label_col`` (``--text-col``, ``--label-col``); a ``ClassLabel`` label column gives its names, not
its integers. The rows then take the path of a user file (:func:`pfr.data.user.rows_to_examples` and
``check_labels``, ``--descriptions``, and the panels' duplicate and conflicting-label rules), so
the split behaves as a CSV file with the same rows in the same order would.

Identity: the dataset is named ``hf:NAME[:CONFIG]/SPLIT@HASH``, with ``NAME`` the Hub id, or the
folder's own name (not its full path) for a local folder, and ``HASH`` the first 8 hex digits of
sha256 over the text and label column names and then every row's text and label (after the
``ClassLabel`` mapping) in order. Like a user file's ``STEM@HASH`` it follows the content, not the
place: the same rows loaded twice, or moved to another folder, are the same dataset; changing one
label or text makes another one. Text ids and hash ranks are keyed on this name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pfr.data.types import Dataset
from pfr.data.user import UserFormat, user_dataset
from pfr.errors import DataError

PREFIX = "hf:"
INSTALL_HINT = "pip install 'pfr[hub]'"


def is_hub_name(name: str) -> bool:
    """Whether ``--dataset`` names a ``datasets`` dataset (``hf:NAME[:CONFIG]``)."""
    return name.startswith(PREFIX)


def parse(name: str) -> tuple[str, str | None]:
    """``hf:NAME[:CONFIG]`` → (NAME, CONFIG or None)."""
    rest = name[len(PREFIX) :]
    if not rest:
        raise DataError(f"{name!r}: give a dataset after hf: (a Hub id or a folder), e.g. hf:SetFit/emotion")
    if ":" in rest and not Path(rest).expanduser().exists():
        target, _, config = rest.rpartition(":")
        if target and config:
            return target, config
    return rest, None


def _is_local(target: str) -> bool:
    return Path(target).expanduser().exists() or target.startswith(("/", ".", "~"))


def resolve(name: str, base: Path) -> str:
    """``name`` with a relative local folder made absolute against ``base`` (a study file's folder)."""
    target, config = parse(name)
    p = Path(target).expanduser()
    if p.is_absolute() or not (target.startswith(".") or (base / p).exists()):
        return name
    folder = os.path.normpath(base / p)
    return f"{PREFIX}{folder}" + (f":{config}" if config else "")


def _spec(target: str, config: str | None) -> str:
    return f"{PREFIX}{target}" + (f":{config}" if config else "")


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise DataError(
            f"hf: datasets need the Hugging Face datasets library: {INSTALL_HINT} (or pip install datasets)"
        ) from None
    return datasets


@contextlib.contextmanager
def _quiet(ds_lib: Any) -> Iterator[None]:
    """No progress bars or warnings from ``datasets``: an error stays one line on stderr."""
    bars_were_on = not ds_lib.utils.are_progress_bars_disabled()
    verbosity = ds_lib.utils.logging.get_verbosity()
    ds_lib.utils.disable_progress_bars()
    ds_lib.utils.logging.set_verbosity_error()
    try:
        yield
    finally:
        ds_lib.utils.logging.set_verbosity(verbosity)
        if bars_were_on:
            ds_lib.utils.enable_progress_bars()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("…" if len(text) > 300 else "")


def _load_error(spec: str, exc: BaseException, local: bool) -> DataError:
    """A ``datasets`` exception as one line naming the dataset."""
    ds_lib = _datasets()
    msg = _one_line(exc)
    if isinstance(exc, ConnectionError) or "OfflineModeIsEnabled" in msg:
        return DataError(
            f"{spec}: not in the local datasets cache and the Hugging Face Hub cannot be reached ({msg}); "
            "download it once with internet, or save it to a local folder (Dataset.save_to_disk, or "
            "CSV/Parquet files) and pass hf:FOLDER"
        )
    if isinstance(exc, ds_lib.exceptions.DatasetNotFoundError):
        return DataError(f"{spec}: no such dataset on the Hugging Face Hub, or it is private or gated ({msg})")
    if "config" in msg.lower() and isinstance(exc, ValueError):
        return DataError(f"{spec}: configuration: {msg} (pass hf:NAME:CONFIG)")
    if isinstance(exc, FileNotFoundError) and local:
        return DataError(f"{spec}: no CSV, Parquet or JSONL data files in the folder ({msg})")
    return DataError(f"{spec}: cannot load the dataset ({type(exc).__name__}: {msg})")


_LOAD_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError, KeyError, TypeError, RuntimeError)


def _pick_split(spec: str, split: str | None, available: Sequence[str]) -> str:
    names = ", ".join(repr(s) for s in available) or "none"
    if split is None:
        if len(available) == 1:
            return available[0]
        raise DataError(f"{spec}: the dataset has {len(available)} splits ({names}); choose one with --split")
    if split not in available:
        raise DataError(f"{spec}: unknown split {split!r} (--split; available splits: {names})")
    return split


def _saved_kind(folder: Path) -> str | None:
    """``dict`` or ``dataset`` for a ``save_to_disk`` folder, else None."""
    if (folder / "dataset_dict.json").is_file():
        return "dict"
    if (folder / "state.json").is_file() and (folder / "dataset_info.json").is_file():
        return "dataset"
    return None


def open_split(name: str, split: str | None) -> tuple[Any, str, str]:
    """The ``datasets.Dataset`` of one split of ``hf:NAME[:CONFIG]``, the split's name, and where it is."""
    ds_lib = _datasets()
    target, config = parse(name)
    spec = _spec(target, config)
    local = _is_local(target)
    with _quiet(ds_lib):
        if local:
            folder = Path(target).expanduser()
            if not folder.exists():
                raise DataError(f"{spec}: folder not found")
            if not folder.is_dir():
                raise DataError(f"{spec}: is a file, not a folder; pass it as --dataset {target} (without hf:)")
            kind = _saved_kind(folder)
            if kind is not None:
                if config:
                    raise DataError(f"{spec}: a folder saved with save_to_disk has no configurations; drop :{config}")
                try:
                    saved = ds_lib.load_from_disk(str(folder))
                except _LOAD_ERRORS as exc:
                    raise _load_error(spec, exc, local) from None
                if isinstance(saved, ds_lib.DatasetDict):
                    chosen = _pick_split(spec, split, list(saved))
                    return saved[chosen], chosen, str(folder)
                own = str(saved.split) if saved.split is not None else "all"
                return saved, _pick_split(spec, split, [own]), str(folder)
        try:
            available = list(ds_lib.get_dataset_split_names(target, config))
        except _LOAD_ERRORS as exc:
            raise _load_error(spec, exc, local) from None
        chosen = _pick_split(spec, split, available)
        try:
            data = ds_lib.load_dataset(target, config, split=chosen)
        except _LOAD_ERRORS as exc:
            raise _load_error(spec, exc, local) from None
        return data, chosen, str(folder) if local else f"huggingface.co/datasets/{target}"


def _column(data: Any, spec: str, split: str, col: str, flag: str) -> list[Any]:
    cols = list(data.column_names)
    if col not in cols:
        raise DataError(
            f"{spec} (split {split!r}): missing column {col!r} ({flag}; columns: {', '.join(cols) or 'none'})"
        )
    return list(data[col])


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def read_rows(
    name: str, split: str | None, text_col: str, label_col: str
) -> tuple[list[tuple[str, str, str]], str, str, str]:
    """The (where, text, label) rows of one split, its identity name, the split's name and its source."""
    ds_lib = _datasets()
    data, chosen, source = open_split(name, split)
    target, config = parse(name)
    spec = _spec(target, config)
    texts = _column(data, spec, chosen, text_col, "--text-col")
    labels = _column(data, spec, chosen, label_col, "--label-col")
    feature = data.features.get(label_col)
    where = f"{spec} (split {chosen!r})"
    if isinstance(feature, ds_lib.ClassLabel):
        names = feature.names
        mapped = []
        for i, v in enumerate(labels):
            if v is None or v < 0:
                mapped.append("")  # -1 is datasets' "no label" (e.g. GLUE test splits): an empty label
            elif v >= len(names):
                raise DataError(f"{where}: row {i + 1}: label {v} is outside the ClassLabel's {len(names)} names")
            else:
                mapped.append(feature.int2str(int(v)))
        labels = mapped
    rows = []
    digest = hashlib.sha256(json.dumps([text_col, label_col]).encode())
    for i, (t, lab) in enumerate(zip(texts, labels)):
        if isinstance(lab, (list, dict)):
            raise DataError(f"{where}: row {i + 1}: column {label_col!r} holds {type(lab).__name__}s; one label each")
        text, label = _cell(t), _cell(lab)
        digest.update(json.dumps([text, label], ensure_ascii=False).encode() + b"\n")
        rows.append((f"{where}: row {i + 1}", text, label))
    shown = Path(target).expanduser().resolve().name if _is_local(target) else target
    identity = f"{_spec(shown, config)}/{chosen}@{digest.hexdigest()[:8]}"
    return rows, identity, chosen, source


def load(name: str, fmt: UserFormat = UserFormat(), identity: str | None = None) -> Dataset:
    """One split of ``hf:NAME[:CONFIG]`` (``fmt.split``) as a user dataset; ``identity`` overrides its name."""
    rows, ident, split, source = read_rows(name, fmt.split, fmt.text_col, fmt.label_col)
    target, config = parse(name)
    where = f"{_spec(target, config)} (split {split!r})"
    return user_dataset(identity or fmt.name or ident, split, rows, fmt, where, source)
