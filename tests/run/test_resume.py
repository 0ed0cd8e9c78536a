"""kill -9 at any moment, then the same command again: nothing lost, nothing duplicated,
the same report as an uninterrupted run, and a complete store costs no model calls."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from pfr import api
from pfr.run.store import DB_NAME

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


def _cmd(model: str, store: Path) -> list[str]:
    code = "from pfr.cli import main; main()"
    return [
        sys.executable, "-c", code, "run", "--model", model, "--dataset", "trec",
        "--data-dir", str(DATA), "--limit", "30", "--store", str(store), "--batch-size", "4", "--no-progress",
    ]  # fmt: skip


def _count(store: Path) -> int:
    db = store / DB_NAME
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return int(con.execute("SELECT COUNT(*) FROM results").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def test_kill_9_then_resume_matches_uninterrupted(tmp_path: Path, slow_model: str) -> None:
    total = 30 * 4
    env = {**os.environ, "PFR_TEST_CALL_LOG": str(tmp_path / "calls.log"), "PFR_TEST_DELAY": "0.02"}
    killed = tmp_path / "killed"
    kills = 0
    for threshold in (8, 40, 90):  # kill at three different points of the run
        proc = subprocess.Popen(_cmd(slow_model, killed), env=env, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while _count(killed) < threshold and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
        assert _count(killed) <= total
    assert kills >= 2, "the run finished before it could be killed; raise PFR_TEST_DELAY"
    done = subprocess.run(_cmd(slow_model, killed), env=env, capture_output=True, text=True, check=True)
    assert "already in" in done.stderr
    assert _count(killed) == total
    with sqlite3.connect(killed / DB_NAME) as con:
        dupes = con.execute(
            "SELECT COUNT(*) FROM (SELECT model_key, request_key FROM results GROUP BY 1, 2 HAVING COUNT(*) > 1)"
        ).fetchone()[0]
    assert dupes == 0

    clean = tmp_path / "clean"
    subprocess.run(_cmd(slow_model, clean), env={**env, "PFR_TEST_DELAY": "0"}, check=True, capture_output=True)
    assert api.metrics(killed) == api.metrics(clean)

    # A run that finds everything in the store makes no model calls.
    log = tmp_path / "calls.log"
    before = log.read_text().count("\n")
    again = subprocess.run(_cmd(slow_model, killed), env=env, capture_output=True, text=True, check=True)
    assert log.read_text().count("\n") == before
    assert f"{total} requests: 0 scored now, {total} already in" in again.stderr
