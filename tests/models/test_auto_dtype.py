"""dtype=auto in the hf backend (issue 26 item 2): bfloat16 only on CPUs that run it fast, recorded in
the identity."""

from __future__ import annotations

from typing import Any

import pytest

from pfr.errors import ModelError
from pfr.models.hf import auto_dtype as ad


def test_the_cpu_rule() -> None:
    avx2 = frozenset({"avx2", "fma"})
    assert ad.choose(avx2) == "float32"
    assert ad.choose(avx2, probe=9.0) == "float32"  # no native bf16 instructions: never
    assert ad.choose(avx2 | {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}) == "bfloat16"
    assert ad.choose(avx2 | {"avx512_bf16"}, probe=2.0) == "bfloat16"
    assert ad.choose(avx2 | {"avx512_bf16"}, probe=1.1) == "float32"
    assert ad.choose(avx2 | {"avx512_bf16"}) == "float32"


def test_auto_on_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ad.ENV, raising=False)
    flags = ad.cpu_flags()
    got = ad.auto_dtype("cpu")
    assert got == ("bfloat16" if "amx_bf16" in flags else got)
    if "avx512_bf16" not in flags:
        assert got == "float32"
    assert ad.auto_dtype("cuda:0") == "bfloat16"
    assert ad.probe_gain(n=128, reps=1) > 0
    monkeypatch.setenv(ad.ENV, "float32")
    assert ad.auto_dtype("cpu") == "float32"
    monkeypatch.setenv(ad.ENV, "half")
    with pytest.raises(ModelError, match="PFR_CPU_DTYPE='half': use float32 or bfloat16"):
        ad.auto_dtype("cpu")


@pytest.mark.slow
def test_the_identity_records_what_auto_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from pfr.models.registry import load_model

    monkeypatch.delenv(ad.ENV, raising=False)
    backend: Any = load_model("smollm2-135m")  # dtype=auto
    want = ad.auto_dtype("cpu")
    assert backend.identity["dtype"] == want
    assert next(backend.model.parameters()).dtype == getattr(torch, want)
    monkeypatch.setenv(ad.ENV, "float32")
    pinned: Any = load_model("smollm2-135m")
    assert pinned.identity["dtype"] == "float32"
    assert (pinned.identity == backend.identity) == (want == "float32")
