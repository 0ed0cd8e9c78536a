"""The matched-length control (docs/method.md §4.2, Figure 8): a shared T1/T2 table, positive vs negative
wording, swapped group names; every pair checked for token count and category mentions, unmatched
pairs reported by the builder and refused by scoring unless kept."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.design.types import Design, Request
from pfr.errors import DesignError
from pfr.models.simple.callable import CallableModel
from pfr.run.matched import check_pairs, enforce, mentions

TABLE = re.compile(r"Membership table:\n((?:- .+: T[12]\n)+)(Choose .+)", re.S)
POS = "Choose Other if the input's category is marked {} in the membership table."
NEG = "Choose Other unless the input's category is marked {} in the membership table."


@pytest.fixture(scope="module")
def built(data_dir: Path) -> dict[str, list[Request]]:
    return {
        task: pfr.build("trec", "diagnostic", Design(task=task), data_dir=data_dir, limit=48)
        for task in ("category", "matched-length", "matched-length-swapped")
    }


@pytest.mark.parametrize(("task", "regular", "fallback"), [("matched-length", "T1", "T2"),
                                                           ("matched-length-swapped", "T2", "T1")])  # fmt: skip
def test_tables_and_wording(built: dict[str, list[Request]], task: str, regular: str, fallback: str) -> None:
    reqs, main = built[task], built["category"]
    assert len(reqs) == len(main) == 192
    for q, m in zip(reqs, main):
        assert (q.text_id, q.assignment, q.definition, q.options, q.expected) == (
            m.text_id,
            m.assignment,
            m.definition,
            m.options,
            m.expected,
        )  # fmt: skip  — the same draws as the main design
        match = TABLE.fullmatch(q.criterion)
        assert match, q.criterion[:200]
        table = dict(line[2:].split(": ") for line in match[1].splitlines())
        assert sorted(table) == sorted(
            c.id for c in q.inventory
        )  # the whole inventory, never the input's category alone
        offered = {o.category for o in q.options if not o.is_fallback}
        assert {c for c, g in table.items() if g == regular} == offered
        assert match[2] == (POS.format(fallback) if q.definition == "U" else NEG.format(regular))
    for i in range(0, len(reqs), 2):  # positive and negative of one assignment share the table
        u, c = reqs[i], reqs[i + 1]
        assert TABLE.fullmatch(u.criterion)[1] == TABLE.fullmatch(c.criterion)[1]  # type: ignore[index]


def test_swapped_names_are_the_second_comparison(built: dict[str, list[Request]]) -> None:
    a, b = built["matched-length"], built["matched-length-swapped"]
    for x, y in zip(a, b):
        swapped = x.criterion.replace("T1", "\x00").replace("T2", "T1").replace("\x00", "T2")
        assert swapped == y.criterion
    assert a[0].design == "task=matched-length" and b[0].design == "task=matched-length-swapped"


def test_pairs_match_in_word_tokens_and_mentions(built: dict[str, list[Request]]) -> None:
    for task in ("matched-length", "matched-length-swapped"):
        pairs = check_pairs(built[task])
        assert len(pairs) == 48 * 2 and all(p.matched for p in pairs)
        assert {p.tokenizer for p in pairs} == {"word tokens"}
        assert all(p.tokens[0] == p.tokens[1] > 100 for p in pairs)
    assert check_pairs(built["category"]) == []  # other tasks have no pairs


class _CharModel(CallableModel):
    """A python: model with a tokenizer of its own: one token per character."""

    def encode(self, prompt: str) -> list[int]:
        return [ord(ch) for ch in prompt]

    def prompt(self, request: Request) -> str | None:
        from pfr.models.lm.prompt import render

        return render(request)


@pytest.fixture()
def char_model(tmp_path: Path) -> Any:
    path = tmp_path / "m.py"
    path.write_text("def score(req):\n    return [0.0] + [-1.0] * (len(req.options) - 1)\n", encoding="utf-8")
    return _CharModel(str(path), "score")


def test_the_models_tokenizer_decides(built: dict[str, list[Request]], char_model: Any, tmp_path: Path) -> None:
    reqs = built["matched-length"]
    pairs = check_pairs(reqs, char_model)
    # "if" vs "unless": 4 characters more in every negative request
    assert pairs and all(p.tokens[1] - p.tokens[0] == len("unless") - len("if") for p in pairs)
    assert not any(p.matched for p in pairs) and {p.tokenizer for p in pairs} == {"tokens"}
    with pytest.raises(DesignError, match=r"96 matched-length pair\(s\) do not match .* --keep-unmatched"):
        pfr.run(char_model, reqs, tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()
    summary = pfr.run(char_model, reqs, tmp_path / "s", progress=False, keep_unmatched=True)
    assert summary.scored == len(reqs)
    assert len(enforce(reqs, char_model, keep_unmatched=True)) == 96


def test_category_mentions_are_checked(built: dict[str, list[Request]]) -> None:
    reqs = list(built["matched-length"][:4])
    gold = reqs[1].y
    reqs[1] = replace(
        reqs[1], criterion=reqs[1].criterion.replace("Choose Other unless", f"Unless {gold}, choose Other;")
    )
    pairs = check_pairs(reqs)
    assert [p.same_mentions for p in pairs] == [False, True]
    assert "different category mentions" in pairs[0].describe()
    with pytest.raises(DesignError, match="1 matched-length pair"):
        enforce(reqs, None)
    ids = ["NUM:dist", "NUM:dis", "LOC:city"]
    assert mentions("NUM:dist and NUM:dist, LOC:city.", ids) == (2, 0, 1)


def test_cli_build_reports_and_run_scores(pfr_cli, data_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "m.jsonl"
    proc = pfr_cli("build", "-d", "trec", "--panel", "diagnostic", "--task", "matched-length", "--limit", "8",
                   "-o", str(out), "--data-dir", str(data_dir))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "matched-length: 16 pairs checked (word tokens), 0 unmatched" in proc.stderr
    model = tmp_path / "m.py"
    model.write_text("def score(req):\n    return [0.0] + [-1.0] * (len(req.options) - 1)\n", encoding="utf-8")
    proc = pfr_cli("run", "--model", f"python:{model}:score", "--requests", str(out), "--store", str(tmp_path / "s"),
                   "--no-progress")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
