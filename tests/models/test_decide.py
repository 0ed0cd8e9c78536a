"""The shared pieces of ``decide=generate|choice`` (:mod:`pfr.models.decide`) and the registry's dispatch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.errors import ModelError
from pfr.models.decide import (
    INVALID_PARSES,
    PARSES,
    Decoding,
    Parsed,
    choice_grammar,
    choice_schema,
    decision,
    decoding_from,
    parse,
    parse_answer,
    read_choice,
    reason_counts,
)
from pfr.models.registry import load_model


@pytest.fixture(scope="module")
def request_() -> Any:
    return pfr.build("demo", panel="main", limit=1)[0]


def test_decoding_options_and_identity() -> None:
    assert decoding_from({}, "hf:") is None and decoding_from({"decide": "scores"}, "hf:") is None
    d = decoding_from({"decide": "generate", "max_tokens": "4", "seed": "3", "gen_temperature": "0.5"}, "hf:")
    assert d == Decoding("generate", 4, 3, 0.5)
    assert d.identity == {"decide": "generate", "parse_rule": 2,
                          "sampling": {"temperature": 0.5, "seed": 3, "max_tokens": 4}}  # fmt: skip
    with pytest.raises(ModelError, match="decide=choice is not available for hf:"):
        decoding_from({"decide": "choice"}, "hf:")
    with pytest.raises(ModelError, match="decide='vote': use scores, generate, choice"):
        decoding_from({"decide": "vote"}, "hf:")
    with pytest.raises(ModelError, match="max_tokens needs decide=generate"):
        decoding_from({"max_tokens": "3"}, "hf:")
    for bad in ({"seed": "x"}, {"gen_temperature": "-1"}, {"gen_temperature": "nan"}, {"max_tokens": "0"}):
        with pytest.raises(ModelError):
            decoding_from({"decide": "generate", **bad}, "hf:")


def test_constrained_answers_read_by_the_same_rule(request_: Any) -> None:
    syms = [o.symbol for o in request_.options]
    assert choice_schema(request_)["properties"]["answer"]["enum"] == syms
    assert choice_grammar(request_) == "root ::= " + " | ".join(json.dumps(s) for s in syms)
    assert read_choice('{"answer": "B"}') == "B" and read_choice('"C"') == "C" and read_choice("D.") == "D."
    ok = decision(json.dumps({"answer": syms[1]}), request_, "choice")
    assert ok.label_only and ok.choice == 1
    assert ok.meta == {"raw": json.dumps({"answer": syms[1]}), "invalid": False, "parse": "letter"}
    bad = decision("{}", request_, "choice")
    assert bad.choice == -1 and bad.meta["invalid"] is True and bad.meta["parse"] == "unparseable"


@pytest.fixture(scope="module")
def trec(data_dir: Path) -> Any:
    """A TREC request: A is Other, B HUM:title, C ENTY:lang, … (the labels a chat model writes after a letter)."""
    r = pfr.build("trec", "main", data_dir=data_dir, limit=1)[0]
    assert [(o.symbol, o.label) for o in r.options[:3]] == [("A", "Other"), ("B", "HUM:title"), ("C", "ENTY:lang")]
    return r


@pytest.mark.parametrize(
    ("answer", "choice", "reason"),
    [
        ("A. ENTY:lang", None, "contradiction"),  # the letter names Other, the label ENTY:lang (C)
        ("C) Other", None, "contradiction"),
        ("**B)** hum:title.", 1, "both"),
        ("B) HUM:title", 1, "both"),
        ("B HUM:title", 1, "both"),
        ("C ENTY:lang\nA", 2, "both"),  # only the first line counts
        ("ENTY:lang", 2, "label"),
        ("other.", 0, "label"),
        ("B", 1, "letter"),
        ("(B)", 1, "letter"),
        ("B. HUM:ti", 1, "letter"),  # a label cut short by max_tokens names no other option
        ("B: because it asks for a title", 1, "letter"),
        ("B because", None, "unparseable"),
        ("The answer is B", None, "unparseable"),
        ("DESC:manner", None, "unparseable"),  # a TREC label that is none of this request's options
        ("A - ENTY:lang", None, "unparseable"),
        ("", None, "unparseable"),
    ],
)
def test_every_parse_has_its_reason(trec: Any, answer: str, choice: int | None, reason: str) -> None:
    assert parse(answer, trec) == Parsed(choice, reason)
    assert parse_answer(answer, trec) == choice
    s = decision(answer, trec)
    assert s.meta == {"raw": answer, "invalid": choice is None, "parse": reason}
    assert s.choice == (-1 if choice is None else choice) and s.label_only
    assert (reason in INVALID_PARSES) is (choice is None) and reason in PARSES


def test_reasons_are_counted_in_a_fixed_order() -> None:
    metas = [{"parse": r} for r in ("unparseable", "letter", "unknown-label", "both", "letter", "zzz")]
    assert reason_counts([*metas, {}, {"raw": "B"}]) == {"letter": 2, "both": 1, "unparseable": 1,
                                                         "unknown-label": 1, "zzz": 1}  # fmt: skip
    assert reason_counts([{"invalid": False}]) == {}


def test_registry_refuses_a_mode_a_backend_lacks() -> None:
    with pytest.raises(ModelError, match=r"decide=generate is not available for baseline: \(it is for openai:"):
        load_model("baseline:random", {"decide": "generate"})
    assert load_model("baseline:random", {"decide": "scores"}).identity["backend"] == "baseline"
