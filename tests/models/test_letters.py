"""The letter-scoring rules on their own: symbol forms and tokens (with SmolLM2's real tokenizer), the
context check, and the one way each kind of Scores is built (exact, top-K by id, top-K by text)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.lm import letters
from pfr.models.lm.letters import SymbolTokens, answer_form, check_context


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """SmolLM2's tokenizer from the dequantised preset folder (made on first use, then read in a second)."""
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from transformers import AutoTokenizer

    from pfr.models.lm.gguf_cache import ensure_converted, smollm2_135m

    return AutoTokenizer.from_pretrained(ensure_converted(smollm2_135m()))


def test_answer_form_follows_the_prompt_end() -> None:
    assert answer_form("Answer:", "A") == " A"
    assert answer_form("<|im_start|>assistant\n", "A") == "A"
    assert answer_form("", "A") == "A"


def test_symbol_tokens_are_the_tokens_the_model_writes(tokenizer: Any) -> None:
    calls: list[str] = []

    def tokenize(text: str) -> list[int]:
        calls.append(text)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    symbols = SymbolTokens(tokenize, "smollm2", pieces=tokenizer.convert_ids_to_tokens)
    prompt = "Options:\nA. x\nB. y\n\nAnswer:"
    ids = symbols.ids(prompt, "AB", "r1")
    assert ids == [tokenizer(" A", add_special_tokens=False)["input_ids"][-1],
                   tokenizer(" B", add_special_tokens=False)["input_ids"][-1]]  # fmt: skip
    assert tokenizer.convert_ids_to_tokens(ids) == ["ĠA", "ĠB"]
    n = len(calls)
    assert symbols.ids(prompt, "BA", "r2") == ids[::-1] and len(calls) == n  # cached per prompt end
    chat = symbols("<|im_start|>assistant\n", "A")
    assert tokenizer.convert_ids_to_tokens([chat]) == ["A"]  # no space after whitespace


def test_a_symbol_of_two_tokens_is_refused_in_one_line(tokenizer: Any) -> None:
    symbols = SymbolTokens(lambda t: tokenizer(t, add_special_tokens=False)["input_ids"], "smollm2",
                           pieces=tokenizer.convert_ids_to_tokens)  # fmt: skip
    message = r"^request q7: option symbol '0' is not one token after the prompt in smollm2's vocabulary "
    with pytest.raises(ModelError, match=message + r"\(' 0' → \['Ġ', '0'\]\); use fewer options"):
        symbols("Answer:", "0", "q7")


def test_context_check_names_the_limit() -> None:
    check_context(99, 100, "m", "r")
    check_context(10**6, None, "m", "r")  # no limit known: nothing to check
    with pytest.raises(ModelError, match=r"request r: prompt is 100 tokens, over m's context length n_ctx=100 "
                                         r"\(prompt \+ 1 answer token must fit; raise n_ctx\)"):  # fmt: skip
        check_context(100, 100, "m", "r", "raise n_ctx", label="n_ctx=100")


def test_exact_scores_from_a_vector_or_a_map() -> None:
    vector = [math.log(p) for p in (0.5, 0.25, 0.125, 0.125)]
    s = letters.exact_scores(vector, [1, 0], {"prompt_tokens": 7})
    assert isinstance(s, Scores)
    assert s.logits == (math.log(0.25), math.log(0.5)) and s.censored == (False, False)
    assert s.meta == {"prompt_tokens": 7, "option_mass": pytest.approx(0.75)}
    assert list(s.meta) == ["prompt_tokens", "option_mass"]  # the caller's fields first
    m = letters.exact_scores({3: -1.0, 9: -2.0}, [9, 3], mass=False)
    assert m.logits == (-2.0, -1.0) and m.meta == {}
    own = letters.exact([-1.0], mass=0.5)  # a backend's own sum (on its device) is kept as given
    assert own.meta == {"option_mass": 0.5}


def test_topk_by_id_censors_missing_options_at_the_kth_value() -> None:
    s = letters.topk_id_scores({5: -0.5, 6: -1.5, 7: float("-inf")}, [6, 8, 5], {"cached_tokens": 3})
    assert s.logits == (-1.5, -1.5, -0.5) and s.censored == (False, True, False)
    assert s.meta == {"cached_tokens": 3, "returned": 3, "censored": 1}
    with pytest.raises(ValueError):
        letters.topk_id_scores({1: float("-inf")}, [1])


def test_topk_by_text_maps_forms_and_merges() -> None:
    top = [(" A", -1.0), ("A", -2.0), ("\u2581B", -3.0), ("\n", -0.5), (" C.", -4.0), ("", -5.0)]
    s = letters.topk_text_scores(top, ["A", "B", "C", "D"], "max")
    assert s.logits == (-1.0, -3.0, -5.0, -5.0) and s.censored == (False, False, True, True)
    assert s.meta == {"returned": 6, "censored": 2}
    summed = letters.topk_text_scores(top, ["A"], "sum")
    assert summed.logits[0] == pytest.approx(math.log(math.exp(-1.0) + math.exp(-2.0)))
    with pytest.raises(ValueError):
        letters.topk_text_scores([], ["A"])
