"""File and folder hashes (the one sha256 helper every layer uses) and the user cache folder that keeps them.

Downloads are verified with :func:`sha256_file`; model weights are named by :func:`file_sha256`
(cached per path, modification time and size, so a 1 GB model is hashed once, not on every load)
and :func:`folder_sha256` (one hash over the names and contents of a model folder's files).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

_MEMO: dict[tuple[str, int, int], str] = {}


def cache_dir() -> Path:
    """The user cache for downloads and converted model weights."""
    value = os.environ.get("PFR_CACHE_DIR")
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pfr"


def sha256_file(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _index() -> Path:
    return cache_dir() / "sha256.json"


def file_sha256(path: Path) -> str:
    """:func:`sha256_file`, computed once per (path, mtime, size) and kept in the user cache's
    ``sha256.json``; a changed file (new mtime or size) is hashed again."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key in _MEMO:
        return _MEMO[key]
    index = _index()
    entry = f"{key[0]}|{key[1]}|{key[2]}"
    try:
        known: dict[str, str] = json.loads(index.read_text())
    except (OSError, ValueError):
        known = {}
    digest = known.get(entry)
    if digest is None:
        digest = sha256_file(path)
        known[entry] = digest
        try:
            index.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".sha256.", dir=index.parent)
            with os.fdopen(fd, "w") as f:
                json.dump(known, f)
            os.replace(tmp, index)
        except OSError:
            pass  # a read-only cache only costs a re-hash next time
    _MEMO[key] = digest
    return digest


def folder_sha256(path: Path) -> str:
    """One sha256 over ``relative name\\0file sha256\\n`` of every file of a folder (sorted, hidden
    files and folders skipped), or over the one file when ``path`` is a file."""
    path = Path(path)
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        rel = f.name if f == path else f.relative_to(path).as_posix()
        if any(part.startswith(".") for part in Path(rel).parts):
            continue
        digest.update(f"{rel}\0{file_sha256(f)}\n".encode())
    return digest.hexdigest()
