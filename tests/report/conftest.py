"""Real stores for the report tests: baselines and small Python decision functions on real data."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pfr import api
from pfr.data.loaders import UserFormat
from pfr.design.types import Design

#: A decision function with known U/C differences: it follows the assignment except that, for a
#: hash-chosen share of texts, C misses the fallback (F) or picks it needlessly (R), and some texts
#: get a wrong regular option under both definitions. Scores are distinct, so no ties.
FICKLE = '''
import hashlib


def _bucket(text_id):
    return int(hashlib.sha256(text_id.encode()).hexdigest()[:8], 16) % 10


def score(req):
    k = len(req.options)
    fb = req.fallback_index
    b = _bucket(req.text_id)
    scores = [-3.0 - 0.25 * i for i in range(k)]
    regular = [i for i in range(k) if i != fb]
    if req.assignment == "R":
        target = req.expected
        if req.definition == "C" and b < 3:
            target = fb
        elif b == 9:
            target = next(i for i in regular if i != req.expected)
    else:
        target = fb
        if req.definition == "C" and b < 5:
            target = regular[0]
    scores[target] = -0.5 + 0.01 * b
    return scores
'''


@pytest.fixture(scope="session")
def fickle_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("models") / "fickle.py"
    path.write_text(FICKLE, encoding="utf-8")
    return f"python:{path}:score"


@pytest.fixture(scope="session")
def trec_stores(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, fickle_model: str) -> dict[str, Path]:
    """TREC main (first 96 texts): random, oracle and the fickle model, each in its own store;
    the fickle model also under the membership design (for Table 2) in the same store."""
    root = tmp_path_factory.mktemp("stores")
    direct = api.build("trec", "main", data_dir=data_dir, limit=96)
    member = api.build("trec", "main", Design(membership=True), data_dir=data_dir, limit=96)
    out = {}
    for name, spec in (("random", "baseline:random"), ("oracle", "baseline:oracle"), ("fickle", fickle_model)):
        out[name] = root / name
        api.run(spec, direct, store=out[name], progress=False)
    api.run(fickle_model, member, store=out["fickle"], progress=False)
    return out


@pytest.fixture(scope="session")
def special_stores(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, fickle_model: str) -> dict[str, Path]:
    """A compact (cross-backbone panel) store and a policy-panel store, for stratified resampling
    and Table 4."""
    root = tmp_path_factory.mktemp("special")
    cross = api.build("trec", "cross-backbone", data_dir=data_dir, limit=64)
    policy = api.build("trec", "policy", data_dir=data_dir, limit=24)
    out = {"cross": root / "cross", "policy": root / "policy"}
    api.run(fickle_model, cross, store=out["cross"], progress=False)
    api.run(fickle_model, policy, store=out["policy"], progress=False)
    return out


XSS_TEXT = "<script>alert(1)</script> where is my parcel"
XSS_LABEL = "<img src=x onerror=alert(2)>"


@pytest.fixture(scope="session")
def xss_store(tmp_path_factory: pytest.TempPathFactory, fickle_model: str) -> Path:
    """A user CSV dataset (16 categories) whose texts and one label carry markup."""
    root = tmp_path_factory.mktemp("xss")
    labels = [f"topic_{i:02d}" for i in range(15)] + [XSS_LABEL]
    rows = [{"text": XSS_TEXT, "label": "topic_00"}, {"text": "a & b <b>bold</b>", "label": XSS_LABEL}]
    rows += [{"text": f"ordinary request number {i}", "label": labels[i % 16]} for i in range(30)]
    path = root / "markup.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["text", "label"])
        w.writeheader()
        w.writerows(rows)
    reqs = api.build(str(path), "main", fmt=UserFormat())
    store = root / "store"
    api.run(fickle_model, reqs, store=store, progress=False)
    return store
