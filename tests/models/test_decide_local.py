"""``decide=generate`` on ``hf:`` and ``llamacpp:``, ``decide=choice`` on ``llamacpp:``: real SmolLM2 models
(the hf preset and the llama.cpp GGUF), through the backend contract, the store and the report."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.api import report
from pfr.errors import ModelError
from pfr.models.decide import parse
from pfr.models.generating import GeneratingLM
from pfr.models.lm.templates import apply_template
from pfr.models.registry import load_model
from pfr.run.store import Store
from pfr.testing import check_backend


@pytest.fixture(scope="module")
def demo() -> list[Any]:
    return pfr.build("demo", panel="main", limit=1)  # one text: RU, RC, FU, FC


def test_bad_decide_options_are_one_model_error_line() -> None:
    with pytest.raises(ModelError, match=r"decide=choice is not available for hf: \(it is for .*llamacpp:") as e:
        load_model("smollm2-135m", {"decide": "choice"})
    assert "\n" not in str(e.value)
    for spec in ("smollm2-135m", "llamacpp:preset:smollm2-135m"):
        with pytest.raises(ModelError, match="max_tokens") as e:
            load_model(spec, {"decide": "generate", "max_tokens": "0"})
        assert "\n" not in str(e.value)
    with pytest.raises(ModelError, match="max_tokens needs decide=generate"):
        load_model("llamacpp:preset:smollm2-135m", {"max_tokens": "4"})


@pytest.mark.parametrize("mode", ["generate", "choice"])
def test_llamacpp_decides_label_only_and_keeps_the_contract(llama_gguf: Path, llama_evaluates: None,
                                                            demo: list[Any], mode: str) -> None:  # fmt: skip
    backend = load_model(f"llamacpp:{llama_gguf}", {"decide": mode, "n_ctx": "2048"})
    assert isinstance(backend, GeneratingLM)
    ident = backend.identity
    scores_ident = backend.lm.identity
    assert ident != scores_ident and ident["name"].endswith(f"[{mode}]")
    assert ident["decide"] == mode and ident["sampling"] == {"temperature": 0.0, "seed": 0, "max_tokens": 8}
    assert {k: v for k, v in ident.items() if k in scores_ident and k != "name"} == {
        k: v for k, v in scores_ident.items() if k != "name"
    }
    out = backend.score(demo)
    for r, s in zip(demo, out):
        assert s.label_only and isinstance(s.meta["raw"], str)
        assert s.meta["invalid"] is (s.choice == -1) and s.meta["parse"] == parse(s.meta["raw"], r).reason
        if mode == "choice":  # the grammar allows exactly one option symbol
            assert s.meta["raw"] in [o.symbol for o in r.options] and not s.meta["invalid"]
    # the same answers in reverse order, after the scoring path used the cache
    backend.lm.score(demo)
    again = [backend.score([r])[0] for r in reversed(demo)][::-1]
    assert [s.meta["raw"] for s in again] == [s.meta["raw"] for s in out]
    check_backend(backend, demo[:2])


def test_hf_generates_the_same_alone_and_in_a_batch(demo: list[Any]) -> None:
    pytest.importorskip("transformers")
    backend = load_model("smollm2-135m", {"decide": "generate", "max_tokens": "6"})
    assert isinstance(backend, GeneratingLM)
    assert backend.identity["sampling"]["max_tokens"] == 6 and backend.identity["backend"] == "hf"
    assert backend.identity["dtype"] == backend.lm.identity["dtype"]
    batch = backend.score(demo[:2])
    assert all(s.label_only and isinstance(s.meta["raw"], str) for s in batch)
    assert [s.meta["parse"] for s in batch] == [parse(s.meta["raw"], r).reason for s, r in zip(batch, demo)]
    assert backend.prompt(demo[0]) == backend.lm.prompt(demo[0])  # the scoring prompt, chat template on
    check_backend(backend, demo[:2])  # a request alone gives the answer it gave in the batch
    # a study's [template] set on the generating backend is the one rendered and recorded
    apply_template(backend, replace(backend.template, answer_cue="Choice:"))
    assert "Choice:" in backend.lm.prompt(demo[0]) and backend.identity["template"]["answer_cue"] == "Choice:"


def test_run_and_report_give_an_invalid_rate_per_setting(llama_gguf: Path, llama_evaluates: None,
                                                         demo: list[Any], tmp_path: Path) -> None:  # fmt: skip
    store = tmp_path / "gen"
    spec = f"llamacpp:{llama_gguf}"
    pfr.run(spec, demo, store, options={"decide": "generate", "n_ctx": "2048"}, progress=False)
    pfr.run(spec, demo, store, options={"decide": "choice", "n_ctx": "2048"}, progress=False)
    with Store(store, create=False) as st:
        results = list(st.results())
    assert len(results) == 2 * len(demo) and all("raw" in r.meta for r in results)
    settings = json.loads(report([store], "json", draws=100))["settings"]
    assert len(settings) == 2
    for s in settings:
        assert set(s["invalid"]) == {"all", "RU", "RC", "FU", "FC"}
        if "[choice]" in s["model"]:
            assert s["invalid"]["all"] == 0.0
