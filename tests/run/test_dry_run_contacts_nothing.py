"""``--dry-run`` contacts nothing (issue 31 item 7): no connection to an ``http:`` service or an
``openai:`` server (a listening socket on 127.0.0.1 records any), and no call of a ``python:`` function,
from ``pfr run --dry-run`` or ``pfr study --dry-run``; the counts are still printed and what needs
the model is said to be unknown."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


class Listener:
    """A socket on 127.0.0.1 that accepts and records every connection (and answers none)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    lst = Listener()
    yield lst
    lst.close()


def _model_file(tmp_path: Path) -> tuple[str, Path]:
    called = tmp_path / "called"
    src = tmp_path / "model.py"
    src.write_text(f"def decide(request):\n    open({str(called)!r}, 'a').write('x')\n    return 0\n")
    return f"python:{src}:decide", called


@pytest.mark.parametrize("kind", ["http", "http-env", "openai", "openai-generate", "python"])
def test_pfr_run_dry_run_contacts_nothing(kind: str, listener: Listener, tmp_path: Path, pfr_cli: Any) -> None:
    called = tmp_path / "called"
    opts: list[str] = []
    env: dict[str, str] = {}
    url = f"http://127.0.0.1:{listener.port}"
    if kind == "http":
        spec = f"http:{url}/decide?code=dry-secret-1"
    elif kind == "http-env":
        spec, env = "http:env:PFR_DRY_URL", {"PFR_DRY_URL": f"{url}/decide"}
    elif kind == "openai":
        spec = f"openai:some-model@{url}/v1"
    elif kind == "openai-generate":
        spec, opts = f"openai:some-model@{url}/v1", ["--model-opt", "decide=generate"]
    else:
        spec, called = _model_file(tmp_path)
    store = tmp_path / "store"
    proc = pfr_cli("run", "-m", spec, *opts, "-d", "demo", "--limit", "2", "-s", str(store), "--dry-run", env=env)
    assert proc.returncode == 0, proc.stderr
    assert listener.connections == 0 and not called.exists()
    assert proc.stdout.startswith("8 requests to score with "), proc.stdout
    assert "expected time unknown" in proc.stdout and "nothing was sent" in proc.stdout, proc.stdout
    assert "dry-secret-1" not in proc.stdout + proc.stderr
    assert not store.exists()


def test_pfr_study_dry_run_contacts_nothing(listener: Listener, tmp_path: Path, pfr_cli: Any) -> None:
    spec, called = _model_file(tmp_path)
    study = tmp_path / "study.toml"
    study.write_text(f'''name = "dry"
store = "runs"
[[models]]
model = "http:http://127.0.0.1:{listener.port}/decide"
[[models]]
model = "openai:some-model@http://127.0.0.1:{listener.port}/v1"
[[models]]
model = "{spec}"
[[datasets]]
dataset = "demo"
panel = "main"
limit = 2
[[designs]]
fallback = "Other"
''')
    proc = pfr_cli("study", str(study), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert listener.connections == 0 and not called.exists()
    assert proc.stdout.count("expected time unknown") >= 3, proc.stdout
    assert not (tmp_path / "runs").exists()


def test_a_post_inside_no_contact_is_refused_unsent(listener: Listener) -> None:
    import pfr
    from pfr.errors import ModelError
    from pfr.models.base import no_contact
    from pfr.models.registry import load_model

    reqs: Callable[[], Any] = lambda: pfr.build("demo", panel="main", limit=1)  # noqa: E731
    with no_contact():
        model = load_model(f"http:http://127.0.0.1:{listener.port}/decide", {"concurrency": "2"})
        with pytest.raises(ModelError, match="a dry run contacts nothing"):
            model.score(reqs())
    assert listener.connections == 0
