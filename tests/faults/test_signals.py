"""SIGINT and SIGKILL at random points of a run, then the same command: one clear line, exit 130
for SIGINT, nothing committed lost, nothing duplicated, and the same report as an uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
from pathlib import Path

from pfr import api

from .conftest import TOTAL, count, duplicates, run_command, wait_until


def test_sigint_exits_130_and_keeps_what_was_committed(
    tmp_path: Path, slow_model: str, model_env: dict[str, str]
) -> None:
    store = tmp_path / "store"
    # 0.1 s per request (12 s in all): the signal lands mid-run even when a loaded machine delays this poll
    slow = {**model_env, "PFR_TEST_DELAY": "0.1"}
    proc = subprocess.Popen(run_command(slow_model, store), env=slow, stderr=subprocess.PIPE)
    assert wait_until(lambda: count(store) >= 12, proc), "no results were committed"
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    stderr = err.decode()
    assert proc.returncode == 130, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0] and "Traceback" not in stderr, stderr
    kept = count(store)
    assert 12 <= kept < TOTAL
    assert count(store) == kept  # nothing changes after the exit
    quick = {**model_env, "PFR_TEST_DELAY": "0"}
    done = subprocess.run(run_command(slow_model, store), env=quick, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"{TOTAL} requests: {TOTAL - kept} scored now, {kept} already in" in done.stderr
    assert count(store) == TOTAL and duplicates(store) == 0


def test_random_sigkill_and_sigint_then_resume_gives_the_same_report(
    tmp_path: Path, slow_model: str, model_env: dict[str, str]
) -> None:
    seed = int(os.environ.get("PFR_FAULT_SEED", "20261202"))
    rng = random.Random(seed)
    store = tmp_path / "store"
    signals = 0
    for attempt in range(6):
        if count(store) >= TOTAL:
            break
        sig = signal.SIGKILL if attempt % 2 == 0 else signal.SIGINT
        start = count(store)
        proc = subprocess.Popen(run_command(slow_model, store), env=model_env, stderr=subprocess.PIPE)
        # somewhere while scoring: after the first new commit, then a random extra delay (mid-batch)
        wait_until(lambda: count(store) > start, proc)  # noqa: B023 - evaluated in this iteration
        if proc.poll() is None:
            wait_until(lambda: False, proc, timeout=rng.uniform(0.0, 0.5))
        if proc.poll() is None:
            os.kill(proc.pid, sig)
            signals += 1
        _, err = proc.communicate(timeout=60)
        if sig == signal.SIGINT and proc.returncode != 0:
            assert proc.returncode == 130, (seed, err.decode())
            assert err.decode().count("\n") == 1 and "interrupted" in err.decode(), (seed, err.decode())
        assert count(store) <= TOTAL and duplicates(store) == 0, seed
    assert signals >= 2, "the run finished before it could be interrupted; raise PFR_TEST_DELAY"
    done = subprocess.run(run_command(slow_model, store), env=model_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert count(store) == TOTAL and duplicates(store) == 0

    clean = tmp_path / "clean"
    quick = {**model_env, "PFR_TEST_DELAY": "0"}
    subprocess.run(run_command(slow_model, clean), env=quick, check=True, capture_output=True)
    assert api.metrics(store) == api.metrics(clean)
    report = [subprocess.run(_report(s), capture_output=True, text=True, check=True).stdout for s in (store, clean)]
    assert report[0].replace(str(store), "") == report[1].replace(str(clean), "")


def _report(store: Path) -> list[str]:
    from .conftest import pfr_command

    return pfr_command("report", str(store), "--format", "json", "--draws", "200")
