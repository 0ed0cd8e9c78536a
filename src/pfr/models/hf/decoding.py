"""Generated answers on the Transformers backend (``hf: --model-opt decide=generate``).

A plain decoding loop rather than ``model.generate``: a model's ``generation_config`` may carry its
own sampling defaults (Qwen2.5's ``repetition_penalty``, ``top_k``, ``top_p``), and greedy here must
mean the argmax of the full-vocabulary next-token distribution, the same distribution the scoring
path reads its letters from. Sampling (``gen_temperature > 0``) draws from ``softmax(logits / T)``
with a generator seeded by ``seed`` for each request, so an answer does not depend on what came before.
"""

from __future__ import annotations

from typing import Any

from pfr.models.decide import Decoding

__all__ = ["generate_text", "stop_ids"]


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


def generate_text(backend: Any, tokens: list[int], decoding: Decoding) -> str:
    """Up to ``decoding.max_tokens`` new tokens after ``tokens`` (one request, batch 1, a fresh cache),
    decoded without special tokens; ``backend`` is the :class:`~pfr.models.hf.backend.HFBackend`."""
    from transformers import DynamicCache

    torch: Any = backend._torch
    model, device = backend.model, backend._device
    room = decoding.max_tokens if backend.context_limit is None else backend.context_limit - len(tokens)
    stop = stop_ids(model, backend.tokenizer)
    sampler = None
    if decoding.temperature > 0:
        sampler = torch.Generator(device=device).manual_seed(decoding.seed)
    cache = DynamicCache(config=model.config)
    x = torch.tensor([tokens], device=device)
    new: list[int] = []
    with torch.inference_mode():
        for _ in range(min(decoding.max_tokens, room)):
            kwargs: dict[str, Any] = {backend._cache_kw: cache, "use_cache": True}
            if backend._keep_kw:
                kwargs["logits_to_keep"] = 1
            logits = model(input_ids=x, **kwargs).logits[0, -1].double()
            if sampler is None:
                token = int(logits.argmax())
            else:
                probs = torch.softmax(logits / decoding.temperature, dim=-1)
                token = int(torch.multinomial(probs, 1, generator=sampler))
            if token in stop:
                break
            new.append(token)
            x = torch.tensor([[token]], device=device)
    return str(backend.tokenizer.decode(new, skip_special_tokens=True))
