"""docs/before-release.md stays runnable: every ``pfr`` command in its code blocks names a command and
options that exist, with values the option parser accepts, and its study file is a valid one."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from typer._click.exceptions import ClickException
from typer.main import get_command

from pfr.cli import app

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "before-release.md"


def commands(text: str) -> list[list[str]]:
    """The ``pfr …`` lines of the fenced code blocks (a YAML ``run:`` step included), continuations
    joined, comments dropped, as argument lists."""
    out = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = re.sub(r"^\s*(?:-\s+)?(?:run:\s*)?", "", line)
            if line.startswith("pfr "):
                out.append(shlex.split(line, comments=True)[1:])
    return out


def problems(argv: list[str], group: Any) -> list[str]:
    """What makes ``pfr ARGV`` fail to parse: an unknown command, option or value (nothing is run)."""
    cmd = group.commands.get(argv[0])
    if cmd is None:
        return [f"pfr {argv[0]}: no such command"]
    try:
        cmd.make_context(f"pfr {argv[0]}", list(argv[1:]), resilient_parsing=False)
    except ClickException as exc:
        return [f"pfr {' '.join(argv)}: {exc.format_message()}"]
    return []


def test_the_page_is_linked() -> None:
    assert "(docs/before-release.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(before-release.md)" in (ROOT / "docs" / "ci-gate.md").read_text(encoding="utf-8")


def test_every_command_of_the_page_parses() -> None:
    argvs = commands(PAGE.read_text(encoding="utf-8"))
    assert {a[0] for a in argvs} >= {"run", "compare", "check", "export", "import"}
    group = get_command(app)
    found = [p for argv in argvs for p in problems(argv, group)]
    assert found == []
    gate = next(a for a in argvs if a[0] == "check")
    assert {"--baseline", "--max-drop", "--max-rise", "--junit"} <= set(gate)


def test_the_check_is_live() -> None:
    """A renamed option or a command that is gone is found."""
    group = get_command(app)
    assert problems(["check", "runs/v2", "--baseline", "runs/v1", "--max-fall", "P4=0.02"], group)
    assert problems(["gate", "runs/v2"], group)
    assert problems(["run", "-m", "minilm-router", "--limit", "many"], group)
    assert commands("```bash\npfr check a --baseline b \\\n  --junit x.xml   # note\n```\n") == [
        ["check", "a", "--baseline", "b", "--junit", "x.xml"]
    ]


def test_the_study_file_of_the_page_loads(tmp_path: Path) -> None:
    from pfr.studies import load_study

    [toml] = re.findall(r"^```toml\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    (tmp_path / "candidate.toml").write_text(toml, encoding="utf-8")
    study = load_study(tmp_path / "candidate.toml")
    assert study.check.baseline == str(tmp_path / "runs" / "v1")
    assert study.check.drops and study.check.rises
    assert pytest.approx(0.3) == float(study.models[0].options["tau"])
