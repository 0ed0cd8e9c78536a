"""The one rule for an invalid answer (docs/method.md §6.1), end to end: a model that answers garbage to
every request gets A+ = A− = J = P4 = 0, F+ = 0, DR-R = DR-F = 1 and INV = 1 on every task (direct,
other designs, classify-then-map, both policies) and in every format, and the gate reads INV.

The model is a real generating backend (``openai:… decide=generate``) against an OpenAI-compatible
server on 127.0.0.1 that answers every prompt with text that names no option, so every stored
result is choice -1 with ``meta.invalid`` through the real parse rule and store."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pfr
from models.completions import Completions
from pfr import api
from pfr.design.types import Design
from pfr.run.store import Store

#: every answer the server gives: no symbol, no label
GARBAGE = "I cannot tell"

#: (dataset, panel, design) of every task the store holds
TASKS = [
    ("demo", "main", Design()),
    ("demo", "main", Design(wording=2)),  # with direct: a pooled setting (wording pairs) too
    ("demo", "main", Design(membership=True)),
    ("demo", "main", Design(task="classify-then-map")),
    ("demo", "main", Design(task="category-policy")),
    ("trec", "policy", Design(task="quality-cost")),
    ("trec", "boundary-tie", Design(task="quality-cost")),
]
N = 4  # texts per task


@pytest.fixture(scope="module")
def garbage_store(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[Path]:
    store = tmp_path_factory.mktemp("garbage") / "store"
    srv = Completions(lambda prompt: GARBAGE)  # every prompt answered with GARBAGE
    try:
        for dataset, panel, design in TASKS:
            reqs = pfr.build(dataset, panel, design, data_dir=data_dir, limit=N)
            pfr.run(f"openai:garbage@{srv.url}", reqs, store, options={"decide": "generate"}, progress=False)
    finally:
        srv.close()
    yield store


#: every metric's value for a model whose every answer is invalid
EXPECTED = {
    **{f"{m}_{d}": 0.0 for m in ("A+", "A-", "F+", "J", "B") for d in "UC"},
    "P4": 0.0, "DR_R": 1.0, "DR_F": 1.0,
    "INV": 1.0, "INV_RU": 1.0, "INV_RC": 1.0, "INV_FU": 1.0, "INV_FC": 1.0,
}  # fmt: skip


def test_the_store_holds_only_invalid_answers(garbage_store: Path) -> None:
    with Store(garbage_store, create=False) as st:
        results = list(st.results())
    assert len(results) == N * (4 * (len(TASKS) - 1) + 1)  # a reference request is one per text
    assert all(r.choice == -1 and r.meta["invalid"] is True and r.meta["raw"] == GARBAGE for r in results)


def test_every_task_and_design_scores_garbage_as_no_option(garbage_store: Path) -> None:
    data = json.loads(api.report([garbage_store], "json", draws=200))
    settings = data["settings"] + data.get("pooled", [])
    designs = {s["design"] for s in settings}
    assert {"direct", "wording=2", "membership", "task=classify-then-map", "task=category-policy",
            "task=quality-cost"} <= designs, designs  # fmt: skip
    assert any(s.get("pooled_over") for s in data.get("pooled", []))
    assert len(data["settings"]) == len(TASKS)
    for s in settings:
        where = (s["dataset"], s["panel"], s["design"])
        for metric, value in EXPECTED.items():
            assert s[metric]["value"] == value, (where, metric)
            assert (s[metric]["lo"], s[metric]["hi"]) == (value, value), (where, metric)
        assert s["n"] == N and all(d == 0 for d in s["delta"].values() for d in [d["value"]])
        assert s["decomposition"] == {a: {"c2w": 0, "w2c": 0, "w2w": 0, "inv": N} for a in "RF"}, where
        assert s["invalid"] == {"all": 1.0, "RU": 1.0, "RC": 1.0, "FU": 1.0, "FC": 1.0}, where
        for t in s.get("tests", []):  # no fallback pick anywhere: no discordant pair
            assert (t["b"], t["c"], t["p"]) == (0, 0, 1.0), where
        if s["design"] == "task=classify-then-map":
            assert s["accuracy"]["value"] == 0.0
    for v in data["summary"]:  # the verdict: nobody sent to Other, every answer invalid
        assert "sent to" not in v["summary"].split("(INV)")[0], v["summary"]
        assert (
            "0 % of the inputs that should go to" in v["summary"]
            and "100 % of the answers name no option" in v["summary"]
        )


def test_csv_carries_the_same_numbers(garbage_store: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(api.report([garbage_store], "csv", draws=200))))
    assert len(rows) == len(TASKS)
    for row in rows:
        for metric, value in EXPECTED.items():
            assert float(row[metric]) == value and float(row[f"{metric}_lo"]) == value, (row["design"], metric)
        assert (row["R_inv"], row["F_inv"], row["R_w2w"], row["invalid"]) == (str(N), str(N), "0", "1.0")
        assert (row["F+_b"], row["F+_c"], row["A-_b"], row["A-_c"]) == ("0", "0", "0", "0")


def _markdown_table(text: str, title: str) -> list[dict[str, str]]:
    lines = text.split(f"### {title}", 1)[1].strip().split("\n\n", 1)[0].splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = lines[2:]
    return [dict(zip(head, (c.strip() for c in row.strip("|").split("|")))) for row in rows]


def test_text_markdown_latex_and_html_show_them(garbage_store: Path) -> None:
    md = api.report([garbage_store], "markdown", draws=200)
    table1 = _markdown_table(md, "Table 1. PFR results (%)")
    assert len(table1) == len(TASKS)
    for row in table1:
        for col in ("A+ U", "A+ C", "A− U", "A− C", "F+ U", "F+ C", "J U", "J C", "P4"):
            assert row[col] == "0.0", (row, col)
        assert (row["DR-R"], row["DR-F"]) == ("100.0", "100.0"), row
    invalid = _markdown_table(md, "Invalid answers (%)")
    assert len(invalid) == len(TASKS) + 1  # and the pooled setting
    assert all(row[c] == "100.0" for row in invalid for c in ("INV", "per request kind RU", "per request kind FC"))
    changes = _markdown_table(md, "Decision changes from U to C (texts)")
    assert all(row["gold-regular invalid"] == row["gold-fallback invalid"] == str(N) for row in changes)
    for fmt in ("text", "latex", "html"):
        out = api.report([garbage_store], fmt, draws=200)
        assert "Invalid answers" in out and "100.0% invalid answers" in out, fmt
        assert len(re.findall(r"100\.0", out)) >= 5 * len(TASKS), fmt
    text = api.report([garbage_store], "text", draws=200)
    table4 = text.split("Table 4. Policy decisions")[1].split("\n\n\n")[0]
    boundary = text.split("Boundary conditions")[1].split("\n\n\n")[0]
    assert "boundary-tie" in boundary and re.search(rf"\b{N}(\s+0){{6}}\b", boundary), boundary  # and no Defers
    assert re.search(rf"\bpolicy\s+{N}(\s+0){{4}}\s+{N}\s+{N}(\s+0){{3}}$", table4, re.M), table4  # none right, all DR


def test_the_gate_reads_inv_and_never_counts_invalid_as_fallback(garbage_store: Path, pfr_cli: Any) -> None:
    proc = pfr_cli("check", str(garbage_store), "--max", "INV=0.05", "--draws", "200", "--format", "json")
    assert proc.returncode == 1, proc.stderr
    checks = json.loads(proc.stdout)["checks"]
    assert len(checks) == len(TASKS) and all(c["metric"] == "INV" and c["value"] == 1.0 for c in checks)
    assert all(c["failing_inputs"] == N for c in checks)
    results = api.check([garbage_store], maxs=["F+=0", "INV_RU=1", "inv(fc)=1"], draws=200)
    assert results and all(r.passed for r in results)
    failed = api.check([garbage_store], mins=["A-=0.01"], draws=200)
    assert failed and not any(r.passed for r in failed)
    assert all(choice == "(invalid: no option)" for r in failed for f in r.failing for _, choice, _ in f.choices)
