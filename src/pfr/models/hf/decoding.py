"""Generated answers on the Transformers backend (``hf: --model-opt decide=generate``).

A plain decoding loop rather than ``model.generate``: a model's ``generation_config`` may carry its
own sampling defaults (Qwen2.5's ``repetition_penalty``, ``top_k``, ``top_p``), and greedy here must
mean the argmax of the full-vocabulary next-token distribution, the same distribution the scoring
path reads its letters from. Sampling (``gen_temperature > 0``) draws from ``softmax(logits / T)``
with a generator seeded by ``seed`` for each request, so an answer does not depend on what came before.

**Shared prefixes once, answers independent of the batch.** The requests of a text share most of
their prompt (and all requests the instruction and inventory), so the prompt is run in chunks of
:data:`CHUNK` tokens cut at fixed positions (0, 32, 64, … of the prompt's own tokens), each a batch-1
forward over the keys and values of the chunks before it. A chunk's keys and values then depend only
on the tokens up to its end, computed by the same operations whichever request asks for them: a
chunk that requests share is computed once (the batch in prefix order, each branch point's cache kept
while a later request needs it, and the chunks every request of a call shares kept across calls) and
is bit-equal to the one a request alone would compute. Each request's last part of its prompt (at
most :data:`CHUNK` tokens) and its new tokens then run on their own, batch 1, on that cache. In float32
on a CPU a matrix product's rows can differ in their last bits with the number of rows (the kernels
block and order their sums by shape), so rows are never batched across requests: the same request
gives the same token ids alone, in any batch and in any order, by construction rather than by
tolerance. Decoding ends at ``max_tokens``, at an end-of-sequence token, or once the answer's first
line is written (the parse rule reads only that line, :func:`pfr.models.decide.parse`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pfr.models.decide import Decoding
from pfr.models.hf.plan import Node
from pfr.models.hf.trie import lcp

__all__ = ["CHUNK", "KEEP_PREFIXES", "generate_many", "generate_tokens", "stop_ids"]

#: tokens per prefill chunk: fewer forward passes with more, less recomputed at a branch point with fewer
CHUNK = 32
#: how many shared chunk caches (a call's common prefix) are kept between calls
KEEP_PREFIXES = 4


def stop_ids(model: Any, tokenizer: Any) -> set[int]:
    """The tokens that end an answer: the tokenizer's end of sequence and the model's (a chat model's
    end of turn, e.g. ``<|im_end|>``)."""
    out: set[int] = set()
    for ids in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(ids, int):
            out.add(ids)
        elif isinstance(ids, (list, tuple)):
            out.update(int(i) for i in ids)
    return out


def _floor(n: int) -> int:
    return n // CHUNK * CHUNK


def generate_many(backend: Any, prompts: Sequence[list[int]], decoding: Decoding) -> list[str]:
    """The answer after each prompt's token ids (:func:`generate_tokens`), decoded without special tokens."""
    decode = backend.tokenizer.decode
    return [str(decode(new, skip_special_tokens=True)) for new in generate_tokens(backend, prompts, decoding)]


def generate_tokens(backend: Any, prompts: Sequence[list[int]], decoding: Decoding) -> list[list[int]]:
    """Up to ``decoding.max_tokens`` new token ids after each prompt's token ids; ``backend`` is the
    :class:`~pfr.models.hf.backend.HFBackend` (its kept chunk caches are ``backend._gen_prefixes``)."""
    torch: Any = backend._torch
    n = len(prompts)
    out: list[list[int]] = [[] for _ in range(n)]
    if not n:
        return out
    order = sorted(range(n), key=lambda i: prompts[i])
    ids = [prompts[i] for i in order]
    share = backend.prefix_cache
    # in prefix order, what each prompt shares with the next: the branch points whose caches are kept
    nxt = [lcp([ids[k], ids[k + 1]]) if share else 0 for k in range(n - 1)] + [0]
    branch = {_floor(d) for d in nxt}
    common = _floor(min(lcp(ids), *(len(t) - 1 for t in ids))) if share and n > 1 else 0
    kept = backend._gen_prefixes
    stack: list[tuple[int, Any]] = []  # (chunk boundary, its cache) along the current prompt's path
    with torch.inference_mode():
        for k, i in enumerate(order):
            tokens = ids[k]
            last = _floor(len(tokens) - 1)  # the prompt's last chunk boundary: at least one token after it
            if k:
                shared = lcp([ids[k - 1], tokens]) if share else 0
                while stack and stack[-1][0] > shared:
                    stack.pop()
            at, cache = 0, None
            for b, c in reversed(stack):
                if b <= last:
                    at, cache = b, c
                    break
            if share:
                for key in list(kept):
                    if at < len(key) <= last and tuple(tokens[: len(key)]) == key:
                        at, cache = len(key), kept[key]
                        kept.move_to_end(key)
            while at < last:
                cache = backend._extend(cache, tokens[at : at + CHUNK])
                at += CHUNK
                if at in branch and at <= nxt[k]:
                    stack.append((at, cache))
                if at == common and common:
                    kept[tuple(tokens[:at])] = cache
                    while len(kept) > KEEP_PREFIXES:
                        kept.popitem(last=False)
            out[i] = _answer(backend, cache, tokens, at, decoding)
    return out


def _answer(backend: Any, cache: Any, tokens: list[int], at: int, decoding: Decoding) -> list[int]:
    """The answer after ``tokens``, whose first ``at`` are in ``cache`` (batch 1, or None when ``at`` is 0)."""
    torch: Any = backend._torch
    room = decoding.max_tokens if backend.context_limit is None else backend.context_limit - len(tokens)
    stop = stop_ids(backend.model, backend.tokenizer)
    sampler = None
    if decoding.temperature > 0:
        sampler = torch.Generator(device=backend._device).manual_seed(decoding.seed)
    step = _PackedSteps(backend, cache) if backend.packed is not None and cache is not None else _Steps(backend, cache)
    x = tokens[at:]
    new: list[int] = []
    for _ in range(min(decoding.max_tokens, room)):
        logits = step(x).double()
        backend._count(len(x), len(x))
        if sampler is None:
            token = int(logits.argmax())
        else:
            probs = torch.softmax(logits / decoding.temperature, dim=-1)
            token = int(torch.multinomial(probs, 1, generator=sampler))
        if token in stop:
            break
        new.append(token)
        if "\n" in str(backend.tokenizer.decode(new, skip_special_tokens=True)).lstrip():
            break  # the first line is written: the parse rule reads nothing after it
        x = [token]
    return new


class _Steps:
    """One request's forward passes through transformers' own forward, on a fork of its prefix cache."""

    def __init__(self, backend: Any, cache: Any) -> None:
        from transformers import DynamicCache

        from pfr.models.hf.cache import fork_cache

        self.backend = backend
        self.cache = fork_cache(cache, 1) if cache is not None else DynamicCache(config=backend.model.config)

    def __call__(self, tokens: list[int]) -> Any:
        b = self.backend
        kwargs: dict[str, Any] = {b._cache_kw: self.cache, "use_cache": True}
        if b._keep_kw:
            kwargs["logits_to_keep"] = 1
        x = b._torch.tensor([tokens], device=b._device)
        return b.model(input_ids=x, **kwargs).logits[0, -1]


class _PackedSteps:
    """One request's forward passes through the packed decoder (:mod:`pfr.models.hf.packed`): the prefix
    cache is its root, attended in place; the request's own tokens are its private past."""

    def __init__(self, backend: Any, cache: Any) -> None:
        self.packed = backend.packed
        self.root = [(layer.keys[0], layer.values[0]) for layer in cache.layers]
        self.past: Any = None

    def __call__(self, tokens: list[int]) -> Any:
        parent = -1 if self.past is None else 0
        logits, self.past = self.packed.level(self.root, self.past, [Node(tokens, parent, True)], [0])
        return logits[0]
