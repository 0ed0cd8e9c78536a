"""The Transformers backend against plain forward passes of the same real models (smollm2-135m, gemma3-270m)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.errors import ModelError
from pfr.models.registry import load_model

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")


def _plain_logprobs(backend: Any, prompt: str) -> Any:
    """Next-token log-probs after ``prompt`` from one fresh forward pass: whole prompt, no cache."""
    ids = backend.tokenizer(prompt, return_tensors="pt", add_special_tokens=not backend.chat_template)["input_ids"]
    with torch.inference_mode():
        logits = backend.model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[0, -1]
    return torch.log_softmax(logits.double(), dim=-1)


@pytest.fixture(scope="module")
def trec(data_dir: Path) -> list[Any]:
    return pfr.build("trec", "main", data_dir=data_dir, limit=4)


@pytest.fixture(scope="module")
def smollm2() -> Any:
    return load_model("smollm2-135m")


@pytest.fixture(scope="module")
def reference(smollm2: Any, trec: list[Any]) -> dict[str, Any]:
    """request_id → full-vocabulary next-token log-probs from a plain forward pass over the prompt."""
    return {r.request_id: _plain_logprobs(smollm2, smollm2.prompt(r)) for r in trec}


def _symbol_ids(backend: Any, request: Any) -> list[int]:
    return [backend.symbol_id(backend.prompt(request), o.symbol) for o in request.options]


# --------------------------------------------------------------------------- no model needed


def test_grouped_query_attention_under_a_mask_equals_transformers_sdpa() -> None:
    """hf._sdpa_gqa (grouped heads inside SDPA) against transformers' SDPA (heads repeated first), with a
    padding mask like the level-batched trie's: left-padded pasts, right-padded new tokens."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from pfr.models.hf.attention import sdpa_gqa as _sdpa_gqa

    class Module(torch.nn.Module):
        num_key_value_groups = 3
        is_causal = True

    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 6, 5, 8, generator=g)
    k, v = torch.randn(2, 2, 9, 8, generator=g), torch.randn(2, 2, 9, 8, generator=g)
    keep = torch.ones(2, 1, 5, 9, dtype=torch.bool)
    keep[0, :, :, :3] = False  # row 0: a shorter past, left-padded
    keep[:, :, :, 4:] &= torch.ones(5, 5, dtype=torch.bool).tril()  # causal over the new tokens
    got, _ = _sdpa_gqa(Module(), q, k, v, keep, scaling=0.35)
    want, _ = sdpa_attention_forward(Module(), q, k, v, keep, scaling=0.35)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_unknown_local_path_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no such model file or folder"):
        load_model(f"hf:{tmp_path / 'missing-model'}")
    with pytest.raises(ModelError, match="no such model file or folder"):
        load_model("hf:./nowhere/model.gguf")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match=r"no config\.json"):
        load_model(f"hf:{tmp_path / 'empty'}")


def test_bad_options_are_model_errors() -> None:
    with pytest.raises(ModelError, match="unknown hf option"):
        load_model("smollm2-135m", {"chat": "on"})
    with pytest.raises(ModelError, match="chat_template=maybe: must be on or off"):
        load_model("smollm2-135m", {"chat_template": "maybe"})
    with pytest.raises(ModelError, match="dtype='int8'"):
        load_model("smollm2-135m", {"dtype": "int8", "device": "cpu"})


# --------------------------------------------------------------------------- smollm2-135m


@pytest.mark.slow
def test_cli_scores_equal_plain_forward(
    tmp_path: Path, data_dir: Path, smollm2: Any, reference: dict[str, Any]
) -> None:
    """The issue's check: `pfr run --model smollm2-135m` stores what a plain forward pass gives, within 1e-3."""
    from pfr.cli import main

    store, out = tmp_path / "store", tmp_path / "rows.jsonl"
    base = ["--dataset", "trec", "--data-dir", str(data_dir), "--limit", "4", "--store", str(store)]
    main(["run", "--model", "smollm2-135m", *base, "--no-progress"])
    main(["export", str(store), "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 16
    for row in rows:
        prompt = row["prompt"]
        assert prompt.endswith("Answer:<|im_end|>\n<|im_start|>assistant\n")  # chat template on: bare letters
        ids = []
        for opt in row["options"]:
            toks = smollm2.tokenizer(opt["symbol"], add_special_tokens=False)["input_ids"]
            assert len(toks) == 1
            ids.append(toks[0])
        plain = _plain_logprobs(smollm2, prompt)
        assert torch.equal(plain, reference[row["request_id"]])  # exported prompt == the backend's prompt
        expected = torch.log_softmax(plain[ids], dim=-1).tolist()
        assert len(row["scores"]) == len(expected) == 16
        for got, want in zip(row["scores"], expected):
            assert abs(got - want) < 1e-3, (row["request_id"], got, want)
        assert row["choice"] == max(range(16), key=lambda i: (expected[i], -i))


@pytest.mark.slow
def test_prefix_cache_equals_full_forward(smollm2: Any, trec: list[Any], reference: dict[str, Any]) -> None:
    """Two quads; requests of three texts (two share an input); an R pair (shared options); a lone request.

    All within 1e-4 of a plain forward pass in fp32.
    """
    assert smollm2.dtype == "float32"
    assert smollm2.gqa_attention  # the masked passes run grouped heads inside SDPA (hf._sdpa_gqa)
    smollm2._prefixes.clear()
    before = dict(smollm2.stats)
    batches = [trec[:8], [trec[8], trec[13], trec[15]], trec[12:14], [trec[9]]]
    worst = 0.0
    calls = []
    for batch in batches:
        start = smollm2.stats["forward_calls"]
        scored = smollm2.score(batch)
        calls.append(smollm2.stats["forward_calls"] - start)
        for r, s in zip(batch, scored):
            want = reference[r.request_id][_symbol_ids(smollm2, r)]
            worst = max(worst, max(abs(a - b) for a, b in zip(s.logits, want.tolist())))
            assert s.meta["prompt_tokens"] == len(smollm2.encode(smollm2.prompt(r)))
    assert worst < 1e-4, worst
    prompt = smollm2.stats["prompt_tokens"] - before["prompt_tokens"]
    computed = smollm2.stats["computed_tokens"] - before["computed_tokens"]
    assert computed < 0.35 * prompt  # the shared prefixes were run once, not once per request
    # one batched forward per trie level (inputs, options, rules; leaves of unequal length in up to two
    # chunks), not one per branch: the two quads of the first batch take the root and at most 5 more
    assert calls[0] <= 6, calls


@pytest.mark.slow
def test_prefix_cache_off_equals_full_forward(smollm2: Any, trec: list[Any], reference: dict[str, Any]) -> None:
    smollm2.prefix_cache = False
    try:
        scores = smollm2.score(trec[:2])
    finally:
        smollm2.prefix_cache = True
    for r, s in zip(trec[:2], scores):
        want = reference[r.request_id][_symbol_ids(smollm2, r)].tolist()
        assert max(abs(a - b) for a, b in zip(s.logits, want)) < 1e-4


@pytest.mark.slow
def test_symbol_that_is_not_one_token(smollm2: Any, trec: list[Any]) -> None:
    """After "Answer:" SmolLM2 writes " A" as one token but " 0" as two (" ", "0")."""
    from pfr.models.hf import HFBackend

    plain = HFBackend(
        smollm2.model, smollm2.tokenizer, name="smollm2-135m", source=smollm2.source, dtype="float32",
        chat_template=False,
    )
    r = trec[0]
    assert plain.prompt(r).endswith("Answer:")
    assert len(plain.score([r])[0].logits) == 16
    digits = dataclasses.replace(
        r, options=tuple(dataclasses.replace(o, symbol=str(i % 10)) for i, o in enumerate(r.options))
    )
    with pytest.raises(ModelError, match=rf"request {r.request_id}: option symbol '0' is not one token"):
        plain.score([digits])


@pytest.mark.slow
def test_prompt_over_context_length(smollm2: Any, trec: list[Any]) -> None:
    from pfr.models.hf import HFBackend

    short = HFBackend(
        smollm2.model, smollm2.tokenizer, name="smollm2-135m", source=smollm2.source, dtype="float32",
        chat_template=True, max_length=512,
    )
    n = len(short.encode(short.prompt(trec[0])))
    with pytest.raises(ModelError, match=rf"request {trec[0].request_id}: prompt is {n} tokens, .* length 512"):
        short.score(trec[:4])
    assert smollm2.max_length == 8192  # from the model's config


@pytest.mark.slow
def test_smollm2_keeps_the_backend_contract(smollm2: Any, trec: list[Any]) -> None:
    """Through every forward path: the packed trie (default), transformers' trie, no prefix cache."""
    from pfr.models.hf import HFBackend
    from pfr.testing import check_backend

    for opts in ({}, {"packed": False}, {"prefix_cache": False}):
        backend = HFBackend(smollm2.model, smollm2.tokenizer, name="smollm2-135m", source=smollm2.source,
                            dtype="float32", chat_template=True, **opts)  # fmt: skip
        assert "batch independence" in check_backend(backend, trec[:8], atol=1e-4)


@pytest.mark.slow
def test_identity_names_weights_not_machine(smollm2: Any) -> None:
    from pfr.data.sources import cache_dir
    from pfr.models.lm.prompt import PromptTemplate

    ident = smollm2.identity
    assert ident["backend"] == "hf" and ident["name"] == "smollm2-135m"
    assert ident["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert len(ident["file_sha256"]) == 64
    assert "bos" not in ident  # the file asks for no BOS: stores from before the BOS fix still resume
    assert ident["chat_template"] == "on" and ident["dtype"] == "float32" and ident["temperature"] == 1.0
    assert ident["template"] == PromptTemplate().to_dict()
    text = json.dumps(ident)
    assert str(cache_dir()) not in text and "site-packages" not in text


@pytest.mark.slow
def test_local_gguf_file_and_model_folder(smollm2: Any, trec: list[Any], reference: dict[str, Any]) -> None:
    """`hf:PATH.gguf` and `hf:FOLDER` load the same weights as the preset and give the same scores."""
    from pfr.models.lm.gguf_cache import converted_dir, smollm2_135m

    src = smollm2_135m()
    by_file = load_model(f"hf:{src.path}", {"chat_template": "on"})
    assert by_file.identity == {**smollm2.identity, "name": src.path.name}
    folder = converted_dir(src)
    by_dir = load_model(f"hf:{folder}", {"chat_template": "on"})
    ident = by_dir.identity
    assert ident["model"] == folder.name and len(ident["dir_sha256"]) == 64
    assert str(folder.parent) not in json.dumps(ident)
    pair = trec[:2]
    for backend in (by_file, by_dir):
        for r, s in zip(pair, backend.score(pair)):
            want = reference[r.request_id][_symbol_ids(smollm2, r)].tolist()
            assert max(abs(a - b) for a, b in zip(s.logits, want)) < 1e-4


@pytest.mark.slow
def test_dequantised_cache_holds_the_gguf_weights(smollm2: Any) -> None:
    """The safetensors copy holds exactly what the GGUF's token embedding dequantises to."""
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize

    from pfr.models.lm.gguf_cache import converted_dir, smollm2_135m

    src = smollm2_135m()
    folder = converted_dir(src)
    assert (folder / "model.safetensors").is_file() and (folder / "pfr-source.json").is_file()
    tensor = next(t for t in GGUFReader(src.path).tensors if t.name == "token_embd.weight")
    want = dequantize(tensor.data, tensor.tensor_type).reshape(-1, 576)
    got = smollm2.model.get_input_embeddings().weight.detach().numpy()
    assert got.shape == want.shape
    assert np.array_equal(got, want.astype(np.float32))


# --------------------------------------------------------------------------- gemma3-270m


@pytest.mark.slow
def test_gemma3_scores_equal_full_forward(trec: list[Any]) -> None:
    """Gemma 3 mixes sliding-window (512) and global layers; these prompts are longer than the window."""
    gemma = load_model("gemma3-270m")
    assert gemma.identity["chat_template"] == "off"
    quad = trec[:4]
    prompt = gemma.prompt(quad[0])
    assert prompt.endswith("Answer:")
    assert len(gemma.encode(prompt)) > 512
    scores = gemma.score(quad)
    for r, s in zip(quad, scores):
        want = _plain_logprobs(gemma, gemma.prompt(r))[_symbol_ids(gemma, r)].tolist()
        assert max(abs(a - b) for a, b in zip(s.logits, want)) < 1e-4
        assert all(math.isfinite(x) for x in s.logits)
    from pfr.testing import check_backend

    assert "batch independence" in check_backend(gemma, quad, atol=1e-4)  # the one-branch-at-a-time path
