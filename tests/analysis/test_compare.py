"""`pfr compare` on real runs of baseline models (trec, 20 texts) against an independent computation
from `pfr export` files (plain Python, scipy's exact binomial test), and the MDE against a simulation."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest

import pfr
from pfr.analysis.compare import mde

DRAWS = 500
LOWER = {"F+_U", "F+_C", "DR_R", "DR_F", "INV"}
Cli = Callable[..., Any]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, pfr_cli: Cli) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compare")
    runs = {
        "oracle": ("baseline:oracle", [], "20"),
        "r1": ("baseline:random", ["--model-opt", "seed=1"], "20"),
        "r2": ("baseline:random", ["--model-opt", "seed=2"], "20"),
        "r30": ("baseline:random", ["--model-opt", "seed=3"], "30"),
        "both": ("baseline:oracle", [], "20"),
        "demo": ("baseline:random", [], "5"),
    }
    out = {}
    for name, (model, opts, limit) in runs.items():
        store = root / name
        dataset = "demo" if name == "demo" else "trec"
        done = pfr_cli("run", "-m", model, *opts, "-s", str(store), "-d", dataset, "--limit", limit,
                       "--data-dir", str(data_dir))  # fmt: skip
        assert done.returncode == 0, done.stderr
        out[name] = store
    done = pfr_cli("run", "-m", "baseline:random", "--model-opt", "seed=1", "-s", str(root / "both"), "-d", "trec",
                   "--limit", "20", "--data-dir", str(data_dir))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def _export(store: Path, pfr_cli: Cli) -> list[dict[str, Any]]:
    out = store.parent / f"{store.name}.jsonl"
    done = pfr_cli("export", str(store), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def _per_text(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each text's metric indicators, from the exported rows alone (docs/method.md §6)."""
    quads: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        quads.setdefault(r["text_id"], {})[r["assignment"] + r["definition"]] = r
    out = {}
    for tid, q in quads.items():
        ok = {c: q[c]["choice"] == q[c]["expected"] for c in q}
        fb = {c: q[c]["choice"] == q[c]["fallback_index"] for c in q}
        inv = {c: q[c]["choice"] < 0 for c in q}
        out[tid] = {
            "A+_U": ok["RU"], "A+_C": ok["RC"], "A-_U": fb["FU"], "A-_C": fb["FC"],
            "F+_U": fb["RU"], "F+_C": fb["RC"], "J_U": ok["RU"] and ok["FU"], "J_C": ok["RC"] and ok["FC"],
            "DR_R": q["RU"]["choice"] != q["RC"]["choice"] or inv["RU"],
            "DR_F": q["FU"]["choice"] != q["FC"]["choice"] or inv["FU"],
            "P4": all(ok.values()), "INV": sum(inv.values()) / 4,
        }  # fmt: skip
    return {t: {k: float(v) for k, v in m.items()} for t, m in out.items()}


def _compare(pfr_cli: Cli, base: str, cand: str, *extra: str) -> dict[str, Any]:
    done = pfr_cli("compare", base, cand, "--format", "json", "--draws", str(DRAWS), *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("pair", [("oracle", "r1"), ("r1", "r2"), ("r2", "oracle")])
def test_deltas_tests_and_texts_match_the_exports(stores: dict[str, Path], pfr_cli: Cli, pair: tuple[str, str]) -> None:
    rows = {k: _export(stores[k], pfr_cli) for k in pair}
    base, cand = (_per_text(rows[k]) for k in pair)
    chosen = {k: {(r["text_id"], r["assignment"] + r["definition"]): r["options"][r["choice"]]["label"]
                  for r in rows[k]} for k in pair}  # fmt: skip
    got = _compare(pfr_cli, str(stores[pair[0]]), str(stores[pair[1]]))
    (s,) = got["settings"]
    common = sorted(set(base) & set(cand))
    assert s["n"] == len(common) == 20 and (s["dataset"], s["panel"], s["design"]) == ("trec", "main", "direct")
    ps = []
    for metric, m in s["metrics"].items():
        assert set(m) == {"base", "cand", "delta", "low", "high", "b", "c", "p", "p_holm", "mde"}
        xb = [base[t][metric] for t in common]
        xc = [cand[t][metric] for t in common]
        assert m["base"] == pytest.approx(sum(xb) / 20) and m["cand"] == pytest.approx(sum(xc) / 20)
        assert m["delta"] == pytest.approx(sum(xc) / 20 - sum(xb) / 20)
        assert m["low"] <= m["delta"] <= m["high"]
        passes = (lambda x: x == 0) if metric in LOWER else (lambda x: x == 1)
        b = sum(passes(u) and not passes(v) for u, v in zip(xb, xc))
        c = sum(not passes(u) and passes(v) for u, v in zip(xb, xc))
        assert (m["b"], m["c"]) == (b, c), metric
        assert m["p"] == pytest.approx(binomtest(b, b + c, 0.5).pvalue if b + c else 1.0, rel=1e-9)
        assert m["mde"] == pytest.approx(2.801585 * math.sqrt(((b + c) / 20 if b + c else 1 / 20) / 20), rel=1e-6)
        ps.append(m["p"])
    # Holm over the 12 tests of the comparison, computed here by hand
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    running, holm = 0.0, [0.0] * len(ps)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        holm[i] = running
    assert [m["p_holm"] for m in s["metrics"].values()] == pytest.approx(holm)
    assert set(s["newly_broken"]) == {t for t in common if base[t]["P4"] == 1 and cand[t]["P4"] == 0}
    assert set(s["newly_fixed"]) == {t for t in common if base[t]["P4"] == 0 and cand[t]["P4"] == 1}
    changed = {t["text_id"]: t for t in s["changed_texts"]}
    assert set(changed) == set(s["newly_broken"]) | set(s["newly_fixed"])
    for tid, t in changed.items():
        for side, k in zip(("base", "cand"), pair):
            assert t[side] == {c: chosen[k][(tid, c)] for c in ("RU", "RC", "FU", "FC")}
    if pair == ("oracle", "r1"):
        assert len(s["newly_broken"]) == 20 and s["metrics"]["P4"]["b"] == 20 and s["metrics"]["P4"]["p_holm"] < 0.05


def test_identical_versions(stores: dict[str, Path]) -> None:
    comp = pfr.compare(str(stores["r1"]), str(stores["r1"]), draws=DRAWS)
    (s,) = comp.settings
    for m in s.metrics.values():
        assert (m.delta, m.low, m.high, m.b, m.c, m.p, m.p_holm) == (0, 0, 0, 0, 0, 1, 1)
        assert m.mde == pytest.approx(2.801585 / 20, rel=1e-6)  # the 1/n floor
    assert s.newly_broken == s.newly_fixed == () and s.only_base == s.only_cand == ()


def test_texts_on_one_side_are_listed(stores: dict[str, Path], pfr_cli: Cli) -> None:
    base = set(_per_text(_export(stores["oracle"], pfr_cli)))
    cand = set(_per_text(_export(stores["r30"], pfr_cli)))
    got = _compare(pfr_cli, str(stores["oracle"]), str(stores["r30"]))
    (s,) = got["settings"]
    assert s["n"] == len(base & cand) and cand - base
    assert set(s["only_base_texts"]) == base - cand and set(s["only_cand_texts"]) == cand - base
    done = pfr_cli("compare", str(stores["oracle"]), str(stores["r30"]), "--draws", str(DRAWS))
    assert f"texts scored only by CAND: {len(cand - base)}" in done.stdout


def test_store_at_model(stores: dict[str, Path], pfr_cli: Cli) -> None:
    both = stores["both"]
    picked = _compare(pfr_cli, f"{both}@baseline:oracle", f"{both}@baseline:random")
    separate = _compare(pfr_cli, str(stores["oracle"]), str(stores["r1"]))
    assert picked["base"]["model"] == "baseline:oracle" and picked["cand"]["model"] == "baseline:random"
    assert picked["settings"] == separate["settings"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{root}/missing", "no results store"),
        ("{both}", "holds 2 models"),
        ("{both}@baseline:nothing", "no model 'baseline:nothing'"),
        ("{demo}", "share no scored text: BASE has demo · main · direct; CAND has trec · main · direct"),
    ],
)
def test_bad_spec_is_exit_2_one_line(stores: dict[str, Path], pfr_cli: Cli, spec: str, message: str) -> None:
    spec = spec.format(root=stores["r1"].parent, both=stores["both"], demo=stores["demo"])
    done = pfr_cli("compare", spec, str(stores["r1"]))
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_markdown_and_text(stores: dict[str, Path], pfr_cli: Cli) -> None:
    for fmt in ("text", "markdown"):
        done = pfr_cli("compare", str(stores["oracle"]), str(stores["r1"]), "-f", fmt, "--draws", str(DRAWS))
        assert done.returncode == 0, done.stderr
        assert "trec · main · direct (n = 20 texts)" in done.stdout and "newly broken" in done.stdout
    assert "| metric | BASE | CAND |" in done.stdout
    out = stores["r1"].parent / "cmp.json"
    done = pfr_cli("compare", str(stores["r1"]), str(stores["r2"]), "-o", str(out), "--draws", str(DRAWS))
    assert (
        done.returncode == 0 and done.stdout == "" and json.loads(out.read_text())["cand"]["spec"] == str(stores["r2"])
    )
    done = pfr_cli("compare", str(stores["r1"]), str(stores["r2"]), "-o", str(out.with_suffix(".tex")))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_html_is_one_self_contained_page(stores: dict[str, Path], pfr_cli: Cli) -> None:
    out = stores["r1"].parent / "cmp.html"
    done = pfr_cli("compare", str(stores["oracle"]), str(stores["r1"]), "-o", str(out), "--draws", str(DRAWS))
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "://" not in page and page.count("<script") == 1
    comp = pfr.compare(str(stores["oracle"]), str(stores["r1"]), draws=DRAWS)
    assert page.count('<tr class="worse">') == sum(m.p_holm < 0.05 for m in comp.settings[0].metrics.values()) > 0
    assert "Newly broken: 20" in page and "What is an atom ?" in page


def test_classify_then_map_is_compared_as_its_mapped_quads(
    tmp_path: Path, data_dir: Path, pfr_cli: Cli
) -> None:
    """A classify-then-map reference run is one classification per text; compared, it is its mapped
    requests, as in a report: one setting, the metrics `pfr.metrics` gives each store, and J equal to
    each version's classification accuracy read from its export (before, no text was in common)."""
    stores = {}
    for name, opts in (("oracle", []), ("random", ["--model-opt", "seed=4"])):
        stores[name] = tmp_path / name
        done = pfr_cli("run", "-m", f"baseline:{name}", *opts, "--task", "classify-then-map", "-s",
                       str(stores[name]), "-d", "trec", "--limit", "20", "--data-dir", str(data_dir))  # fmt: skip
        assert done.returncode == 0, done.stderr
    comp = _compare(pfr_cli, str(stores["oracle"]), str(stores["random"]))
    [setting] = comp["settings"]
    assert (setting["design"], setting["n"]) == ("task=classify-then-map", 20)
    for side, name in (("base", "oracle"), ("cand", "random")):
        [point] = pfr.metrics(stores[name])
        assert point["design"] == "task=classify-then-map" and point["n"] == 20
        for metric, change in setting["metrics"].items():
            assert change[side] == pytest.approx(point[metric]), (name, metric)
        rows = _export(stores[name], pfr_cli)
        accuracy = sum(r["choice"] == r["expected"] for r in rows) / len(rows)
        assert len(rows) == 20 and setting["metrics"]["J_U"][side] == pytest.approx(accuracy)
    assert setting["metrics"]["J_U"]["cand"] < 1.0 and setting["newly_broken"]
    gate = pfr_cli("check", str(stores["random"]), "--baseline", str(stores["oracle"]), "--max-drop", "P4=0.02",
                   "--draws", str(DRAWS))  # fmt: skip
    assert gate.returncode == 1 and "task=classify-then-map" in gate.stdout, gate.stdout + gate.stderr


def test_mde_has_80_percent_power_in_simulation() -> None:
    """Paired binary data with discordance p_d and a true Δ equal to the MDE: the exact McNemar at
    α = .05 rejects in about 80 % of the replications (fixed seed)."""
    rng = np.random.default_rng(2026)
    for n, p_d in ((400, 0.2), (1000, 0.1), (200, 0.3)):
        effect = mde(round(p_d * n), 0, n)  # the MDE of an observed discordance p_d
        p_b, p_c = (p_d - effect) / 2, (p_d + effect) / 2
        counts = rng.multinomial(n, [p_b, p_c, 1 - p_d], size=2000)
        power = np.mean([binomtest(int(b), int(b + c), 0.5).pvalue < 0.05 for b, c, _ in counts])
        assert 0.7 <= power <= 0.9, (n, p_d, power)
