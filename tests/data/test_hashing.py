"""The one sha256 helper: plain, cached per (path, mtime, size) in the user cache, and over a folder."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from pfr.data import hashing


def test_cached_hash_equals_the_plain_one_and_follows_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PFR_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom(3 << 20))  # three 1 MiB blocks
    want = hashlib.sha256(f.read_bytes()).hexdigest()
    assert hashing.sha256_file(f) == hashing.file_sha256(f) == want
    assert want in (tmp_path / "cache" / "sha256.json").read_text()
    with f.open("r+b") as fh:  # same size, new content and mtime: hashed again
        fh.seek(100)
        byte = fh.read(1)
        fh.seek(100)
        fh.write(bytes([byte[0] ^ 0xFF]))
    assert hashing.file_sha256(f) == hashlib.sha256(f.read_bytes()).hexdigest() != want


def test_folder_hash_covers_names_and_contents_not_hidden_files(tmp_path: Path) -> None:
    d = tmp_path / "model"
    (d / "sub").mkdir(parents=True)
    (d / "config.json").write_text("{}")
    (d / "sub" / "w.bin").write_bytes(b"\0" * 10)
    first = hashing.folder_sha256(d)
    (d / ".cache").mkdir()
    (d / ".cache" / "lock").write_text("x")
    assert hashing.folder_sha256(d) == first  # hidden files are not part of the weights
    (d / "sub" / "w.bin").rename(d / "sub" / "v.bin")
    assert hashing.folder_sha256(d) != first  # a renamed file is another folder
    one = hashing.folder_sha256(d / "config.json")
    line = f"config.json\0{hashlib.sha256(b'{}').hexdigest()}\n".encode()
    assert one == hashlib.sha256(line).hexdigest()
