"""examples/router_service.py served by uvicorn on 127.0.0.1, tested through ``http:`` against the
same router in process (``minilm-router``): the label-only endpoint makes the same choices, the
scored endpoint gives the same log-probabilities."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import pfr

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def router_service() -> Iterator[str]:
    """The example run as a user runs it: its own process (`python examples/router_service.py --port N`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(ROOT / "examples" / "router_service.py"), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    try:
        while True:
            assert proc.poll() is None, f"the example service exited: {proc.stderr.read() if proc.stderr else ''}"
            assert time.monotonic() < deadline, "the example service did not start in 120 s"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _stored(store: Path) -> dict[str, tuple[int, list[float]]]:
    with sqlite3.connect(store / "results.sqlite") as con:
        rows = con.execute("SELECT q.request_id, r.choice, r.logprobs FROM results r "
                           "JOIN requests q ON q.request_key = r.request_key")  # fmt: skip
        return {rid: (c, json.loads(lp)) for rid, c, lp in rows}


def test_example_service_decides_as_the_router_in_process(router_service: str, data_dir: Path, tmp_path: Path) -> None:
    reqs = pfr.build("trec", panel="main", data_dir=data_dir, limit=4)
    pfr.run("minilm-router", reqs, tmp_path / "local", progress=False)
    pfr.run(f"http:{router_service}/decide", reqs, tmp_path / "label", progress=False)
    pfr.run(f"http:{router_service}/scores", reqs, tmp_path / "scores", options={"answer": "scores", "numbers": "prob"},
            progress=False)  # fmt: skip
    local, label, scores = (_stored(tmp_path / n) for n in ("local", "label", "scores"))
    assert len(local) == len(reqs) == len(label) == len(scores)
    for rid, (choice, logprobs) in local.items():
        assert label[rid] == (choice, [])  # label-only: the same choice, no scores
        assert scores[rid][0] == choice
        assert scores[rid][1] == pytest.approx(logprobs, abs=1e-4)
    assert len({c for c, _ in local.values()}) > 1  # not a constant answer
