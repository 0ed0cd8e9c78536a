"""The classify-then-map reference in a report: DR = 0, J = accuracy, A+/A−/F+ equal to mapping
each stored prediction onto the main quads by hand; the reference-correct subset (Figure 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pfr
from pfr.cli import main as cli_main
from pfr.design.types import Design
from pfr.run.store import Store

#: a classifier right on ~60 % of texts (wrong ones pick a hash-chosen category), and a direct
#: decision function with hash-chosen U/C differences; distinct scores, so no ties.
MODEL = """
import hashlib

def _h(s):
    return int(hashlib.sha256(s.encode()).hexdigest()[:12], 16)

def score(req):
    n = len(req.options)
    scores = [-2.0 - 0.01 * i for i in range(n)]
    h = _h(req.text_id)
    if req.fallback_index < 0:                       # the reference: one full-inventory request
        pick = req.expected if h % 5 < 3 else (h // 5) % n
    else:
        regular = [i for i in range(n) if i != req.fallback_index]
        pick = req.expected
        if req.definition == "C" and h % 4 == 0:
            pick = req.fallback_index if req.assignment == "R" else regular[h % len(regular)]
        elif req.definition == "U" and h % 7 == 0:
            pick = regular[(h // 7) % len(regular)]
    scores[pick] = 0.0
    return scores
"""


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ref")
    model = root / "my.py"
    model.write_text(MODEL, encoding="utf-8")
    spec = f"python:{model}:score"
    out = {"ref": root / "ref", "direct": root / "direct", "spec": Path(spec)}
    pfr.run(spec, pfr.build("trec", "main", Design(task="classify-then-map"), data_dir=data_dir), out["ref"],
            progress=False)  # fmt: skip
    pfr.run(spec, pfr.build("trec", "main", Design(), data_dir=data_dir), out["direct"], progress=False)
    return out


def _json(capsys: pytest.CaptureFixture[str], *stores: Path) -> dict:
    cli_main(["report", *map(str, stores), "--format", "json", "--draws", "400"])  # returns on success
    return json.loads(capsys.readouterr().out)


def _by_hand(ref_store: Path, data_dir: Path) -> tuple[dict[str, float], dict[str, bool]]:
    """Table 1 values of the reference computed from the raw predictions and freshly built quads."""
    with Store(ref_store, create=False) as st:
        preds = {r.request.text_id: r.request.options[r.choice].category for r in st.results()}
    quads = pfr.build("trec", "main", Design(), data_dir=data_dir)
    cells: dict[str, dict[str, tuple[int, int, int]]] = {}
    for q in quads:
        pred = preds[q.text_id]
        choice = next((i for i, o in enumerate(q.options) if not o.is_fallback and o.category == pred), None)
        choice = q.fallback_index if choice is None else choice
        cells.setdefault(q.text_id, {})[q.assignment + q.definition] = (choice, q.expected, q.fallback_index)
    n = len(cells)
    assert n == 500

    def share(cell: str, what: str) -> float:
        hits = 0
        for c in cells.values():
            choice, expected, fb = c[cell]
            hits += choice == (expected if what == "ok" else fb)
        return hits / n

    want = {
        "A+_U": share("RU", "ok"), "A+_C": share("RC", "ok"), "A-_U": share("FU", "fb"), "A-_C": share("FC", "fb"),
        "F+_U": share("RU", "fb"), "F+_C": share("RC", "fb"),
        "J_U": sum(c["RU"][0] == c["RU"][1] and c["FU"][0] == c["FU"][1] for c in cells.values()) / n,
        "DR_R": sum(c["RU"][0] != c["RC"][0] for c in cells.values()) / n,
    }  # fmt: skip
    correct = {tid: preds[tid] == next(q.y for q in quads if q.text_id == tid) for tid in cells}
    want["accuracy"] = sum(correct.values()) / n
    return want, correct


def test_reference_setting(stores: dict[str, Path], data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rep = _json(capsys, stores["ref"])
    (s,) = rep["settings"]
    assert s["task"] == "classify-then-map" and s["design"] == "task=classify-then-map" and s["n"] == 500
    want, _ = _by_hand(stores["ref"], data_dir)
    assert 0.4 < want["accuracy"] < 0.8  # the fixture classifier is neither perfect nor useless
    for key in ("A+_U", "A+_C", "A-_U", "A-_C", "F+_U", "F+_C", "J_U"):
        assert s[key]["value"] == pytest.approx(want[key], abs=1e-12), key
    # by construction: no U/C disagreement and J = classification accuracy
    assert s["DR_R"]["value"] == s["DR_F"]["value"] == 0.0 == want["DR_R"]
    assert s["accuracy"]["value"] == pytest.approx(want["accuracy"], abs=1e-12)
    assert s["J_U"]["value"] == s["J_C"]["value"] == s["accuracy"]["value"]
    assert s["J_U"]["lo"] == s["accuracy"]["lo"] and s["J_U"]["hi"] == s["accuracy"]["hi"]  # paired resamples
    assert s["A+_U"]["value"] == s["accuracy"]["value"]  # gold-regular correct iff the prediction is gold
    assert s["F+_U"]["value"] > 0  # classification errors outside S become false fallbacks
    assert all(t["b"] == t["c"] == 0 for t in s["tests"])


def test_reference_correct_subset(stores: dict[str, Path], data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rep = _json(capsys, stores["direct"], stores["ref"])
    by_design = {s["design"]: s for s in rep["settings"]}
    assert set(by_design) == {"direct", "task=classify-then-map", "direct [reference-correct]"}
    sub = by_design["direct [reference-correct]"]
    _, correct = _by_hand(stores["ref"], data_dir)
    keep = {tid for tid, ok in correct.items() if ok}
    assert sub["n"] == len(keep) and sub["subset"] == "reference-correct"
    cells: dict[str, dict[str, int]] = {}
    with Store(stores["direct"], create=False) as st:
        for r in st.results():
            q = r.request
            if q.text_id in keep:
                ok = r.choice == q.expected
                cells.setdefault(q.text_id, {})[q.assignment + q.definition] = ok
    n = len(keep)
    for key, cell in (("A+_U", "RU"), ("A+_C", "RC"), ("A-_U", "FU"), ("A-_C", "FC")):
        assert sub[key]["value"] == pytest.approx(sum(c[cell] for c in cells.values()) / n, abs=1e-12)
    assert sub["P4"]["value"] == pytest.approx(sum(all(c.values()) for c in cells.values()) / n, abs=1e-12)
    # the family is the main design only: the direct setting's two tests
    assert {k: rep["family"][k] for k in ("name", "tests", "method", "alpha")} == {
        "name": "primary", "tests": 2, "method": "holm", "alpha": 0.05}  # fmt: skip
    assert by_design["direct"]["tests"][0]["p_holm"] is not None
    assert sub["tests"][0]["p_holm"] is None and by_design["task=classify-then-map"]["tests"][1]["p_holm"] is None


def test_text_report_has_reference_table(stores: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cli_main(["report", str(stores["direct"]), str(stores["ref"]), "--draws", "200"])
    out = capsys.readouterr().out
    assert "Classify-then-map reference and reference-correct texts" in out
    table2 = out.split("Table 2.")[1]
    assert "task=classify-then-map" in table2 and "reference-correct" not in table2.split("J_U, J_C")[0]
