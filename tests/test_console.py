"""`pfr report` on a console that cannot encode the report's signs (−, Δ, ×, …)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

import pfr
from pfr.console import ascii_stand_in


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("console") / "store"
    pfr.run("baseline:random", pfr.build("demo", limit=12), path)
    return path


@pytest.mark.parametrize("encoding", ["ascii", "cp1252", "latin-1"])
def test_report_prints_on_a_non_utf8_console(pfr_cli: Callable[..., CompletedProcess[str]], store: Path,
                                             encoding: str) -> None:  # fmt: skip
    utf8 = pfr_cli("report", str(store), "--draws", "200", env={"PYTHONIOENCODING": "utf-8"})
    assert utf8.returncode == 0 and ("\u2212" in utf8.stdout or "\u0394" in utf8.stdout)
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": encoding}
    proc = subprocess.run([sys.executable, "-c", "from pfr.cli import main; main()", "report", str(store), "--draws",
                           "200"], capture_output=True, env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    out = proc.stdout.decode(encoding)  # everything printed is in the console's encoding
    assert "\u2212" not in out and "\u0394" not in out
    # one character for one in the tables: their columns stay aligned
    pairs = list(zip(utf8.stdout.splitlines(), out.splitlines(), strict=True))
    tables = [(u, a) for u, a in pairs if all(len(ascii_stand_in(c)) == 1 for c in u if ord(c) > 127)]
    assert len(tables) > len(pairs) / 2
    assert all(len(u) == len(a) for u, a in tables)


def test_stand_ins() -> None:
    assert [ascii_stand_in(c) for c in "\u2212\u00d7\u0394\u00e9\u4e2d"] == ["-", "x", "D", "e", "?"]
