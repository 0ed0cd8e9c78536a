"""SIGINT and SIGKILL at seeded random points of a run, then the same command: one clear line, exit 130
for SIGINT, nothing committed lost, nothing duplicated, and the same report as an uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
from pathlib import Path

from pfr import api

from .conftest import TOTAL, count, duplicates, run_command, wait_until

#: The slow model's scores, but on call ``$PFR_TEST_BLOCK_AT + 1`` it writes ``$PFR_TEST_BLOCKED`` and
#: then blocks until a signal ends it. The runner commits each batch before it asks for the next, so
#: when the file appears exactly ``$PFR_TEST_BLOCK_AT`` results are committed and nothing more can be.
BLOCKING_MODEL = """
import hashlib, os, time

CALLS = [0]

def score(request):
    CALLS[0] += 1
    if CALLS[0] == int(os.environ.get("PFR_TEST_BLOCK_AT", "-1")) + 1:
        open(os.environ["PFR_TEST_BLOCKED"], "w").close()
        while True:
            time.sleep(3600)
    h = hashlib.sha256((request.text + request.definition).encode()).digest()
    return [((h[i % len(h)] % 17) - 8) / 4.0 for i in range(len(request.options))]
"""


def test_sigint_exits_130_and_keeps_what_was_committed(tmp_path: Path, model_env: dict[str, str]) -> None:
    """SIGINT while the model is blocked after three committed batches: the run cannot end before the
    signal however slow the machine is (it waits on the signal, not on a delay), and it keeps the 12."""
    model = tmp_path / "blocking_model.py"
    model.write_text(BLOCKING_MODEL, encoding="utf-8")
    spec, store, blocked = f"python:{model}:score", tmp_path / "store", tmp_path / "blocked"
    env = {**model_env, "PFR_TEST_BLOCK_AT": "12", "PFR_TEST_BLOCKED": str(blocked)}
    proc = subprocess.Popen(run_command(spec, store), env=env, stderr=subprocess.PIPE)
    try:
        assert wait_until(blocked.exists, proc, timeout=600), proc.communicate(timeout=60)[1].decode()
        assert proc.poll() is None and count(store) == 12  # three batches of 4, and the model is blocked
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = err.decode()
    assert proc.returncode == 130, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0] and "Traceback" not in stderr, stderr
    assert count(store) == 12  # nothing changes after the exit
    done = subprocess.run(run_command(spec, store), env=model_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"{TOTAL} requests: {TOTAL - 12} scored now, 12 already in" in done.stderr
    assert count(store) == TOTAL and duplicates(store) == 0


def test_random_sigkill_and_sigint_then_resume_gives_the_same_report(tmp_path: Path, model_env: dict[str, str]) -> None:
    """Six runs stopped at seeded random points, alternately by SIGKILL and SIGINT, then one to the end.

    The points are random call numbers, often inside a batch, not random delays: the blocking model
    stops on that call and writes a file, the test waits for the file and only then signals. So each
    stop lands where the seed says however loaded the machine is, and what is committed at that moment
    is known exactly (whole batches of 4 before the blocked call)."""
    seed = int(os.environ.get("PFR_FAULT_SEED", "20261202"))
    rng = random.Random(seed)
    model = tmp_path / "blocking_model.py"
    model.write_text(BLOCKING_MODEL, encoding="utf-8")
    spec, store = f"python:{model}:score", tmp_path / "store"
    for attempt in range(6):
        start = count(store)
        left = TOTAL - start
        if left <= 1:
            break
        block_at = rng.randint(1, min(left - 1, 30))  # the calls this process makes before it blocks
        blocked = tmp_path / f"blocked{attempt}"
        env = {**model_env, "PFR_TEST_BLOCK_AT": str(block_at), "PFR_TEST_BLOCKED": str(blocked)}
        sig = signal.SIGKILL if attempt % 2 == 0 else signal.SIGINT
        proc = subprocess.Popen(run_command(spec, store), env=env, stderr=subprocess.PIPE)
        try:
            assert wait_until(blocked.exists, proc, timeout=600), (seed, proc.communicate(timeout=60)[1].decode())
            assert count(store) == start + block_at // 4 * 4, (seed, attempt, block_at)  # whole batches only
            os.kill(proc.pid, sig)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        if sig == signal.SIGINT:
            assert proc.returncode == 130, (seed, err.decode())
            assert err.decode().count("\n") == 1 and "interrupted" in err.decode(), (seed, err.decode())
        else:
            assert proc.returncode == -signal.SIGKILL, (seed, err.decode())
        assert count(store) == start + block_at // 4 * 4 and duplicates(store) == 0, (seed, attempt)
    done = subprocess.run(run_command(spec, store), env=model_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert count(store) == TOTAL and duplicates(store) == 0

    clean = tmp_path / "clean"
    subprocess.run(run_command(spec, clean), env=model_env, check=True, capture_output=True)
    assert api.metrics(store) == api.metrics(clean)
    report = [subprocess.run(_report(s), capture_output=True, text=True, check=True).stdout for s in (store, clean)]
    assert report[0].replace(str(store), "") == report[1].replace(str(clean), "")


def _report(store: Path) -> list[str]:
    from .conftest import pfr_command

    return pfr_command("report", str(store), "--format", "json", "--draws", "200")
