"""Where a model's weights are, and the identity fields that name them.

``hf:`` and ``vllm:`` specs resolve here (a preset, a ``.gguf`` file, a model folder, a folder plus
``gguf_file=``, a hub id): :func:`resolve` returns what to load and its identity fields. Local
weights are named by their content (:func:`~pfr.data.hashing.file_sha256` for a file,
:func:`~pfr.data.hashing.folder_sha256` for a folder), so other weights never share stored results;
a hub model is named by its id and revision.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pfr.data.hashing import file_sha256, folder_sha256
from pfr.errors import ModelError
from pfr.models.lm.gguf_cache import PRESETS, GGUFSource, ensure_converted, source_meta

__all__ = ["Loaded", "file_sha256", "first_line", "folder_sha256", "resolve", "safetensors_params", "weights_folder"]


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message``: a library's error in one line."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


@dataclass(frozen=True)
class Loaded:
    """What a spec resolved to: where the weights are, and the identity fields that name them."""

    load_from: str
    name: str
    source: dict[str, str]
    revision: str | None = None
    hub: bool = False

    def named(self, preset: str | None, commit: str | None = None) -> dict[str, Any]:
        """The ``name`` and ``source`` a backend records: the preset's name if one was asked for, and a hub
        model's revision (the ``commit`` really loaded when the engine says, else the one asked for)."""
        source: dict[str, Any] = dict(self.source)
        if self.hub:
            source["revision"] = commit or self.revision or "main"
        return {"name": preset or self.name, "source": source}


def resolve(rest: str, opts: Mapping[str, str]) -> Loaded:
    """Spec remainder (``preset:NAME``, a path, a hub id) → the folder or hub id to load, its display
    name and its weight identity; GGUF files are converted once to a dense folder (:mod:`pfr.models.lm.gguf_cache`)."""
    if rest.startswith("preset:"):
        preset = rest.removeprefix("preset:")
        if preset not in PRESETS:
            raise ModelError(f"unknown hf preset {preset!r} (known: {', '.join(PRESETS)})")
        return _from_gguf(PRESETS[preset]())
    gguf_file = opts.get("gguf_file")
    path = Path(rest).expanduser()
    if path.exists():
        if path.is_file():
            if path.suffix != ".gguf":
                raise ModelError(f"{path}: a model file must be a .gguf (or give the model folder)")
            return _from_gguf(GGUFSource(path.name, path.resolve(), file_sha256(path)))
        if gguf_file:
            file = path / gguf_file
            if not file.is_file():
                raise ModelError(f"{file}: GGUF file not found (model option gguf_file)")
            return _from_gguf(GGUFSource(file.name, file.resolve(), file_sha256(file)))
        if not (path / "config.json").is_file():
            raise ModelError(f"{path}: not a transformers model folder (no config.json; for a GGUF give gguf_file=)")
        folder = path.resolve()
        return Loaded(str(folder), folder.name, {"model": folder.name, "dir_sha256": folder_sha256(folder)})
    if rest.startswith(("/", ".", "~")) or rest.endswith(".gguf") or rest.count("/") > 1:
        raise ModelError(f"{rest}: no such model file or folder")
    if not rest:
        raise ModelError("hf model spec needs a hub id or a path: hf:ID_OR_PATH")
    revision = opts.get("revision")
    if gguf_file:
        try:
            from huggingface_hub import hf_hub_download

            local = Path(hf_hub_download(rest, gguf_file, revision=revision))
        except Exception as exc:  # hub errors have many types; all mean "cannot get this file"
            raise ModelError(f"hf:{rest}: cannot fetch {gguf_file} ({first_line(exc)})") from None
        src = GGUFSource(f"{rest.replace('/', '--')}--{gguf_file}", local, file_sha256(local))
        loaded = _from_gguf(src)
        return Loaded(loaded.load_from, rest, {"model": rest, "gguf_file": gguf_file, "file_sha256": src.sha256})
    return Loaded(rest, rest, {"model": rest}, revision, hub=True)


def _from_gguf(src: GGUFSource) -> Loaded:
    folder = ensure_converted(src)
    source = {"model": src.path.name, "file_sha256": src.sha256}
    if (source_meta(folder) or {}).get("add_bos_token"):
        # plain prompts start with BOS, as the file asks; copies made by earlier pfr versions added none,
        # so their scores differ and the stores made with them are not resumed
        source["bos"] = "on"
    return Loaded(str(folder), src.name, source)


def safetensors_params(folder: Path) -> int | None:
    """Parameters stored in a folder's ``*.safetensors`` files, from their headers (no tensor is read)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for f in files:
        with f.open("rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        for key, info in header.items():
            if key != "__metadata__":
                count = 1
                for d in info["shape"]:
                    count *= int(d)
                total += count
    return total


def weights_folder(load_from: str, revision: str | None) -> Path | None:
    """The local folder holding the weights of a folder path or a hub id already in the hub cache."""
    path = Path(load_from)
    if path.is_dir():
        return path
    try:  # a hub id: the engine downloaded it into the hub cache already
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(load_from, revision=revision, local_files_only=True))
    except Exception:  # not in the cache (another loader, a mirror): no count rather than no model
        return None
