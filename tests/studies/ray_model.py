"""A ``python:`` decision model for the Ray tests, steered by files in ``$PFR_RAY_TEST_DIR``.

Its scores are a hash of the text and options (deterministic, so any process scores alike). The files
make one process misbehave at a known moment, so that a test waits on a file, never on the clock:

* ``block``: the first process to see it (in the network namespace whose inode it holds, if any)
  writes its pid to ``pid`` and blocks until ``released`` exists (the test kills it meanwhile); in
  other namespaces the model scores nothing until ``pid`` exists;
* ``straggle``: the first process to score the text named in it claims ``straggler-<pid>`` and blocks
  until ``released`` exists;
* ``fail``: the text named in it raises (bad input: its unit fails alone).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

DIR = Path(os.environ.get("PFR_RAY_TEST_DIR", "."))


def _hold(name: str) -> None:
    """Claim ``name`` (first process only) and wait until the test says ``released``."""
    try:
        fd = os.open(DIR / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    _wait_for("released")


def _wait_for(name: str) -> None:
    """Until the file ``name`` exists (a safety limit of 300 s, never reached when the test runs)."""
    deadline = time.monotonic() + 300
    while not (DIR / name).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"ray_model: no {name}")
        time.sleep(0.05)


def decide(request: Any) -> list[float]:
    block = DIR / "block"
    if block.exists():
        where = block.read_text().strip()
        if where in ("", str(os.stat("/proc/self/ns/net").st_ino)):
            _hold("pid")
        else:  # elsewhere nothing is scored before the blocking process holds: the study cannot end first
            _wait_for("pid")
    for flag in ("straggle", "fail"):
        path = DIR / flag
        if path.exists() and request.text_id == path.read_text().strip():
            if flag == "fail":
                raise ValueError(f"bad input in text {request.text_id}")
            _hold("straggler")
    seed = f"{request.text}\0{[o.category for o in request.options]}".encode()
    digest = hashlib.sha256(seed).digest()
    return [-float(b) for b in digest[: len(request.options)]]
