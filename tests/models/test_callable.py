"""``python:`` models: identity on the resolved file, ``version=``, label-only answers."""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.errors import ModelError
from pfr.models.registry import load_model

SOURCE = '''
def scores(request):
    """One log-score per option: the fallback wins when the text is short."""
    return [1.0 if (o.is_fallback == (len(request.text) < 40)) else 0.0 for o in request.options]


def label(request):
    """A label-only answer: the label of the option chosen."""
    return request.options[len(request.text) % len(request.options)].label


def symbol(request):
    return request.options[len(request.text) % len(request.options)].symbol


def index(request):
    return len(request.text) % len(request.options)


def nonsense(request):
    return "no such option"


def sometimes_unknown(request):
    """An option's label, but a label that is no option for the second text under C, an index too far under U."""
    if request.index == 1:
        return "unknown_intent" if request.definition == "C" else len(request.options)
    return request.options[len(request.text) % len(request.options)].label
'''


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    path = tmp_path / "user" / "decide.py"
    path.parent.mkdir()
    path.write_text(SOURCE)
    return path


@pytest.fixture(scope="module")
def demo() -> list[Any]:
    return pfr.build("demo", panel="main", limit=3)


def test_relative_and_absolute_paths_are_one_model(user_file: Path, demo: list[Any], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    store = tmp_path / "s"
    first = pfr.run(f"python:{user_file}:scores", demo, store, progress=False)
    monkeypatch.chdir(user_file.parent.parent)
    relative = os.path.join("user", "decide.py")
    again = pfr.run(f"python:{relative}:scores", demo, store, progress=False)
    assert first.scored == len(demo) and again.scored == 0 and again.cached == len(demo)
    assert load_model(f"python:{relative}:scores").identity == load_model(f"python:{user_file}:scores").identity


def test_version_is_part_of_the_identity(user_file: Path, demo: list[Any], tmp_path: Path) -> None:
    plain = load_model(f"python:{user_file}:scores").identity
    v1 = load_model(f"python:{user_file}:scores", {"version": "router-2026-11"}).identity
    assert "version" not in plain and v1["version"] == "router-2026-11" and v1 != plain
    store = tmp_path / "v"
    pfr.run(f"python:{user_file}:scores", demo, store, options={"version": "a"}, progress=False)
    assert pfr.run(f"python:{user_file}:scores", demo, store, options={"version": "b"}, progress=False).scored == len(
        demo
    )


@pytest.mark.parametrize("func", ["label", "symbol", "index"])
def test_label_only_answers_are_stored_as_choices(user_file: Path, demo: list[Any], tmp_path: Path, func: str) -> None:
    store = tmp_path / func
    pfr.run(f"python:{user_file}:{func}", demo, store, progress=False)
    expected = {r.request_id: len(r.text) % len(r.options) for r in demo}
    with sqlite3.connect(store / "results.sqlite") as con:
        rows = list(con.execute("SELECT q.request_id, r.choice, r.logprobs, r.meta FROM results r "
                                "JOIN requests q ON q.request_key = r.request_key"))  # fmt: skip
    assert {rid: c for rid, c, _, _ in rows} == expected
    assert all(json.loads(lp) == [] and json.loads(m)["label_only"] for _, _, lp, m in rows)


def test_an_unknown_label_is_one_line_under_strict(user_file: Path, demo: list[Any]) -> None:
    with pytest.raises(ModelError) as err:
        load_model(f"python:{user_file}:nonsense", {"strict": "true"}).score(demo[:1])
    msg = str(err.value)
    assert "'no such option' is neither the label nor the symbol" in msg and demo[0].request_id in msg
    assert "\n" not in msg
    (s,) = load_model(f"python:{user_file}:nonsense").score(demo[:1])
    assert (s.choice, s.meta) == (-1, {"raw": "no such option", "invalid": True, "parse": "unknown-label"})


def test_an_answer_naming_no_option_is_invalid_and_the_run_finishes(user_file: Path, tmp_path: Path,
                                                                    pfr_cli: Any) -> None:  # fmt: skip
    spec = f"python:{user_file}:sometimes_unknown"
    args = ["run", "-m", spec, "-d", "demo", "--limit", "3", "--no-progress"]
    proc = pfr_cli(*args, "-s", str(tmp_path / "s"))
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(tmp_path / "s" / "results.sqlite") as con:
        rows = [(c, json.loads(m)) for c, m in con.execute("SELECT choice, meta FROM results")]
    assert len(rows) == 12
    bad = [(m["raw"], m["parse"], c) for c, m in rows if m.get("invalid")]  # RU, RC, FU, FC of one text
    assert Counter(bad) == {(16, "out-of-range", -1): 2, ("unknown_intent", "unknown-label", -1): 2}
    assert all(0 <= c < 16 and "parse" not in m for c, m in rows if not m.get("invalid"))
    (s,) = json.loads(pfr_cli("report", str(tmp_path / "s"), "--format", "json", "--draws", "100").stdout)["settings"]
    assert s["invalid"]["all"] == 4 / 12 and s["parses"] == {"unknown-label": 2, "out-of-range": 2}
    text = pfr_cli("report", str(tmp_path / "s"), "--draws", "100").stdout
    assert "33.3% invalid answers" in text and "unknown-label 2, out-of-range 2 (invalid: " in text

    strict = pfr_cli(*args, "-s", str(tmp_path / "strict"), "--model-opt", "strict=true")
    assert strict.returncode == 2, strict.stderr
    lines = strict.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in strict.stderr and "python model" in lines[0], strict.stderr
