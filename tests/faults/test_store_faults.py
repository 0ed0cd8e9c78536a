"""The store under stress: concurrent writers, damage on purpose, a full disk, a read-only mount.
Each ends with one clear line (exit 2 where it fails), nothing committed lost, nothing duplicated."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pfr import api
from pfr.run.store import DB_NAME

from .conftest import DATA, TOTAL, count, duplicates, pfr_command, remount, run_command


def _one_line_error(proc: subprocess.CompletedProcess[str], *names: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pfr: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def test_concurrent_writers_on_one_store(tmp_path: Path, slow_model: str, model_env: dict[str, str]) -> None:
    store = tmp_path / "store"
    cmds = [run_command(slow_model, store) for _ in range(3)]
    cmds.append(run_command(slow_model, store, "--options", "8"))  # another design into the same store
    procs = [subprocess.Popen(c, env=model_env, stderr=subprocess.PIPE, text=True) for c in cmds]
    outs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outs
    assert count(store) == 2 * TOTAL and duplicates(store) == 0
    again = subprocess.run(cmds[0], env=model_env, capture_output=True, text=True, check=True)
    assert f"{TOTAL} requests: 0 scored now, {TOTAL} already in" in again.stderr
    clean = tmp_path / "clean"
    subprocess.run(run_command(slow_model, clean), env=model_env, check=True, capture_output=True)
    subprocess.run(run_command(slow_model, clean, "--options", "8"), env=model_env, check=True, capture_output=True)
    assert api.metrics(store) == api.metrics(clean)


@pytest.fixture
def full_store(tmp_path: Path, slow_model: str, model_env: dict[str, str]) -> Path:
    store = tmp_path / "store"
    subprocess.run(run_command(slow_model, store), env={**model_env, "PFR_TEST_DELAY": "0"}, check=True,
                   capture_output=True)  # fmt: skip
    return store


def _damage_pages(db: Path) -> None:
    raw = bytearray(db.read_bytes())
    for start in range(4096, len(raw), 8192):
        raw[start : start + 512] = bytes(range(256)) * 2
    db.write_bytes(bytes(raw))


@pytest.mark.parametrize("damage", ["pages", "truncated", "not-sqlite", "header"])
def test_a_damaged_store_is_an_error_never_an_empty_report(
    full_store: Path, damage: str, slow_model: str, model_env: dict[str, str]
) -> None:
    db = full_store / DB_NAME
    with sqlite3.connect(db) as con:  # fold the WAL in, so the damage hits the only copy
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    if damage == "pages":
        _damage_pages(db)
    elif damage == "truncated":
        db.write_bytes(db.read_bytes()[: db.stat().st_size // 3])
    elif damage == "not-sqlite":
        db.write_bytes(b"these are not the results you are looking for\n" * 200)
    else:
        raw = bytearray(db.read_bytes())
        raw[16:24] = b"\xff" * 8  # page size and format bytes
        db.write_bytes(bytes(raw))
    for args in (("report", str(full_store)), ("export", str(full_store), "--out", "-"),
                 ("thresholds", "--dev", str(full_store), "--test", str(full_store))):  # fmt: skip
        proc = subprocess.run(pfr_command(*args), capture_output=True, text=True, env=model_env)
        _one_line_error(proc, str(full_store))
        assert proc.stdout == ""
    proc = subprocess.run(run_command(slow_model, full_store), capture_output=True, text=True, env=model_env)
    _one_line_error(proc, str(db))


def test_disk_full_keeps_what_was_committed_then_resumes(
    tmp_path: Path, tiny_fs: Callable[..., Path], slow_model: str, model_env: dict[str, str]
) -> None:
    fs = tiny_fs("160k")
    store = fs / "store"
    env = {**model_env, "PFR_TEST_DELAY": "0"}
    proc = subprocess.run(run_command(slow_model, store, limit=120), capture_output=True, text=True, env=env)
    line = _one_line_error(proc, str(store), "disk is full")
    assert "kept" in line
    kept = count(store)
    assert 0 < kept < 480
    report = subprocess.run(pfr_command("export", str(store), "--out", "-"), capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    assert len(report.stdout.splitlines()) == kept  # everything committed is readable

    # An output file on the full disk: one line, and no half-written file is left behind.
    out = fs / "requests.jsonl"
    built = subprocess.run(pfr_command("build", "-d", "trec", "--data-dir", str(DATA), "-o", str(out)),
                           capture_output=True, text=True)  # fmt: skip
    _one_line_error(built, str(out), "disk is full")
    assert not out.exists() and not [p for p in fs.iterdir() if p.name.endswith(".tmp")]

    remount(fs, "size=64m")
    done = subprocess.run(run_command(slow_model, store, limit=120), capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert f"480 requests: {480 - kept} scored now, {kept} already in" in done.stderr
    assert count(store) == 480 and duplicates(store) == 0
    clean = tmp_path / "clean"
    subprocess.run(run_command(slow_model, clean, limit=120), env=env, check=True, capture_output=True)
    assert api.metrics(store) == api.metrics(clean)


def test_read_only_store_opens_for_report_and_export(
    tmp_path: Path, tiny_fs: Callable[..., Path], full_store: Path, slow_model: str, model_env: dict[str, str]
) -> None:
    fs = tiny_fs("8m")
    store = fs / "store"
    shutil.copytree(full_store, store)
    expected = subprocess.run(pfr_command("report", str(full_store), "--format", "csv", "--draws", "100"),
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
    remount(fs, "ro")
    assert not any(p.name.endswith(("-shm", "-wal")) and p.stat().st_size for p in store.iterdir())
    report = subprocess.run(pfr_command("report", str(store), "--format", "csv", "--draws", "100"),
                            capture_output=True, text=True)  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert report.stdout.replace(str(store), "") == expected.replace(str(full_store), "")
    export = subprocess.run(pfr_command("export", str(store), "--out", "-"), capture_output=True, text=True)
    assert export.returncode == 0 and len(export.stdout.splitlines()) == TOTAL, export.stderr
    proc = subprocess.run(run_command(slow_model, store), capture_output=True, text=True, env=model_env)
    _one_line_error(proc, str(store))
    # Writing anything on the read-only filesystem: one line, exit 2, nothing created.
    out = fs / "requests.jsonl"
    built = subprocess.run(pfr_command("build", "-d", "demo", "-o", str(out)), capture_output=True, text=True)
    _one_line_error(built, str(out), "Read-only")
    fresh = subprocess.run(run_command(slow_model, fs / "new-store"), capture_output=True, text=True, env=model_env)
    _one_line_error(fresh, str(fs / "new-store"), "cannot create")
    assert sorted(p.name for p in fs.iterdir()) == ["store"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere; the read-only mount test covers root")
def test_unwritable_folders_by_permission(
    tmp_path: Path, full_store: Path, slow_model: str, model_env: dict[str, str]
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    store = locked / "store"
    shutil.copytree(full_store, store)
    locked.chmod(0o555)
    store.chmod(0o555)
    try:
        out = locked / "requests.jsonl"
        _one_line_error(
            subprocess.run(pfr_command("build", "-d", "demo", "-o", str(out)), capture_output=True, text=True), str(out)
        )
        _one_line_error(
            subprocess.run(run_command(slow_model, store), capture_output=True, text=True, env=model_env),
            str(store),
            "not writable",
        )
        report = subprocess.run(pfr_command("report", str(store), "--draws", "50"), capture_output=True, text=True)
        assert report.returncode == 0, report.stderr
    finally:
        store.chmod(0o755)
        locked.chmod(0o755)
