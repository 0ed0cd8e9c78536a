"""``decide=generate``/``choice`` on the in-process llama.cpp backend (real SmolLM2 GGUF): the prefix a
text's requests share is evaluated once, and a request's answer is the same alone, in a batch, in any
order and with ``prefix_reuse=off`` (one pass from an empty cache, the evaluation before the reuse)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from pfr.models.decide import Decoding
from pfr.models.generating import GeneratingLM
from pfr.models.llamacpp.backend import CHUNK, prompt_cuts

if os.environ.get("PFR_REQUIRE_LLAMACPP") != "1":  # under `make test` a missing wheel fails collection
    pytest.importorskip("llama_cpp")

pytestmark = [pytest.mark.slow, pytest.mark.llamacpp]

DECODINGS = {
    "greedy": Decoding("generate"),
    "seeded": Decoding("generate", seed=3, temperature=0.8),
    "choice": Decoding("choice"),
}


@pytest.fixture
def lm(llama_inproc: Any) -> Iterator[Any]:
    yield llama_inproc
    llama_inproc.prefix_reuse = True


def raw(backend: GeneratingLM, requests: list[Any]) -> list[str]:
    return [s.meta["raw"] for s in backend.score(requests)]


def test_prompt_cuts_end_on_chunks_and_never_leave_a_short_last_call() -> None:
    assert prompt_cuts(1) == [1] and prompt_cuts(2 * CHUNK - 1) == [2 * CHUNK - 1]
    assert prompt_cuts(2 * CHUNK) == [CHUNK, 2 * CHUNK]
    for n in range(1, 5 * CHUNK):
        cuts = prompt_cuts(n)
        assert cuts[-1] == n and all(c % CHUNK == 0 for c in cuts[:-1])
        assert min(n, CHUNK) <= n - ([0, *cuts][-2]) < 2 * CHUNK


@pytest.mark.parametrize("how", list(DECODINGS))
def test_answers_are_the_same_alone_in_a_batch_in_any_order(lm: Any, llama_trec8: list[Any], how: str) -> None:
    backend = GeneratingLM(lm, DECODINGS[how])
    text = llama_trec8[:4]  # one text's four requests
    before = (lm.tokens_prompt, lm.tokens_evaluated)
    batch = raw(backend, text)
    prompt, evaluated = lm.tokens_prompt - before[0], lm.tokens_evaluated - before[1]
    # they share the instruction, the inventory and the input: computed once
    assert evaluated < 0.6 * prompt, (evaluated, prompt)
    assert raw(backend, text[::-1])[::-1] == batch
    lm.llm.reset()  # alone, from an empty cache
    assert raw(backend, [text[2]]) == [batch[2]]
    if how == "choice":
        assert all(a in [o.symbol for o in r.options] for a, r in zip(batch, text))


@pytest.mark.parametrize("how", ["greedy", "choice"])
def test_reuse_keeps_the_answers_of_one_pass(lm: Any, llama_trec8: list[Any], how: str) -> None:
    backend = GeneratingLM(lm, DECODINGS[how])
    text = llama_trec8[4:]
    reused = raw(backend, text)
    lm.prefix_reuse = False  # each prompt in one call from an empty cache: the evaluation before the reuse
    before = (lm.tokens_prompt, lm.tokens_evaluated)
    assert raw(backend, text) == reused
    assert lm.tokens_evaluated - before[1] == lm.tokens_prompt - before[0]
