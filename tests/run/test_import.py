"""`pfr import` restores the scored requests of a `pfr export` file (issue 26 item 3): the same report,
a resume that scores only what is missing, a malformed file refused at its line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # a real small model in the exported store
DATA = Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


def _pfr(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from pfr.cli import main; main()"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, env=env)


def _ok(*args: str) -> subprocess.CompletedProcess[str]:
    proc = _pfr(*args)
    assert proc.returncode == 0, proc.stderr
    return proc


def _run(model: str, store: Path, limit: int, *extra: str) -> str:
    return _ok("run", "-m", model, "-d", "trec", "--data-dir", str(DATA), "--limit", str(limit), "-s", str(store),
               "--no-progress", *extra).stderr  # fmt: skip


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store S with a real small model and two baselines on two designs, and its export."""
    tmp = tmp_path_factory.mktemp("import")
    s = tmp / "S"
    _run("smollm2-135m", s, 1)
    _run("baseline:oracle", s, 3)
    _run("baseline:random", s, 3, "--membership")
    _ok("export", str(s), "--out", str(tmp / "x.jsonl"))
    return s, tmp / "x.jsonl"


def test_import_gives_the_same_report_and_resumes(exported: tuple[Path, Path], tmp_path: Path) -> None:
    s, x = exported
    t = tmp_path / "T"
    proc = _ok("import", str(x), "--store", str(t))
    assert proc.stderr.strip() == f"28 rows: 28 results added to {t}, 0 already there (3 model(s))"
    reports = [_ok("report", str(p), "--format", "json", "--draws", "200").stdout for p in (s, t)]
    assert reports[0] == reports[1] and json.loads(reports[0])  # byte-identical JSON
    # the same export of the restored store, and importing again adds nothing
    _ok("export", str(t), "--out", str(tmp_path / "y.jsonl"))
    assert (tmp_path / "y.jsonl").read_bytes() == x.read_bytes()
    again = _ok("import", str(x), "--store", str(t))
    assert again.stderr.strip() == f"28 rows: 0 results added to {t}, 28 already there (3 model(s))"
    # resuming with the real model into T scores only the text that was not exported
    resumed = _run("smollm2-135m", t, 2)
    assert re.fullmatch(rf"8 requests: 4 scored now, 4 already in {re.escape(str(t))} \([\d.]+ s\)", resumed.strip())


def test_a_malformed_file_is_refused_at_its_line(exported: tuple[Path, Path], tmp_path: Path) -> None:
    _, x = exported
    lines = x.read_text(encoding="utf-8").splitlines()
    t = tmp_path / "T"
    cases = []
    broken = [*lines]
    broken[2] = broken[2][:-5]
    cases.append((broken, "line 3: not JSON"))
    row = json.loads(lines[1])
    row.pop("choice")
    cases.append(([lines[0], json.dumps(row), *lines[2:]], "line 2: missing field 'choice'"))
    row = json.loads(lines[1])
    row["expected"] = 99
    cases.append(([lines[0], json.dumps(row)], "line 2: expected: 99 is out of range"))
    row = json.loads(lines[0])
    row.pop("inventory")
    cases.append(([json.dumps(row)], "line 1: inventory_key: "))
    row = json.loads(lines[0])
    row.pop("inventory")
    row.pop("inventory_key")
    cases.append(([json.dumps(row)], "line 1: missing field 'inventory_key' (a file from an older pfr export"))
    row = json.loads(lines[0])
    row["scores"] = row["scores"][:-1]
    cases.append(([json.dumps(row)], "line 1: scores: need a list of"))
    for n, (body, message) in enumerate(cases):
        bad = tmp_path / f"bad{n}.jsonl"
        bad.write_text("\n".join(body) + "\n", encoding="utf-8")
        proc = _pfr("import", str(bad), "--store", str(t))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"pfr: error: {bad}: {message}"), proc.stderr
        assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr
        assert not t.exists()  # nothing stored from a malformed file
    proc = _pfr("import", str(x), "--store", str(t), "--from", "csv")
    assert proc.returncode == 2 and proc.stderr == "pfr: error: --from csv: unknown format (known: lm-eval, pfr)\n"
