"""The packed level forward (pfr.models.packed) against plain transformers forward passes.

The real SmolLM2 weights are checked in tests/models/test_hf.py (the packed path is the default there);
here small random models of the other supported shapes: Qwen2 (q/k/v biases, two query heads per
key/value head) and Llama with llama3 RoPE scaling, untied head, a head size that is not hidden/heads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.models.hf import HFBackend, packed
from pfr.models.hf.packed import supports
from pfr.models.registry import load_model

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def trec(data_dir: Path) -> list[Any]:
    return pfr.build("trec", "main", data_dir=data_dir, limit=4)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_model("smollm2-135m").tokenizer


def _tiny(kind: str, vocab: int) -> Any:
    torch.manual_seed(0)
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  max_position_embeddings=4096, rms_norm_eps=1e-5, initializer_range=0.3)  # fmt: skip
    if kind == "qwen2":
        cfg = transformers.Qwen2Config(num_attention_heads=4, num_key_value_heads=2, **common)
    else:
        cfg = transformers.LlamaConfig(
            num_attention_heads=4, num_key_value_heads=1, head_dim=24, tie_word_embeddings=False,
            rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 512},
            **common,
        )  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():  # random norm weights and biases, so that neither is the identity
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.normal_(0.0, 0.5 if name.endswith("bias") else 1.0)
    return model.eval()


#: bfloat16 keeps 8 bits of mantissa, and these random models (init range 0.3) amplify rounding: on the
#: 12 requests below, both bfloat16 paths differ from float32 by up to 2.4 and from each other by 0.23
#: (measured), so the packed-vs-transformers check allows 0.5
BF16_TOLERANCE = 0.5


def _backend(model: Any, tokenizer: Any, dtype: str = "float32", **kw: Any) -> HFBackend:
    return HFBackend(model, tokenizer, name="tiny", source={"model": "tiny"}, dtype=dtype, **kw)


def _plain(backend: HFBackend, prompt: str) -> Any:
    ids = torch.tensor([backend.encode(prompt)])
    with torch.inference_mode():
        logits = backend.model(input_ids=ids, use_cache=False).logits[0, -1]
    return torch.log_softmax(logits.double(), dim=-1)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["qwen2", "llama"])
def test_packed_levels_equal_plain_forward(
    kind: str, tokenizer: Any, trec: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two quads; three texts (two share an input); an R pair (shared options); a lone request: every
    score within 1e-4 of one plain forward pass over the whole prompt. Levels whose nodes differ in
    length run their private attention in several padded groups; the test sees such levels. The shared
    prefixes run through the packed path too, from nothing and extending a kept one."""
    sizes: list[int] = []
    make_plan = packed._plan

    def plan(*args: Any) -> Any:
        made = make_plan(*args)
        sizes.append(len(made.groups))
        return made

    monkeypatch.setattr(packed, "_plan", plan)
    model = _tiny(kind, len(tokenizer))
    backend = _backend(model, tokenizer)
    assert backend.packed is not None
    roots: list[int] = []  # the length of the cache each shared prefix extends
    extend = backend.packed.extend

    def spy(root: Any, tokens: Any) -> Any:
        roots.append(len(root))
        return extend(root, tokens)

    monkeypatch.setattr(backend.packed, "extend", spy)
    batches = [trec[:8], [trec[8], trec[13], trec[15]], trec[12:14], [trec[9]]]
    worst = 0.0
    for batch in batches:
        for r, s in zip(batch, backend.score(batch)):
            prompt = backend.prompt(r)
            want = _plain(backend, prompt)[[backend.symbol_id(prompt, o.symbol) for o in r.options]]
            worst = max(worst, max(abs(a - b) for a, b in zip(s.logits, want.tolist())))
    assert worst < 1e-4, worst
    assert max(sizes) > 1 and min(sizes) == 1
    assert 0 in roots and max(roots) > 0
    # the modules' weights are views of the fused ones: transformers' own forward still sees the same numbers
    attn = model.model.layers[0].self_attn
    assert attn.k_proj.weight.data_ptr() > attn.q_proj.weight.data_ptr()
    assert attn.k_proj.weight.untyped_storage().data_ptr() == attn.q_proj.weight.untyped_storage().data_ptr()


@pytest.mark.slow
def test_packed_and_transformers_levels_agree(tokenizer: Any, trec: list[Any]) -> None:
    """The same requests through the packed path and through transformers' level-batched path."""
    model = _tiny("qwen2", len(tokenizer))
    packed = _backend(model, tokenizer)
    assert packed.packed is not None
    levels = _backend(model, tokenizer, packed=False)
    assert levels.packed is None
    a = packed.score(trec[:12])
    b = levels.score(trec[:12])
    assert max(abs(x - y) for s, t in zip(a, b) for x, y in zip(s.logits, t.logits)) < 1e-4
    assert packed.stats["padded_tokens"] == packed.stats["computed_tokens"]  # packed: no padding at all


def test_unsupported_models_keep_transformers_forward() -> None:
    """Sliding-window layers, another block (Gemma 3), or an accelerator: no packed forward."""
    llama = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                     num_attention_heads=2)  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_config(llama)
    assert supports(model, torch.device("cpu"))
    assert not supports(model, torch.device("meta"))
    mistral = transformers.MistralConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, sliding_window=16)  # fmt: skip
    assert not supports(transformers.AutoModelForCausalLM.from_config(mistral), torch.device("cpu"))
    gemma = transformers.Gemma3TextConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=2, num_key_value_heads=1, head_dim=16)  # fmt: skip
    assert not supports(transformers.AutoModelForCausalLM.from_config(gemma), torch.device("cpu"))


def test_a_flash_kernel_without_grouped_heads_keeps_transformers_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """An older torch whose CPU flash kernel cannot map query heads to fewer key/value heads (or has no
    causal mode): the probe says so and the packed path is not used."""
    llama = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                     num_attention_heads=2, num_key_value_heads=1)  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_config(llama)
    assert packed._flash_takes_grouped_heads()  # this torch has both
    assert supports(model, torch.device("cpu"))
    monkeypatch.setattr(packed, "_flash_takes_grouped_heads", lambda: False)
    assert not supports(model, torch.device("cpu"))


@pytest.mark.slow
def test_packed_bfloat16_runs_in_the_model_dtype(tokenizer: Any, trec: list[Any]) -> None:
    """bfloat16 weights: the packed path keeps bfloat16 activations through the log-sum-exp merges (a
    float32 merge weight must not promote them) and agrees with transformers' level path up to bfloat16
    rounding."""
    model = _tiny("qwen2", len(tokenizer)).to(torch.bfloat16)
    packed_b = _backend(model, tokenizer, "bfloat16")
    assert packed_b.packed is not None
    levels = _backend(model, tokenizer, "bfloat16", packed=False)
    a = packed_b.score(trec[:12])
    b = levels.score(trec[:12])
    worst = max(abs(x - y) for s, t in zip(a, b) for x, y in zip(s.logits, t.logits))
    assert worst < BF16_TOLERANCE, worst
