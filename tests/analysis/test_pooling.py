"""Pooled settings (paper Appendix A): each text's indicators averaged over the variants of a
comparison before the paired bootstrap; checked against a by-hand recomputation from raw choices."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

import pfr
from pfr.analysis.bootstrap import resample_counts, setting_rng
from pfr.analysis.pooling import pool_groups
from pfr.design.types import Design
from pfr.report import render_report
from pfr.run.store import Store

#: decisions that depend on the fallback slot and the option order (so variants differ per text)
MODEL = """
import hashlib

def score(req):
    n = len(req.options)
    key = req.text_id + "|" + ",".join(o.label for o in req.options) + req.definition
    h = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    scores = [-3.0 - 0.01 * i for i in range(n)]
    pick = req.fallback_index if h % 3 == 0 else req.expected if h % 3 == 1 else (req.fallback_index + 1) % n
    scores[pick] = 0.0
    return scores
"""
VARIANTS = [Design(choice_set=cs, position=p) for cs in (0, 1, 2) for p in (1, 6)]
DRAWS = 400


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    root = tmp_path_factory.mktemp("pool")
    (root / "m.py").write_text(MODEL, encoding="utf-8")
    for design in VARIANTS:
        reqs = pfr.build("trec", "diagnostic", design, data_dir=data_dir, limit=30)
        pfr.run(f"python:{root / 'm.py'}:score", reqs, root / "s", progress=False)
    return root / "s"


def test_pooled_setting_by_hand(store: Path) -> None:
    rep = json.loads(render_report([str(store)], "json", draws=DRAWS, seed=4))
    assert len(rep["settings"]) == 6
    (pooled,) = rep["pooled"]
    assert pooled["design"] == "direct [pooled: choice-set×position]" and pooled["pooled_over"] == "choice-set×position"
    assert sorted(pooled["members"]) == sorted(d.name for d in VARIANTS) and pooled["tests"] == []
    # per text and variant, from the raw stored choices
    fb: dict[str, dict[str, list[float]]] = {}
    with Store(store, create=False) as st:
        for r in st.results():
            q = r.request
            if q.assignment == "F":
                fb.setdefault(q.text_id, {}).setdefault(q.definition, []).append(float(r.choice == q.fallback_index))
    assert len(fb) == pooled["n"] == 30 and all(len(v["U"]) == len(v["C"]) == 6 for v in fb.values())
    order = list(fb)  # stored order = panel order of the first variant
    per_text = {d: np.array([np.mean(fb[t][d]) for t in order]) for d in ("U", "C")}
    assert pooled["A-_U"]["value"] == pytest.approx(per_text["U"].mean(), abs=1e-12)
    assert pooled["A-_C"]["value"] == pytest.approx(per_text["C"].mean(), abs=1e-12)
    member_means = np.mean([s["A-_U"]["value"] for s in rep["settings"]])  # same texts in every variant
    assert pooled["A-_U"]["value"] == pytest.approx(member_means, abs=1e-12)
    # the interval resamples texts with all their variants: percentiles of per-text means
    key = tuple(pooled[k] for k in ("model", "dataset", "panel", "design"))
    counts = resample_counts(30, DRAWS, setting_rng(4, key))
    diff = per_text["C"] - per_text["U"]
    lo, hi = np.quantile(counts @ diff / 30, [0.025, 0.975])
    assert pooled["delta"]["A-"]["lo"] == pytest.approx(lo, abs=1e-12)
    assert pooled["delta"]["A-"]["hi"] == pytest.approx(hi, abs=1e-12)
    assert lo < pooled["delta"]["A-"]["value"] < hi


def test_text_report_has_the_pooled_table(store: Path) -> None:
    text = render_report([str(store)], "text", draws=100)
    assert "Pooled settings (%)" in text and "direct [pooled: choice-set×position]" in text


def _f(design: Design) -> dict[str, object]:
    return asdict(design)


def test_pool_groups() -> None:
    k = lambda d: ("m", "trec", "diagnostic", d.name)  # noqa: E731
    wording = [Design(wording=w) for w in (1, 2, 3)]
    member = [Design(wording=w, membership=True) for w in (1, 2)]
    groups = pool_groups({k(d): _f(d) for d in [*wording, *member, Design(fallback="None")]})
    by_name = {g.key[3]: g for g in groups}
    assert set(by_name) == {"direct [pooled: wording]", "membership [pooled: wording]"}
    assert [m[3] for m in by_name["direct [pooled: wording]"].members] == [d.name for d in wording]
    assert pool_groups({k(Design()): _f(Design())}) == []
    # other models or panels never pool together
    other = {("m2", "trec", "diagnostic", "wording=2"): _f(Design(wording=2)), k(Design()): _f(Design())}
    assert pool_groups(other) == []
