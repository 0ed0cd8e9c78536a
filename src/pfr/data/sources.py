"""Where the original benchmark files come from, and how they reach the user's disk.

A file is looked up first in the data folder (``--data-dir`` or ``PFR_DATA_DIR``), laid out as
``<dir>/<dataset>/<file>``; then in the user cache (``PFR_CACHE_DIR`` or ``~/.cache/pfr``). If it is
in neither, it is downloaded once from its canonical public location into the cache, and its
sha256 is checked before it is kept. Nothing is downloaded when the file is already there.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pfr.data.hashing import cache_dir, sha256_file
from pfr.errors import DataError

_CLINC = "https://raw.githubusercontent.com/clinc/oos-eval/828f8093932c8fe6ca7936c3d2e52903b1c523de/data"
_BANKING = (
    "https://raw.githubusercontent.com/PolyAI-LDN/task-specific-datasets/"
    "57ec275d8078af65b7731c2a98be812d844a6d6b/banking_data"
)
_TREC = "https://cogcomp.seas.upenn.edu/Data/QA/QC"
_TREC_MIRROR = "https://raw.githubusercontent.com/tstuessi/question-type/6bd36de659b7c5059b1f9bf90d5eb9ad4d15b027/data"


@dataclass(frozen=True)
class SourceFile:
    """One original file: its name in the data folder, checksum and download locations."""

    dataset: str
    name: str
    sha256: str
    urls: tuple[str, ...]

    @property
    def relpath(self) -> str:
        return f"{self.dataset}/{self.name}"


SOURCES: dict[str, tuple[SourceFile, ...]] = {
    "clinc150": (
        SourceFile(
            "clinc150",
            "data_full.json",
            "36923c3705a59e08fe9c3883d8bc2dd966ef93e22cb78ac41171782a698d56e0",
            (f"{_CLINC}/data_full.json",),
        ),
    ),
    "banking77": (
        SourceFile(
            "banking77",
            "train.csv",
            "b06e26ac675513959a63135f11b94ea7786ed02da65db93a5650d8838cbc664b",
            (f"{_BANKING}/train.csv",),
        ),
        SourceFile(
            "banking77",
            "test.csv",
            "d12d6e3bc4c3103966ae786dc435913c0c563dfa328f5a3646d0e62cfeeb474d",
            (f"{_BANKING}/test.csv",),
        ),
        SourceFile(
            "banking77",
            "categories.json",
            "53261da888122daf2d120d925458631d9619e15d82e56052e7a42e535ce32b63",
            (f"{_BANKING}/categories.json",),
        ),
    ),
    "trec": (
        SourceFile(
            "trec",
            "train_5500.label",
            "9e4c8bdcaffb96ed61041bd64b564183d52793a8e91d84fc3a8646885f466ec3",
            (f"{_TREC}/train_5500.label", f"{_TREC_MIRROR}/train_5500.label.txt"),
        ),
        SourceFile(
            "trec",
            "TREC_10.label",
            "033f22c028c2bbba9ca682f68ffe204dc1aa6e1cf35dd6207f2d4ca67f0d0e8e",
            (f"{_TREC}/TREC_10.label", f"{_TREC_MIRROR}/test_TREC_10.label.txt"),
        ),
    ),
}


def data_dir(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The user's data folder: the explicit argument, else ``PFR_DATA_DIR``, else none."""
    value = explicit if explicit is not None else os.environ.get("PFR_DATA_DIR")
    return Path(value).expanduser() if value else None


def locate(src: SourceFile, data_root: Path | None) -> Path | None:
    """The local copy of ``src`` if there is one (data folder first, then cache)."""
    for root in (data_root, cache_dir() / "data"):
        if root is not None and (root / src.relpath).is_file():
            path = root / src.relpath
            digest = sha256_file(path)
            if digest != src.sha256:
                raise DataError(
                    f"{path}: sha256 {digest[:12]}… does not match the original release ({src.sha256[:12]}…); "
                    "replace the file with the original or delete it to download it again"
                )
            return path
    return None


def fetch(
    src: SourceFile,
    data_root: Path | None = None,
    *,
    urls: Sequence[str] | None = None,
    timeout: float = 60.0,
) -> Path:
    """Return a local path to ``src``, downloading it into the cache if needed.

    The download goes to a temporary file beside its destination and is renamed into place only
    after its sha256 matches, so an interrupted or corrupt download never leaves a file behind.
    """
    found = locate(src, data_root)
    if found is not None:
        return found
    import httpx  # only when something has to be downloaded

    dest = cache_dir() / "data" / src.relpath
    dest.parent.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    for url in urls if urls is not None else src.urls:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{src.name}.", suffix=".part", dir=dest.parent)
        tmp = Path(tmp_name)
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "wb") as out, httpx.stream("GET", url, timeout=timeout, follow_redirects=True) as resp:
                if resp.status_code != 200:
                    errors.append(f"{url}: HTTP {resp.status_code}")
                    continue
                for chunk in resp.iter_bytes():
                    h.update(chunk)
                    out.write(chunk)
            digest = h.hexdigest()
            if digest != src.sha256:
                errors.append(f"{url}: sha256 {digest[:12]}… does not match the expected {src.sha256[:12]}…")
                continue
            os.replace(tmp, dest)
            return dest
        except httpx.HTTPError as exc:
            errors.append(f"{url}: {type(exc).__name__}: {exc}")
        finally:
            tmp.unlink(missing_ok=True)
    raise DataError(
        f"could not obtain {src.relpath}: not in the data folder ({data_root or 'none set'}) or the cache, "
        f"and the download failed ({'; '.join(errors)}); pass --data-dir or set PFR_DATA_DIR"
    )


def fetch_dataset(name: str, data_root: Path | None = None) -> dict[str, Path]:
    """Local paths of all original files of a built-in dataset, by file name."""
    return {src.name: fetch(src, data_root) for src in SOURCES[name]}
