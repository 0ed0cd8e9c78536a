"""Shared parts of the fault-injection suite: a slow, real user model that logs its calls, the
``pfr run`` command line, store inspection through plain SQLite, and tiny real filesystems."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pfr.run.store import DB_NAME

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()

TEXTS = 30  # TREC main panel texts per run in this suite
TOTAL = 4 * TEXTS


def pfr_command(*args: str) -> list[str]:
    return [sys.executable, "-c", "from pfr.cli import main; main()", *args]


def run_command(model: str, store: Path, *extra: str, limit: int = TEXTS) -> list[str]:
    return pfr_command(
        "run", "--model", model, "--dataset", "trec", "--data-dir", str(DATA), "--limit", str(limit),
        "--store", str(store), "--batch-size", "4", "--no-progress", *extra,
    )  # fmt: skip


def count(store: Path) -> int:
    """Committed results, read with plain SQLite (0 while the store does not exist yet)."""
    db = store / DB_NAME
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return int(con.execute("SELECT COUNT(*) FROM results").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def duplicates(store: Path) -> int:
    with sqlite3.connect(store / DB_NAME) as con:
        n = con.execute(
            "SELECT COUNT(*) FROM (SELECT model_key, request_key FROM results GROUP BY 1, 2 HAVING COUNT(*) > 1)"
        ).fetchone()[0]
    con.close()
    return int(n)


def wait_until(pred: Callable[[], bool], proc: subprocess.Popen[bytes] | None = None, timeout: float = 120) -> bool:
    """Poll ``pred`` until it holds, ``proc`` exits or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        if proc is not None and proc.poll() is not None:
            return pred()
        time.sleep(0.01)
    return False


@pytest.fixture
def model_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PFR_TEST_CALL_LOG": str(tmp_path / "calls.log"), "PFR_TEST_DELAY": "0.02",
            "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}  # fmt: skip


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``tiny_fs(size="256k")`` mounts a real tmpfs of that size and returns its folder; it is
    unmounted afterwards. Skips (with the reason) where the machine refuses to mount."""
    mounted: list[Path] = []

    def make(size: str = "256k") -> Path:
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        proc = _mount("-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(where))
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or 'mount failed'}); needs root")
        mounted.append(where)
        return where

    yield make
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def remount(where: Path, options: str) -> None:
    proc = _mount("-o", f"remount,{options}", str(where))
    assert proc.returncode == 0, proc.stderr
