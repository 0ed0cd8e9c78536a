"""docs/method.md §6 metrics: baselines anchor known values; a python: model agrees with a hand computation."""

from __future__ import annotations

import json
import textwrap
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.analysis.metrics import INDICATORS
from pfr.design.types import Request
from pfr.models.base import native_choice, normalise_scores
from pfr.models.simple.callable import CallableModel
from pfr.run.store import Store

# Deterministic from the request's fields; the U and C halves of a quad draw different behaviours,
# so the model is right on some texts, wrong on others, and changes its decision between U and C.
MODEL_SOURCE = """
import hashlib


def choose(request):
    h = int(hashlib.sha256(request.text_id.encode()).hexdigest(), 16)
    mode = (h >> {"RU": 0, "RC": 2, "FU": 4, "FC": 6}[request.assignment + request.definition]) & 3
    n = len(request.options)
    first_wrong = next(i for i, o in enumerate(request.options) if not o.is_fallback and i != request.expected)
    pick = {0: request.expected, 1: request.fallback_index, 2: first_wrong, 3: request.expected}[mode]
    scores = [-3.0 - 0.1 * i for i in range(n)]
    scores[pick] = 2.0
    if mode == 2:  # a tie that the first-in-order argmax must break towards `pick` (pick < n - 1)
        scores[n - 1] = 2.0
    return scores
"""


def _hand(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The §6 metrics per dataset, computed directly from exported choices."""
    quads: dict[str, dict[str, dict[str, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        quads[row["dataset"]][row["text_id"]][row["assignment"] + row["definition"]] = row
    out = {}
    for dataset, texts in quads.items():
        n = len(texts)
        ok = {c: [t[c]["choice"] == t[c]["expected"] for t in texts.values()] for c in ("RU", "RC", "FU", "FC")}
        fb = {c: [t[c]["choice"] == t[c]["fallback_index"] for t in texts.values()] for c in ("RU", "RC", "FU", "FC")}
        ch = {c: [t[c]["choice"] for t in texts.values()] for c in ("RU", "RC", "FU", "FC")}
        assert all(v >= 0 for c in ch for v in ch[c])  # these models always name an option
        m: dict[str, Any] = {"n": n}
        for d in ("U", "C"):
            m[f"A+_{d}"] = sum(ok[f"R{d}"]) / n
            m[f"A-_{d}"] = sum(fb[f"F{d}"]) / n
            m[f"F+_{d}"] = sum(fb[f"R{d}"]) / n
            m[f"J_{d}"] = sum(a and b for a, b in zip(ok[f"R{d}"], ok[f"F{d}"])) / n
            m[f"B_{d}"] = (m[f"A+_{d}"] + m[f"A-_{d}"]) / 2
        m["DR_R"] = sum(u != c for u, c in zip(ch["RU"], ch["RC"])) / n
        m["DR_F"] = sum(u != c for u, c in zip(ch["FU"], ch["FC"])) / n
        m["P4"] = sum(all(ok[c][i] for c in ok) for i in range(n)) / n
        m["delta"] = {k: m[f"{k}_C"] - m[f"{k}_U"] for k in ("A+", "A-", "F+", "J", "B")}
        decomposition = {}
        for a in ("R", "F"):
            counts = {"c2w": 0, "w2c": 0, "w2w": 0, "inv": 0}
            for i in range(n):
                if ch[f"{a}U"][i] != ch[f"{a}C"][i]:
                    u, c = ok[f"{a}U"][i], ok[f"{a}C"][i]
                    counts["c2w" if u and not c else "w2c" if c and not u else "w2w"] += 1
            decomposition[a] = counts
        m["decomposition"] = decomposition
        out[dataset] = m
    return out


@pytest.fixture(scope="module")
def requests(data_dir: Path) -> list[Request]:
    return pfr.build("demo") + pfr.build("trec", data_dir=data_dir, limit=48)


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory, requests: list[Request]) -> Callable[[str], Path]:
    """``scored(spec)``: a store holding ``spec``'s results on the demo and 48 TREC texts."""
    stores: dict[str, Path] = {}

    def get(spec: str) -> Path:
        if spec not in stores:
            path = tmp_path_factory.mktemp("store")
            summary = pfr.run(spec, requests, path, progress=False)
            assert (summary.total, summary.scored) == (len(requests), len(requests))
            stores[spec] = path
        return stores[spec]

    return get


def _metrics(store: Path) -> dict[str, dict[str, Any]]:
    rows = pfr.metrics(store)
    assert len({r["model"] for r in rows}) == 1
    return {r["dataset"]: r for r in rows}


def _stored_rows(store: Path) -> list[dict[str, Any]]:
    with Store(store, create=False) as st:
        return [{**r.request.to_dict(), "choice": r.choice} for r in st.results()]


EXPECT = {
    "baseline:oracle": {"A+": 1, "A-": 1, "F+": 0, "J": 1, "B": 1, "DR_R": 0, "DR_F": 0, "P4": 1},
    "baseline:always-fallback": {"A+": 0, "A-": 1, "F+": 1, "J": 0, "B": 0.5, "DR_R": 0, "DR_F": 0, "P4": 0},
    "baseline:never-fallback": {"A+": 1, "A-": 0, "F+": 0, "J": 0, "B": 0.5, "DR_R": 0, "DR_F": 0, "P4": 0},
}


@pytest.mark.parametrize("spec", list(EXPECT))
def test_baselines_anchor_the_metrics(scored: Callable[[str], Path], spec: str) -> None:
    rows = _metrics(scored(spec))
    assert set(rows) == {"demo", "trec"}
    assert (rows["demo"]["n"], rows["trec"]["n"]) == (144, 48)
    for row in rows.values():
        assert row["model"] == spec
        for name, value in EXPECT[spec].items():
            keys = [name] if name in ("DR_R", "DR_F", "P4") else [f"{name}_U", f"{name}_C"]
            for key in keys:
                assert row[key] == value, (spec, key)
        assert all(v == 0 for v in row["delta"].values())
        assert row["decomposition"] == {a: {"c2w": 0, "w2c": 0, "w2w": 0, "inv": 0} for a in ("R", "F")}


def test_random_baseline_matches_hand_computation(scored: Callable[[str], Path]) -> None:
    store = scored("baseline:random")
    hand = _hand(_stored_rows(store))
    for dataset, row in _metrics(store).items():
        _assert_same(row, hand[dataset])
        assert 0 < row["A+_U"] < 1 and row["DR_R"] > 0


def _assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    for key, value in want.items():
        if isinstance(value, dict):
            if key == "decomposition":
                assert got[key] == value
            else:
                assert got[key] == pytest.approx(value, abs=1e-12), key
        else:
            assert got[key] == pytest.approx(value, abs=1e-12), key


@pytest.fixture(scope="module")
def python_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "my_model.py"
    path.write_text(textwrap.dedent(MODEL_SOURCE))
    return path


@pytest.fixture(scope="module")
def python_store(
    tmp_path_factory: pytest.TempPathFactory, python_model: Path, data_dir: Path, pfr_cli: Callable[..., Any]
) -> tuple[Path, list[dict[str, Any]]]:
    """The python: model run through the CLI on demo and 48 TREC texts, then exported."""
    store = tmp_path_factory.mktemp("py") / "store"
    spec = f"python:{python_model}:choose"
    for args in (["-d", "demo"], ["-d", "trec", "--limit", "48", "--data-dir", str(data_dir)]):
        proc = pfr_cli("run", "-m", spec, "-s", str(store), "--no-progress", *args)
        assert proc.returncode == 0, proc.stderr
    out = store.parent / "export.jsonl"
    proc = pfr_cli("export", str(store), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return store, rows


def test_python_model_choices_are_its_first_argmax(
    python_model: Path, python_store: tuple[Path, list[dict[str, Any]]], requests: list[Request]
) -> None:
    _, rows = python_store
    assert len(rows) == len(requests)
    model = CallableModel(str(python_model), "choose")
    by_id = {r.request_id: r for r in requests}
    ties = 0
    for row in rows:
        raw = model.score([by_id[row["request_id"]]])[0].logits
        top = max(raw)
        assert row["choice"] == raw.index(top) == native_choice(normalise_scores(raw))
        ties += sum(v == top for v in raw) > 1
    assert ties > 0


def test_python_model_metrics_match_hand_computation(python_store: tuple[Path, list[dict[str, Any]]]) -> None:
    store, rows = python_store
    hand = _hand(rows)
    got = _metrics(store)
    assert set(got) == set(hand) == {"demo", "trec"}
    for dataset, want in hand.items():
        _assert_same(got[dataset], want)
        # the model is neither perfect nor constant, and it changes decisions between U and C
        assert 0 < want["A+_U"] < 1 and 0 < want["A-_C"] < 1 and want["F+_U"] > 0
        assert want["DR_R"] > 0 and want["DR_F"] > 0
        assert want["P4"] <= min(want["J_U"], want["J_C"])
    totals = {a: {k: sum(h["decomposition"][a][k] for h in hand.values()) for k in ("c2w", "w2c", "w2w")} for a in "RF"}
    assert all(v > 0 for v in totals["R"].values())  # every kind of change occurs
    assert totals["F"]["c2w"] > 0 and totals["F"]["w2c"] > 0


def test_indicator_matrix_is_per_text(python_store: tuple[Path, list[dict[str, Any]]]) -> None:
    store, rows = python_store
    ind = pfr.indicators(store)
    assert list(ind.columns) == INDICATORS
    assert len(ind) == 144 + 48
    assert set(ind.index.get_level_values("text_id")) == {r["text_id"] for r in rows}
    assert ind.to_numpy().min() >= 0 and ind.to_numpy().max() <= 1
    # P4 implies both J's; a U/C change is exactly one of the four decomposition kinds
    assert ((ind["P4"] <= ind["J_U"]) & (ind["P4"] <= ind["J_C"])).all()
    assert (ind["DR_R"] == ind["R_c2w"] + ind["R_w2c"] + ind["R_w2w"] + ind["R_inv"]).all()
    assert (ind["DR_F"] == ind["F_c2w"] + ind["F_w2c"] + ind["F_w2w"] + ind["F_inv"]).all()


def test_incomplete_quads_are_dropped_and_counted(tmp_path: Path, requests: list[Request]) -> None:
    pfr.run("baseline:oracle", requests[:-1], tmp_path / "s", progress=False)
    ind = pfr.indicators(tmp_path / "s")
    assert ind.attrs["incomplete"] == 1
    rows = _metrics(tmp_path / "s")
    assert rows["trec"]["n"] == 47 and rows["demo"]["n"] == 144


def test_metrics_over_several_stores(scored: Callable[[str], Path]) -> None:
    rows = pfr.metrics(scored("baseline:oracle"), scored("baseline:always-fallback"))
    assert {(r["model"], r["dataset"]) for r in rows} == {
        (m, d) for m in ("baseline:oracle", "baseline:always-fallback") for d in ("demo", "trec")
    }


def test_models_sharing_a_name_stay_separate_settings(tmp_path: Path, data_dir: Path) -> None:
    """Two identities with one short name (here two functions of one file) never merge into one setting."""
    src = tmp_path / "two.py"
    src.write_text(
        "def fb(r):\n    return [1.0 if o.is_fallback else 0.0 for o in r.options]\n"
        "def reg(r):\n    return [0.0 if o.is_fallback else 1.0 for o in r.options]\n"
    )
    reqs = pfr.build("trec", "main", data_dir=data_dir, limit=6)
    for func in ("fb", "reg"):
        pfr.run(f"python:{src}:{func}", reqs, tmp_path / "store", progress=False)
    rows = pfr.metrics(tmp_path / "store")
    assert len(rows) == 2
    assert len({r["model"] for r in rows}) == 2
    assert sorted(r["A-_U"] for r in rows) == [0.0, 1.0]
