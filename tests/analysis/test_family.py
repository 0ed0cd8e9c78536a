"""The primary Holm family on whatever design a user ran: a user CSV of six categories at ``-k 6``."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pfr.analysis.stats_tests import Family, direct_form


def test_direct_form() -> None:
    assert direct_form("direct") and direct_form("k=6") and direct_form("k=6;fallback=None")
    for name in ("membership", "k=6;membership", "wording=2", "task=classify-then-map", "k"):
        assert not direct_form(name), name


def test_primary_members() -> None:
    keys = [
        ("m", "a", "main", "direct"), ("m", "a", "main", "k=6"), ("m", "a", "main", "membership"),
        ("m", "b", "main", "k=6"), ("m", "b", "main", "k=6;membership"), ("m", "b", "development", "k=6"),
        ("n", "b", "main", "k=4;fallback=None"),
    ]  # fmt: skip
    assert Family().members(keys) == {("m", "a", "main", "direct"), ("m", "b", "main", "k=6"),
                                      ("n", "b", "main", "k=4;fallback=None")}  # fmt: skip
    assert Family("all").members(keys) == set(keys)


@pytest.fixture(scope="module")
def trec6(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """TREC's test questions with their six coarse classes, as a user would export them."""
    root = tmp_path_factory.mktemp("trec6")
    data, cats = root / "questions.csv", root / "classes.csv"
    with open(data_dir / "trec" / "TREC_10.label", encoding="latin-1") as f, open(data, "w", newline="") as out:
        w = csv.writer(out)
        w.writerow(["question", "intent"])
        for line in f:
            label, text = line.rstrip("\n").split(" ", 1)
            w.writerow([text, label.split(":")[0]])
    with open(data_dir / "trec" / "question_classes.tsv", encoding="utf-8") as f, open(cats, "w", newline="") as out:
        w = csv.writer(out)
        w.writerow(["id", "description"])
        for row in csv.DictReader(f, delimiter="\t"):
            if ":" not in row["label"]:
                w.writerow([row["label"], row["definition"]])
    return data, cats


def test_six_categories_at_k6_get_holm_p(
    trec6: tuple[Path, Path], pfr_cli: Callable[..., Any], tmp_path: Path, fickle_script: Path
) -> None:
    data, cats = trec6
    store = tmp_path / "store"
    run = pfr_cli("run", "-m", f"python:{fickle_script}:score", "-d", str(data), "--text-col", "question",
                  "--label-col", "intent", "--descriptions", str(cats), "-k", "6", "--limit", "120",
                  "--store", str(store), "--no-progress")  # fmt: skip
    assert run.returncode == 0, run.stderr
    res = pfr_cli("report", str(store), "--format", "json", "--draws", "200")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    [setting] = rep["settings"]
    assert setting["design"] == "k=6" and setting["n"] == 120
    assert rep["family"]["name"] == "primary" and rep["family"]["tests"] == 2
    assert "2 tests" in rep["family"]["description"]
    by_metric = {t["metric"]: t for t in setting["tests"]}
    for t in by_metric.values():
        assert t["p_holm"] is not None and t["p_holm"] >= t["p"]
    # the fickle model misses the fallback under C for half the texts: a real, significant U/C difference
    assert by_metric["A-"]["reject"] is True and by_metric["A-"]["p_holm"] < 1e-3
    text = pfr_cli("report", str(store), "--draws", "200").stdout
    assert "Holm family 'primary'" in text and "2 tests" in text


#: follows the assignment, except that under C it misses the fallback for half of the texts (by hash)
FICKLE = """
import hashlib


def score(req):
    scores = [-3.0 - 0.25 * i for i in range(len(req.options))]
    target = req.expected
    odd = int(hashlib.sha256(req.text_id.encode()).hexdigest(), 16) % 2
    if req.assignment == "F" and req.definition == "C" and odd:
        target = next(i for i in range(len(req.options)) if i != req.fallback_index)
    scores[target] = -0.5
    return scores
"""


@pytest.fixture(scope="module")
def fickle_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "fickle.py"
    path.write_text(FICKLE, encoding="utf-8")
    return path
