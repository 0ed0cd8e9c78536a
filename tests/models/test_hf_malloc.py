"""The hf backend's heap setting (:mod:`pfr.models.hf.malloc`), each case in a fresh process as it
changes the process for good."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = "from pfr.models.hf.malloc import keep_freed_memory\nprint(keep_freed_memory(), keep_freed_memory())\n"


def _run(env_extra: dict[str, str]) -> str:
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_thresholds_raised_once_and_switchable() -> None:
    assert _run({}).split() == ["True", "True"]
    assert _run({"PFR_MALLOC": "system"}).split() == ["False", "False"]
