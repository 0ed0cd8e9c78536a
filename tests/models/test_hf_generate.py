"""``hf: decide=generate`` runs a batch together (issue 33 item 1): the chunks of the prompts that the
requests share are computed once, and each request's new tokens are the same token ids alone, in a
batch and in any order, greedy or sampled. Real SmolLM2-135M (the ``smollm2-135m`` preset), float32."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

import pfr
from pfr.models.decide import Decoding
from pfr.models.generating import GeneratingLM
from pfr.models.registry import load_model

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def demo() -> list[Any]:
    return pfr.build("demo", panel="main", limit=2)  # two texts, four requests each


@pytest.fixture(scope="module")
def smol() -> Iterator[GeneratingLM]:
    backend = load_model("smollm2-135m", {"decide": "generate", "dtype": "float32", "max_tokens": "6"})
    assert isinstance(backend, GeneratingLM)
    yield backend
    backend.close()


def _ids(backend: GeneratingLM, reqs: list[Any], decoding: Decoding) -> list[list[int]]:
    """The new token ids of each request, one call for the whole list."""
    from pfr.models.hf.decoding import generate_tokens

    lm: Any = backend.lm
    return generate_tokens(lm, [lm.encode(lm.prompt(r)) for r in reqs], decoding)


def test_the_same_token_ids_alone_in_a_batch_and_in_any_order(smol: GeneratingLM, demo: list[Any]) -> None:
    lm: Any = smol.lm
    greedy = smol.decoding
    lm.clear_prefixes()
    before = lm.stats["computed_tokens"]
    batch = _ids(smol, demo, greedy)
    together = lm.stats["computed_tokens"] - before
    assert all(batch) and len(batch) == len(demo)
    shuffled = list(range(len(demo)))
    random.Random(3).shuffle(shuffled)
    assert shuffled != sorted(shuffled)
    again = _ids(smol, [demo[i] for i in shuffled], greedy)  # another order, the shared chunks kept from before
    assert [again[shuffled.index(i)] for i in range(len(demo))] == batch
    alone = []
    before = lm.stats["computed_tokens"]
    for r in reversed(demo):
        lm.clear_prefixes()
        alone.append(_ids(smol, [r], greedy)[0])
    assert alone[::-1] == batch
    # the shared chunks ran once in the batch: less than half of what the requests computed alone
    assert together < 0.5 * (lm.stats["computed_tokens"] - before)
    lm.prefix_cache = False  # nothing shared or kept: the same computation per request, the same ids
    try:
        assert _ids(smol, demo[:3], greedy) == batch[:3]
    finally:
        lm.prefix_cache = True
    # the backend's answers are these ids decoded; the answer text ends with its first line
    texts = smol.answers(demo)
    assert texts == [lm.tokenizer.decode(t, skip_special_tokens=True) for t in batch]
    assert all("\n" not in t.strip() for t in texts)


def test_sampled_answers_are_per_request_reproducible(smol: GeneratingLM, demo: list[Any]) -> None:
    sampled = Decoding("generate", max_tokens=6, seed=11, temperature=1.5)
    batch = _ids(smol, demo[:4], sampled)
    smol.lm.clear_prefixes()  # type: ignore[attr-defined]
    assert [_ids(smol, [r], sampled)[0] for r in demo[:4]] == batch
    assert _ids(smol, demo[:4][::-1], sampled)[::-1] == batch


def test_batched_greedy_decoding_is_the_exact_path_and_hands_it_close_steps(
    smol: GeneratingLM, demo: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Greedy float32 requests decode together (the prompts' trie, then one pass per new token for all
    of them); the model's first batch sets the logit gap below which a request goes to the exact path."""
    from pfr.models.hf import decoding

    lm: Any = smol.lm
    greedy = smol.decoding
    prompts = [lm.encode(lm.prompt(r)) for r in demo]
    exact = [decoding.exact_tokens(lm, [p], greedy)[0] for p in prompts]  # each alone, fixed chunks
    lm._gen_close = None
    lm.clear_prefixes()
    assert decoding.generate_tokens(lm, prompts, greedy) == exact  # the first batch: calibrated on it
    assert decoding.CLOSE <= lm._gen_close < 0.1
    fast, margins = decoding._batched(lm, prompts, greedy)
    close = [i for i, m in enumerate(margins) if m < lm._gen_close]
    assert len(close) < len(prompts) // 2  # the batch did the work
    assert [t for i, t in enumerate(fast) if i not in close] == [t for i, t in enumerate(exact) if i not in close]
    monkeypatch.setattr(decoding, "CLOSE", float("inf"))  # every step close: every request on the exact path
    lm._gen_close = None
    assert decoding.generate_tokens(lm, prompts[::-1], greedy) == exact[::-1]
    assert lm._gen_close == float("inf")
