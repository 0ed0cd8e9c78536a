"""``pfr ARGS`` run in the test's own process, for the CLI tests that read its exit code and output."""

from __future__ import annotations

import pytest

from pfr.cli import main


def run_pfr(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``pfr ARGS`` in this process: (exit code, stdout, stderr)."""
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
