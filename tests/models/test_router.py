"""The embedding router (MiniLM, offline): each distinct text and description is encoded once per
run, however many requests, batches and quads share it, and the cache does not change a score."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import pfr
from pfr.models.registry import load_model


def test_each_distinct_text_and_description_is_encoded_once(data_dir: Path) -> None:
    router: Any = load_model("minilm-router")
    encoded: list[str] = []
    real_encode = router._st.encode

    def counting(texts: list[str], **kw: Any) -> Any:
        encoded.extend(texts)
        return real_encode(texts, **kw)

    router._st.encode = counting
    requests = pfr.build("trec", "main", data_dir=data_dir, limit=12) + pfr.build(
        "trec", "main", pfr.Design(membership=True), data_dir=data_dir, limit=12
    )
    scores = []
    for i in range(0, len(requests), 10):  # batches that cut through quads
        scores.extend(router.score(requests[i : i + 10]))
    texts = {r.text for r in requests}
    descriptions = {c.description for c in requests[0].inventory}
    assert len(encoded) == len(set(encoded))  # nothing twice
    assert set(encoded) == texts | descriptions  # and everything once
    assert len(encoded) == 12 + 50
    fresh: Any = load_model("minilm-router")  # a router without a cache gives the same scores
    again = fresh.score(requests[:8])
    np.testing.assert_allclose([s.logits for s in again], [s.logits for s in scores[:8]], rtol=0, atol=1e-5)


def test_identity_counts_the_weights() -> None:
    router: Any = load_model("minilm-router")
    counted = sum(p.numel() for p in router._st.parameters())
    assert router.identity["params"] == counted
    assert 20e6 < counted < 25e6  # all-MiniLM-L6-v2 has about 22.7 M parameters


def test_router_keeps_the_backend_contract(data_dir: Path) -> None:
    from pfr.testing import check_backend

    requests = pfr.build("trec", "main", data_dir=data_dir, limit=2) + pfr.build(
        "trec", "main", pfr.Design(membership=True), data_dir=data_dir, limit=2
    )
    assert "batch independence" in check_backend(load_model("minilm-router", {"tau": "0.3"}), requests, atol=1e-5)
