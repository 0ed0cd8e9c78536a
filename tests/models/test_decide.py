"""The shared pieces of ``decide=generate|choice`` (:mod:`pfr.models.decide`) and the registry's dispatch."""

from __future__ import annotations

import json
from typing import Any

import pytest

import pfr
from pfr.errors import ModelError
from pfr.models.decide import Decoding, choice_grammar, choice_schema, decision, decoding_from, read_choice
from pfr.models.registry import load_model


@pytest.fixture(scope="module")
def request_() -> Any:
    return pfr.build("demo", panel="main", limit=1)[0]


def test_decoding_options_and_identity() -> None:
    assert decoding_from({}, "hf:") is None and decoding_from({"decide": "scores"}, "hf:") is None
    d = decoding_from({"decide": "generate", "max_tokens": "4", "seed": "3", "gen_temperature": "0.5"}, "hf:")
    assert d == Decoding("generate", 4, 3, 0.5)
    assert d.identity == {"decide": "generate", "parse_rule": 1,
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
    assert ok.label_only and ok.choice == 1 and ok.meta == {"raw": json.dumps({"answer": syms[1]}), "invalid": False}
    bad = decision("{}", request_, "choice")
    assert bad.choice == -1 and bad.meta["invalid"] is True


def test_registry_refuses_a_mode_a_backend_lacks() -> None:
    with pytest.raises(ModelError, match=r"decide=generate is not available for baseline: \(it is for openai:"):
        load_model("baseline:random", {"decide": "generate"})
    assert load_model("baseline:random", {"decide": "scores"}).identity["backend"] == "baseline"
