"""User code in a ``python:`` model: non-finite scores follow the stated rule, and whatever the
function does (an exception, ``sys.exit``, ``os._exit``, Ctrl-C) ends ``pfr run`` with one line naming the model
and the request, exit 2 (130), and every batch committed before it kept."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from pfr.models.scores import LOG_FLOOR
from pfr.run.store import Store, StoredResult

MODELS = '''
import math, os, sys

def _after_first_batch(r):
    """Fail only once the first batch (4 requests) is scored, so something is committed first."""
    path = os.environ["PFR_TEST_COUNTER"]
    n = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(n + 1))
    return n >= 4

def prefers_fallback_with_inf(r):
    return [math.inf if o.is_fallback else 0.0 for o in r.options]

def prefers_gold_with_inf(r):
    return [math.inf if i == r.expected else -math.inf for i in range(len(r.options))]

def all_minus_inf(r):
    return [-math.inf] * len(r.options)

def exits_zero(r):
    if _after_first_batch(r):
        sys.exit(0)
    return [0.0] * len(r.options)

def hard_exits(r):
    if _after_first_batch(r):
        os._exit(0)
    return [0.0] * len(r.options)

def hard_exits_in_a_thread(r):
    if _after_first_batch(r):
        import threading
        t = threading.Thread(target=os._exit, args=(0,))
        t.start()
        t.join()
    return [0.0] * len(r.options)

def raises(r):
    if _after_first_batch(r):
        raise RuntimeError("user bug")
    return [0.0] * len(r.options)

def presses_ctrl_c(r):
    if _after_first_batch(r):
        raise KeyboardInterrupt
    return [0.0] * len(r.options)

def returns_nan(r):
    if _after_first_batch(r):
        return [math.nan] * len(r.options)
    return [0.0] * len(r.options)
'''


@pytest.fixture
def models(tmp_path: Path) -> Path:
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return path


def _run(pfr_cli: Callable[..., CompletedProcess[str]], models: Path, func: str, store: Path) -> CompletedProcess[str]:
    return pfr_cli(
        "run", "-m", f"python:{models}:{func}", "-d", "demo", "--limit", "4", "-s", str(store),
        "--batch-size", "4", "--no-progress", env={"PFR_TEST_COUNTER": str(store.parent / f"{func}.count")},
    )  # fmt: skip


def _results(store: Path) -> list[StoredResult]:
    with Store(store, create=False) as st:
        return list(st.results())


@pytest.mark.parametrize("func", ["prefers_fallback_with_inf", "prefers_gold_with_inf"])
def test_plus_inf_gets_the_option_it_marks(pfr_cli: Callable[..., CompletedProcess[str]], models: Path,
                                            tmp_path: Path, func: str) -> None:  # fmt: skip
    store = tmp_path / "store"
    proc = _run(pfr_cli, models, func, store)
    assert proc.returncode == 0, proc.stderr
    results = _results(store)
    assert len(results) == 16
    for r in results:
        want = r.request.fallback_index if func == "prefers_fallback_with_inf" else r.request.expected
        assert r.choice == want
        assert r.logprobs[want] == 0.0  # probability 1, not the floor
        assert all(v == LOG_FLOOR for i, v in enumerate(r.logprobs) if i != want)


def test_all_minus_inf_is_uniform_and_takes_the_first_option(pfr_cli: Callable[..., CompletedProcess[str]],
                                                               models: Path, tmp_path: Path) -> None:  # fmt: skip
    store = tmp_path / "store"
    assert _run(pfr_cli, models, "all_minus_inf", store).returncode == 0
    for r in _results(store):
        assert r.choice == 0 and len(set(r.logprobs)) == 1


@pytest.mark.parametrize(
    ("func", "code", "says"),
    [
        ("exits_zero", 2, "failed on request .*: it called sys.exit\\(0\\)"),
        ("hard_exits", 2, "failed on request .*: it called os._exit\\(0\\), which would have ended pfr"),
        ("hard_exits_in_a_thread", 2, "failed on request .*: it called os._exit\\(0\\)"),
        ("raises", 2, "failed on request .*: RuntimeError: user bug"),
        ("returns_nan", 2, "returned NaN"),
        ("presses_ctrl_c", 130, "interrupted in python model .*:presses_ctrl_c on request"),
    ],
)
def test_user_code_ends_with_one_line_and_keeps_the_store(pfr_cli: Callable[..., CompletedProcess[str]],
                                                           models: Path, tmp_path: Path, func: str, code: int,
                                                           says: str) -> None:  # fmt: skip
    store = tmp_path / "store"
    proc = _run(pfr_cli, models, func, store)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, proc.stderr
    assert len(lines) == 1 and re.search(says, lines[0]) and f":{func}" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(_results(store)) == 4  # the first batch, committed before the function failed
    again = _run(pfr_cli, models, func, store)  # resumes: the first batch is not asked again
    assert again.returncode == code and len(_results(store)) == 4


def test_os_exit_while_importing_the_model_is_one_line(pfr_cli: Callable[..., CompletedProcess[str]],
                                                       tmp_path: Path) -> None:  # fmt: skip
    model = tmp_path / "leaves.py"
    model.write_text("import os\nos._exit(0)\n\ndef score(r):\n    return [0.0] * len(r.options)\n")
    proc = pfr_cli("run", "-m", f"python:{model}:score", "-d", "demo", "--limit", "1", "-s", str(tmp_path / "s"),
                   "--no-progress")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"importing {model} failed: it called os._exit(0)" in lines[0], proc.stderr
    assert not (tmp_path / "s").exists()
