"""Every case of the bad-input matrix (bad_input_cases.py): the exit code it must give, one stderr
line that says what is wrong and what is allowed, no traceback, and no store damaged."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from .bad_input_cases import CASES, Case, command, prepare
from .conftest import count


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare(tmp_path_factory.mktemp("bad-inputs"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(work: Path, case: Case) -> None:
    before = count(work / "store")
    env = {**os.environ, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1", **dict(case.env)}
    proc = subprocess.run(command(case, work), capture_output=True, text=True, env=env, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == case.code, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(("pfr: error: ", "pfr: interrupted")), lines[0]
    assert re.search(case.says, lines[0]), lines[0]
    assert count(work / "store") == before == 32
