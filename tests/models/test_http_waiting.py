"""A service that hangs is never silent (issue 31): while a call waits, the run says on stderr what it
waits for (the URL as ``safe_url`` shows it) and for how long; it finishes once the service answers,
or exits 130 at once on Ctrl-C. The service blocks on an event that the test sets once the message
has appeared: no race against the clock."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from .test_http_service import Answer, label_service


@pytest.mark.parametrize("then", ["release", "interrupt"])
def test_a_hanging_service_is_named_with_how_long_it_waited(then: str, service: Any, tmp_path: Path) -> None:
    release = threading.Event()

    def blocking(body: Any, headers: dict[str, str]) -> Answer:
        release.wait(120)
        return label_service(body, headers)

    svc = service(blocking)
    store = tmp_path / "store"
    args = ["run", "-m", f"http:{svc.url}?code=hang-secret-42", "-d", "demo", "--limit", "1", "-s", str(store),
            "--progress-every", "0.2", "--model-opt", "concurrency=1"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from pfr.cli import main; main()", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert proc.stderr is not None
        said = []
        for line in proc.stderr:  # blocks until the run writes a line: the service is still waiting
            said.append(line)
            if "waiting for" in line:
                break
        else:
            raise AssertionError("".join(said))
        notice = said[-1]
        assert notice.startswith(f"pfr: waiting for http://127.0.0.1:{svc.port}/decide?code=*** — "), notice
        assert re.search(r" — \d+(\.\d)? s so far \(try 1 of 6, timeout 30 s per try\)$", notice), notice
        assert "hang-secret-42" not in notice
        if then == "release":
            release.set()
        else:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
    assert "hang-secret-42" not in out + err + "".join(said)
    if then == "release":
        assert proc.returncode == 0 and "4 scored now" in err, err
    else:
        assert proc.returncode == 130 and "Traceback" not in err, err

