"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1 that misbehaves on
purpose: 429 with Retry-After, 500s, garbage bodies, dropped connections and hangs. Each ends with
one clear line; what was committed before the fault stays, and a rerun against a healthy server
completes without duplicating anything."""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pfr import api

from .conftest import TOTAL, count, duplicates, run_command

SYMBOLS = "ABCDEFGHIJKLMNOP"


class FaultyServer:
    """A small OpenAI-style completions server: deterministic top-logprobs from the prompt's hash.

    ``fault`` is what it does after ``healthy`` good answers (``None``: stay healthy); ``first_429``
    answers that many first calls with 429. Hangs wait on an event, set when the server closes, at
    most ``hang_s`` seconds (``None``: until then), so the server never outlives the test.
    """

    def __init__(self) -> None:
        self.fault: str | None = None
        self.healthy = 0
        self.first_429 = 0
        self.hang_s: float | None = 5.0  # None: until the server closes
        self.calls = 0
        self.good = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._send(200, json.dumps({"data": [{"id": "fake"}]}).encode())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(min(length, 10_000_000)) or b"{}")
                with server._lock:
                    server.calls += 1
                    n = server.calls
                    faulty = server.fault is not None and server.good >= server.healthy
                    if not faulty and n > server.first_429:
                        server.good += 1
                if n <= server.first_429:
                    self._send(429, b'{"error": "slow down"}', {"Retry-After": "0"})
                elif not faulty:
                    self._send(200, server.answer(str(body.get("prompt", ""))))
                elif server.fault == "500":
                    self._send(500, b'{"error": "internal error"}')
                elif server.fault == "garbage":
                    self._send(200, b"\x00\xff<html>definitely not json")
                elif server.fault == "drop":
                    self.close_connection = True
                    self.connection.close()
                elif server.fault == "hang":
                    server._stop.wait(server.hang_s)
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @staticmethod
    def answer(prompt: str) -> bytes:
        h = hashlib.sha256(prompt.encode()).digest()
        top = {f" {s}": -((h[i] % 50) / 10.0) - 0.01 * i for i, s in enumerate(SYMBOLS)}
        choice = {"index": 0, "text": " A", "finish_reason": "length", "logprobs": {"top_logprobs": [top]}}
        return json.dumps({"choices": [choice], "usage": {"prompt_tokens": len(prompt) // 4}}).encode()

    def close(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def server() -> Iterator[FaultyServer]:
    s = FaultyServer()
    try:
        yield s
    finally:
        s.close()


def _cmd(server: FaultyServer, store: Path, retries: int = 2) -> list[str]:
    opts = ["timeout=0.5", f"max_retries={retries}", "retry_wait=0.01", "concurrency=2", "top_k=16"]
    return run_command(f"openai:fake@{server.url}", store, *[a for o in opts for a in ("--model-opt", o)])


def _run(server: FaultyServer, store: Path, retries: int = 2) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cmd(server, store, retries), capture_output=True, text=True, timeout=300)


def test_429_with_retry_after_is_retried_and_nothing_is_lost(tmp_path: Path, server: FaultyServer) -> None:
    server.first_429 = 5
    store = tmp_path / "store"
    proc = _run(server, store, retries=5)  # even if all five 429s hit one request, its sixth try succeeds
    assert proc.returncode == 0, proc.stderr
    assert f"{TOTAL} requests: {TOTAL} scored now" in proc.stderr
    assert server.calls == TOTAL + 5
    assert count(store) == TOTAL and duplicates(store) == 0


@pytest.mark.parametrize("fault", ["500", "garbage", "drop", "hang"])
def test_a_failing_server_ends_in_one_line_and_the_rerun_completes(
    tmp_path: Path, server: FaultyServer, fault: str
) -> None:
    server.fault, server.healthy = fault, 20
    store = tmp_path / "store"
    proc = _run(server, store)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pfr: error: ") and "Traceback" not in proc.stderr, proc.stderr
    assert server.url in lines[0]
    kept = count(store)
    assert 16 <= kept <= 20  # the batches answered before the fault are committed

    server.fault = None  # the server recovers
    done = _run(server, store)
    assert done.returncode == 0, done.stderr
    assert f"{TOTAL} requests: {TOTAL - kept} scored now, {kept} already in" in done.stderr
    assert count(store) == TOTAL and duplicates(store) == 0
    clean = tmp_path / "clean"
    assert _run(server, clean).returncode == 0
    assert api.metrics(store) == api.metrics(clean)


def test_ctrl_c_while_requests_hang_exits_at_once_and_keeps_what_was_committed(
    tmp_path: Path, server: FaultyServer
) -> None:
    """SIGINT while every in-flight HTTP call hangs: exit 130 at once, not after the client's timeout ×
    retries (a thread pool would join its workers first), with the committed batches kept.

    Nothing here waits on the clock: the calls hang until the server is closed after the test (the
    client's timeout, 10 minutes, is far beyond it), and the signal goes once both events are seen:
    the two calls of the sixth batch hang and the five healthy batches are committed."""
    import signal
    import time

    from .conftest import wait_until

    server.fault, server.healthy, server.hang_s = "hang", 20, None
    store = tmp_path / "store"
    opts = ["timeout=600", "max_retries=3", "retry_wait=0.01", "concurrency=2", "top_k=16"]
    cmd = run_command(f"openai:fake@{server.url}", store, *[a for o in opts for a in ("--model-opt", o)])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        started = wait_until(lambda: server.calls >= 22 and count(store) >= 20, proc, timeout=600)
        assert started and proc.poll() is None, "the calls never started to hang"
        assert server.calls == 22 and count(store) == 20  # both hang: no retry, no further commit
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
        waited = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert waited < 60, f"exit took {waited:.1f} s after SIGINT (the hung calls would take 600 s)"
    assert err.strip().splitlines()[-1].startswith("pfr: interrupted") and "Traceback" not in err
    assert count(store) == 20 and duplicates(store) == 0
