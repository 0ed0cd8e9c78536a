"""examples/router_service.py served by uvicorn on 127.0.0.1, tested through ``http:`` against the
same router in process (``minilm-router``): the label-only endpoint makes the same choices, the
scored endpoint gives the same log-probabilities."""

from __future__ import annotations

import importlib.util
import json
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import pfr

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def router_service() -> Iterator[str]:
    spec = importlib.util.spec_from_file_location("router_service", ROOT / "examples" / "router_service.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["router_service"] = module  # pydantic resolves the request model's types through it
    spec.loader.exec_module(module)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(module.create_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the example service did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


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
