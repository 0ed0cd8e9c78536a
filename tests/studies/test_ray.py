"""``pfr study --executor ray`` on a local, loopback-only Ray: a worker killed mid-study, a run
interrupted and resumed, a unit that fails on bad input, a straggler copied, a rerun that scores only
what is missing — and every report byte-identical to the one-process run's. The two-node test is in
test_ray_nodes.py."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pfr
from pfr import api

if os.environ.get("PFR_REQUIRE_RAY") != "1":
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'pfr[ray]'; make test installs it)")

HERE = Path(__file__).resolve().parent
SRC = str(Path(pfr.__file__).resolve().parents[1])  # the subprocesses import the pfr this test imported
MODEL = f"python:{HERE / 'ray_model.py'}:decide"


def write_study(folder: Path, data_dir: Path, *, replicas: int = 1, limit: int = 12) -> Path:
    """``baseline:random`` and the steerable ``python:`` model over two datasets × two designs."""
    path = folder / "study.toml"
    path.write_text(
        f'name = "ray"\ndata-dir = "{data_dir}"\nstore = "serial"\n'
        f'[[models]]\nmodel = "baseline:random"\n'
        f'[[models]]\nmodel = "{MODEL}"\nreplicas = {replicas}\n'
        f'[[datasets]]\ndataset = "trec"\nlimit = {limit}\n[[datasets]]\ndataset = "banking77"\nlimit = {limit}\n'
        '[[designs]]\nmembership = [false, true]\n[report]\nformat = ["text", "json"]\ndraws = 20\n',
        encoding="utf-8",
    )
    return path


def serial_reports(study: Path, flags: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    monkeypatch.setenv("PFR_RAY_TEST_DIR", str(flags))  # an empty folder: the model misbehaves nowhere
    api.study(study, progress=False)
    return {n: (study.parent / "serial" / n).read_bytes() for n in ("report.txt", "report.json")}


def start_pfr(*args: str, flags: Path, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PFR_RAY_TEST_DIR": str(flags), "PYTHONPATH": SRC, "NO_COLOR": "1"}
    cmd = [sys.executable, "-c", "from pfr.cli import main; main()", "study", *args, "--executor", "ray"]
    return subprocess.Popen(cmd, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for(path: Path, proc: subprocess.Popen[str], limit: float = 240) -> str:
    """The content of ``path`` once a process has written it (fails at once if ``proc`` ended)."""
    deadline = time.monotonic() + limit
    while not path.is_file() or not path.read_text():
        assert proc.poll() is None, f"pfr ended before {path.name} appeared: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)
    return path.read_text()


def results(store: Path) -> int:
    with sqlite3.connect(store / "results.sqlite") as db:
        return int(db.execute("SELECT count(*) FROM results").fetchone()[0])


def descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parents.items() if pp in tree} - tree
        grew = bool(more)
        tree |= more
    return tree


LOOPBACK = ("127.0.0.1", "::1", "::ffff:127.0.0.1")


def off_loopback_sockets(pids: set[int]) -> list[str]:
    """The TCP/UDP sockets of ``pids`` with a local or peer address other than 127.0.0.1/::1."""
    out = subprocess.run(["ss", "-tuanpH"], capture_output=True, text=True, check=True).stdout
    bad = []
    for line in out.splitlines():
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if not owners & pids:
            continue
        local, peer = (a.rsplit(":", 1)[0].strip("[]") for a in line.split()[4:6])
        if local not in LOOPBACK or peer not in (*LOOPBACK, "*", "0.0.0.0", "::"):
            bad.append(line)
    return bad


def test_a_killed_worker_loses_nothing_ray_stays_on_loopback_and_an_interrupted_run_resumes(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = write_study(tmp_path, data_dir)
    flags = tmp_path / "flags"
    flags.mkdir()
    serial = serial_reports(study, flags, monkeypatch)
    (flags / "block").touch()  # the first python-model worker writes its pid and blocks: mid-study
    texts = sorted({r.text_id for r in api.build("banking77", "main", api.Design(), data_dir=data_dir, limit=12)})
    (flags / "straggle").write_text(texts[0])  # ... and later one unit holds (one replica: no copy)
    args = (str(study), "--store", "ray", "--unit-texts", "4", "--no-progress")
    proc = start_pfr(*args, flags=flags, cwd=tmp_path)
    try:
        pid = int(wait_for(flags / "pid", proc))
        tree = descendants(proc.pid)
        assert pid in tree and len(tree) > 3  # the worker, the raylet, the GCS: all this run's
        assert off_loopback_sockets(tree) == []
        os.kill(pid, signal.SIGKILL)  # the actor restarts, its unit runs again ...
        wait_for(flags / "straggler", proc)  # ... and the study goes on until the held unit
        proc.send_signal(signal.SIGINT)  # Ctrl-C: what is scored stays
        _, err = proc.communicate(timeout=300)
    finally:
        (flags / "released").touch()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err

    proc = start_pfr(*args, flags=flags, cwd=tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    merged, units = map(int, re.search(r"(\d+) of (\d+) units already merged", out).groups())  # type: ignore[union-attr]
    assert 0 < merged < units and len(re.findall(r"shard \d+/\d+: \d+ scored", out)) == units - merged
    for name, data in serial.items():
        assert (tmp_path / "ray" / name).read_bytes() == data, name
    assert results(tmp_path / "ray") == results(tmp_path / "serial")  # nothing lost, nothing doubled


def test_a_bad_unit_fails_alone_a_straggler_is_copied_and_a_rerun_scores_only_the_rest(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = write_study(tmp_path, data_dir, replicas=2)
    flags = tmp_path / "flags"
    flags.mkdir()
    serial = serial_reports(study, flags, monkeypatch)
    texts = sorted({r.text_id for r in api.build("trec", "main", api.Design(), data_dir=data_dir, limit=12)})
    (flags / "fail").write_text(texts[0])
    (flags / "straggle").write_text(texts[1])
    args = (str(study), "--store", "ray", "--unit-texts", "4", "--no-progress", "--straggler", "1")
    proc = start_pfr(*args, flags=flags, cwd=tmp_path)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        (flags / "released").touch()
        if proc.poll() is None:
            proc.kill()
    assert (flags / "straggler").is_file()  # the straggler's first copy was held ...
    assert "copy of" in out  # ... a second one started, and its result was merged
    assert proc.returncode == 1, err
    line = err.strip().splitlines()[-1]
    failed = int(re.search(r"(\d+) of (\d+) units failed", line).group(1))  # type: ignore[union-attr]
    assert failed == line.count(f"bad input in text {texts[0]}") == 2  # its unit under each design
    assert len(re.findall(r"ray_model\.py:decide · trec/main · \w+ · shard \d+/\d+: ", line)) == failed
    assert "Traceback" not in err

    (flags / "fail").unlink()
    proc = start_pfr(*args, flags=flags, cwd=tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "units already merged" in out
    assert len(re.findall(r"shard \d+/\d+: \d+ scored", out)) == failed  # only the failed units ran again
    for name, data in serial.items():
        assert (tmp_path / "ray" / name).read_bytes() == data, name
    assert results(tmp_path / "ray") == results(tmp_path / "serial")
