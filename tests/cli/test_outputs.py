"""What the command line shows and writes: readable ``--help`` placeholders, the report format taken
from ``--out``'s suffix, and output files that go only into folders that exist."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from pfr import api
from pfr.cli.app import command

from .inprocess import run_pfr as _pfr


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("outputs") / "store"
    api.run("baseline:oracle", api.build("demo", "main", limit=6), path, progress=False)
    return path


COMMANDS = sorted(command().commands)


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_help_shows_readable_placeholders(name: str, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """No Python type (``<bool>``, ``<list[Path]>``, ``<str>``) in any command's help: flags show no
    placeholder, arguments a name (``STORE...``), options what they take."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = _pfr(capsys, *([name] if name else []), "--help")
    assert code == 0 and err == "", err
    assert not re.search(r"<[\w\[\]|, ]+>", out), out
    rows = {m.group(1): line for line in out.splitlines() if (m := re.match(r"^│[* ]*(--[a-z-]+) ", line))}
    assert re.search(r"--help +Show this message", rows["--help"]), rows["--help"]
    for param in (command().commands[name] if name else command()).params:
        if getattr(param, "is_flag", False) or not param.opts[0].startswith("--"):
            continue
        assert re.search(r" [A-Z][A-Z=]* ", rows[param.opts[0]].split(param.opts[0], 1)[1]), rows[param.opts[0]]


def test_help_names_arguments_and_repeatable_options(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("COLUMNS", "200")
    _, out, _ = _pfr(capsys, "check", "--help")
    assert "Usage: pfr check [OPTIONS] STORE..." in out
    assert re.search(r"│ \* +STORE\.\.\. +one or more results stores", out), out
    assert re.search(r"--min +METRIC=VALUE ", out) and re.search(r"--junit +PATH ", out), out
    _, out, _ = _pfr(capsys, "run", "--help")
    assert re.search(r"--model-opt +KEY=VALUE ", out) and re.search(r"--dry-run +print", out), out
    assert re.search(r"--progress +--no-progress +\[default", out), out


@pytest.mark.parametrize(
    ("suffix", "check"),
    [
        (".html", lambda t: t.startswith("<!DOCTYPE html>") or t.lower().startswith("<!doctype html>")),
        (".md", lambda t: "### Table 1" in t),
        (".json", lambda t: json.loads(t)["settings"][0]["model"] == "baseline:oracle"),
        (".csv", lambda t: next(csv.reader(io.StringIO(t)))[:2] == ["model", "dataset"]),
        (".tex", lambda t: r"\begin{tabular}" in t),
        (".txt", lambda t: t.startswith("Summary\n") and "Table 1. PFR results" in t),
        (".HTML", lambda t: "<html" in t.lower()),
    ],
)
def test_report_takes_the_format_from_the_out_suffix(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, check: object
) -> None:
    out = tmp_path / f"report{suffix}"
    code, _, err = _pfr(capsys, "report", str(store), "--draws", "100", "--out", str(out))
    assert code == 0, err
    assert callable(check) and check(out.read_text(encoding="utf-8")), out.read_text(encoding="utf-8")[:300]


def test_format_wins_over_the_suffix_and_an_unknown_suffix_is_refused(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    code, _, err = _pfr(capsys, "report", str(store), "--draws", "100", "--format", "text", "--out", str(out))
    assert code == 0 and out.read_text(encoding="utf-8").startswith("Summary\n"), err
    for name, what in (("report.pdf", "the suffix .pdf"), ("report", "no suffix")):
        code, _, err = _pfr(capsys, "report", str(store), "--out", str(tmp_path / name))
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
        assert lines[0].startswith(f"pfr: error: --out {tmp_path / name}: {what} names no report format"), lines[0]
        assert "--format" in lines[0] and ".html" in lines[0]
        assert not (tmp_path / name).exists()
    code, out_text, err = _pfr(capsys, "report", str(store), "--draws", "100")
    assert code == 0 and out_text.startswith("Summary\n"), err  # stdout: text, as before


def test_output_files_go_only_into_folders_that_exist(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--junit, --out and --figures with a missing folder: exit 2, one line naming the folder, before
    any work, and no folder created."""
    missing = tmp_path / "no-such-folder"
    cases = [
        ("check", str(store), "--min", "P4=0.5", "--draws", "100", "--junit", str(missing / "gate.xml")),
        ("report", str(store), "--draws", "100", "--out", str(missing / "r.html")),
        ("report", str(store), "--draws", "100", "--figures", str(missing / "figs")),
        ("build", "-d", "demo", "--limit", "2", "--out", str(missing / "reqs.jsonl")),
        ("export", str(store), "--out", str(missing / "rows.jsonl")),
        ("export", str(store), "--format", "lm-eval", "--out", str(missing / "task")),
        ("demo", "--model", "baseline:oracle", "--out", str(missing / "demo")),
    ]
    for args in cases:
        code, out, err = _pfr(capsys, *args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and "Traceback" not in err, (args, err)
        assert f"the folder {missing} does not exist; create it first" in lines[0], lines[0]
        assert args[-2] in lines[0] and out == "", (args, out)
        assert not missing.exists(), args
    afile = tmp_path / "a-file"
    afile.write_text("x")
    code, _, err = _pfr(capsys, "check", str(store), "--min", "P4=0.5", "--junit", str(afile / "gate.xml"))
    assert code == 2 and f"{afile} is not a folder" in err, err
    # an existing folder is written as before
    code, _, err = _pfr(capsys, "check", str(store), "--min", "P4=0.5", "--draws", "100", "--junit",
                        str(tmp_path / "gate.xml"))  # fmt: skip
    assert code == 0 and (tmp_path / "gate.xml").read_text(encoding="utf-8").startswith("<?xml"), err
