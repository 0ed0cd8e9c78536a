"""Run the whole bad-input matrix and print one table: case, exit code, stderr lines, the message.

The cases are those of tests/faults/bad_input_cases.py (the issue's examples among them): bad
option values from the command line, the study file and the environment, damaged data and
description files, and user code that exits, raises or is interrupted. Each runs `pfr` in a fresh
interpreter, as a user would. Exit status: 0 when every case gave its expected exit code, one
stderr line that matches, and no traceback; 1 otherwise.

    PYTHONPATH=src python scripts/bad_inputs.py [--format markdown|text]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cases_module():  # type: ignore[no-untyped-def]
    path = ROOT / "tests" / "faults" / "bad_input_cases.py"
    spec = importlib.util.spec_from_file_location("bad_input_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bad_input_cases"] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", choices=("markdown", "text"), default="markdown")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    cases = _cases_module()
    rows = []
    failures = 0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pfr-bad-inputs-") as tmp:
        work = cases.prepare(Path(tmp))
        for case in cases.CASES:
            env = {**os.environ, "NO_COLOR": "1", **dict(case.env)}
            proc = subprocess.run(cases.command(case, work), capture_output=True, text=True, env=env, timeout=300)
            lines = proc.stderr.strip().splitlines()
            ok = (
                proc.returncode == case.code
                and len(lines) == 1
                and "Traceback" not in proc.stderr
                and re.search(case.says, lines[0]) is not None
            )
            failures += not ok
            shown = (lines[0] if lines else "").replace(str(work), "DIR")
            rows.append((case.name, str(proc.returncode), str(len(lines)), "ok" if ok else "FAIL", shown))
    seconds = time.perf_counter() - t0
    head = ("case", "exit", "stderr lines", "check", "message")
    if args.format == "markdown":
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join(["---"] * len(head)) + "|")
        for r in rows:
            print("| " + " | ".join(c.replace("|", "\\|") for c in (f"`{r[0]}`", *r[1:4], f"`{r[4]}`")) + " |")
    else:
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
        for r in [head, *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
    print(f"\n{len(rows)} cases, {len(rows) - failures} as expected, {failures} not ({seconds:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
