"""The GitHub Actions example of docs/ci-gate.md: valid YAML whose `pfr` commands run as written, and
a study file's `[check]` table, which makes `pfr study` exit like `pfr check`."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "examples" / "github-actions" / "pfr-gate.yml"


def _demo(into: Path) -> None:
    folder = Path(str(resources.files("pfr.data").joinpath("demo")))
    into.mkdir(parents=True, exist_ok=True)
    shutil.copy(folder / "requests.csv", into / "intents.csv")
    shutil.copy(folder / "categories.csv", into / "categories.csv")


def _six_intents(into: Path) -> int:
    """The demo data cut to its first six intents: what a team's own small file looks like."""
    folder = Path(str(resources.files("pfr.data").joinpath("demo")))
    with open(folder / "categories.csv", newline="", encoding="utf-8") as f:
        header, *cats = list(csv.reader(f))
    keep = {c[0] for c in cats[:6]}
    with open(folder / "requests.csv", newline="", encoding="utf-8") as f:
        head, *rows = list(csv.reader(f))
    into.mkdir(parents=True)
    intents = [head, *(r for r in rows if r[1] in keep)]
    for name, table in (("categories.csv", [header, *cats[:6]]), ("intents.csv", intents)):
        with open(into / name, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(table)
    return sum(r[1] in keep for r in rows)


def _installed(bin_dir: Path) -> None:
    """``pfr`` and ``python`` on PATH as the install step leaves them, from the pfr under test."""
    bin_dir.mkdir()
    for name, line in (("pfr", f'exec "{sys.executable}" -c "from pfr.cli import main; main()" "$@"'),
                       ("python", f'exec "{sys.executable}" "$@"')):  # fmt: skip
        (bin_dir / name).write_text(f"#!/bin/sh\n{line}\n", encoding="utf-8")
        (bin_dir / name).chmod(0o755)


def test_workflow_runs_as_written_in_a_repository_of_data(tmp_path: Path) -> None:
    """Every `run:` step of the example, in order, with bash as GitHub runs it (`bash -eo pipefail`; a
    step after a failure runs only under `if: always()`), in a repository that holds only a 6-intent
    data file and its categories. The install step is the one step not run: pfr is installed here
    already, so the test puts `pfr` and `python` wrappers for the pfr under test first on PATH."""
    wf = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert "pull_request" in triggers
    job = wf["jobs"]["pfr-gate"]
    steps = job["steps"]
    assert all("uses" in s or "run" in s for s in steps)
    assert {**wf.get("permissions", {}), **job.get("permissions", {})}.get("checks") == "write"  # the JUnit action
    for s in steps:  # `cache: pip` needs a requirements file to key it, and a repository of data has none
        if str(s.get("uses", "")).startswith("actions/setup-python"):
            assert "cache" not in s.get("with", {}) or "cache-dependency-path" in s["with"]
    repo = tmp_path / "repo"
    n_texts = _six_intents(repo / "data")
    _installed(tmp_path / "bin")
    summary = tmp_path / "summary.md"
    env = {**os.environ, **{k: str(v) for k, v in wf.get("env", {}).items()}, "GITHUB_STEP_SUMMARY": str(summary),
           "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
    codes: dict[str, int] = {}
    for s in (s for s in steps if "run" in s):
        script = str(s["run"])
        if "pip install" in script:
            assert all(line.strip().startswith("pip install") for line in script.splitlines() if line.strip())
            continue
        if any(codes.values()) and "always()" not in str(s.get("if", "")):
            continue
        res = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=repo, env=env,
                             capture_output=True, text=True)  # fmt: skip
        codes[s["name"]] = res.returncode
        print(s["name"], res.returncode, res.stdout[-2000:], res.stderr[-2000:], sep="\n")
        assert res.returncode in (0, 1), (s["name"], res.stdout, res.stderr)
    score, gate, report = codes.values()
    assert score == 0 and report == 0, codes
    cases = ET.parse(repo / "pfr-gate.xml").getroot().findall(".//testcase")
    assert len(cases) == 4 and gate == int(any(c.findall("failure") for c in cases))
    assert "| model |" in summary.read_text(encoding="utf-8")
    assert f"{n_texts} texts" in (repo / "pfr-report.html").read_text(encoding="utf-8")
    kept = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert all((repo / p).is_file() for p in kept["with"]["path"].split())  # what the artifact keeps exists


STUDY = """
name = "gate"
store = "runs/{model}"
[[models]]
model = "baseline:{model}"
[[datasets]]
dataset = "data/intents.csv"
descriptions = "data/categories.csv"
[[designs]]
[report]
format = ["text"]
draws = 500
[check]
min = {{ P4 = 0.9 }}
max = ["DR-F=0.1"]
"""


@pytest.mark.parametrize(("model", "code"), [("oracle", 0), ("random", 1)])
def test_study_check_exits_like_pfr_check(model: str, code: int, pfr_cli: Callable[..., Any], tmp_path: Path) -> None:
    _demo(tmp_path / "data")
    (tmp_path / "gate.toml").write_text(STUDY.format(model=model), encoding="utf-8")
    res = pfr_cli("study", "gate.toml", "--no-progress", cwd=tmp_path)
    assert res.returncode == code, res.stderr
    store = tmp_path / "runs" / model
    assert (store / "report.txt").is_file() and (store / "check.json").is_file()
    failures = ET.parse(store / "check.xml").getroot().findall(".//failure")
    assert len(failures) == (0 if code == 0 else 2)
    assert ("FAIL" in res.stdout) == bool(code)


def test_study_check_table_is_checked(pfr_cli: Callable[..., Any], tmp_path: Path) -> None:
    _demo(tmp_path / "data")
    bad = STUDY.format(model="oracle").replace('max = ["DR-F=0.1"]', 'max = ["DR-X=0.1"]')
    (tmp_path / "gate.toml").write_text(bad, encoding="utf-8")
    res = pfr_cli("study", "gate.toml", "--no-progress", cwd=tmp_path)
    assert res.returncode == 2 and "check: unknown metric 'DR-X'" in res.stderr
    assert not (tmp_path / "runs").exists()  # refused before anything is scored
    percent = STUDY.format(model="oracle").replace("P4 = 0.9", "P4 = 90")
    (tmp_path / "gate.toml").write_text(percent, encoding="utf-8")
    res = pfr_cli("study", "gate.toml", "--no-progress", cwd=tmp_path)
    assert res.returncode == 2 and "P4 is a fraction in [0, 1]; write P4=0.9, not 90" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()
