"""The GitHub Actions example of docs/ci-gate.md: valid YAML whose `pfr` commands run as written, and
a study file's `[check]` table, which makes `pfr study` exit like `pfr check`."""

from __future__ import annotations

import shlex
import shutil
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


def _pfr_lines(workflow: dict[Any, Any]) -> list[list[str]]:
    steps = workflow["jobs"]["pfr-gate"]["steps"]
    lines = [line for s in steps for line in str(s.get("run", "")).splitlines()]
    return [shlex.split(line) for line in lines if line.strip().startswith("pfr ")]


def test_workflow_parses_and_runs(pfr_cli: Callable[..., Any], tmp_path: Path) -> None:
    wf = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert "pull_request" in triggers
    steps = wf["jobs"]["pfr-gate"]["steps"]
    assert all("uses" in s or "run" in s for s in steps)
    commands = _pfr_lines(wf)
    assert [c[1] for c in commands] == ["run", "check", "report"]
    check = commands[1]
    assert "P4=" in " ".join(check) and "--junit" in check
    _demo(tmp_path / "data")
    summary = tmp_path / "summary.md"
    for argv in commands:
        res = pfr_cli(*argv[1:], cwd=tmp_path, env={"GITHUB_STEP_SUMMARY": str(summary)})
        assert res.returncode == 0, (argv, res.stdout, res.stderr)
    junit = ET.parse(tmp_path / check[check.index("--junit") + 1]).getroot()
    assert len(junit.findall(".//testcase")) == 4 and not junit.findall(".//failure")
    assert "| model |" in summary.read_text(encoding="utf-8")
    assert (tmp_path / "pfr-report.html").stat().st_size > 10_000


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
