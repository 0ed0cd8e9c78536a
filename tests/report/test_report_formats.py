"""`pfr report` in every format on real stores: JSON schema, tests against raw choices, Holm,
determinism, tables in the paper's layouts, parseable Markdown/LaTeX/CSV."""

from __future__ import annotations

import gc
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest
from statsmodels.stats.multitest import multipletests

from pfr import api
from pfr.analysis.bootstrap import paired_bootstrap, setting_rng
from pfr.analysis.metrics import DELTA_OF, INDICATORS, METRICS
from pfr.cli import main as cli_main
from pfr.design.types import Design
from pfr.errors import PfrError
from pfr.report import render_report
from pfr.report.model import load_report
from pfr.report.tables import table2, table4, table_boundary
from pfr.report.writers import csv_header
from pfr.run.store import Store

DRAWS = 2000


def _no_nan(text: str) -> dict:
    def bad(name: str) -> None:
        raise AssertionError(f"JSON contains {name}")

    return json.loads(text, parse_constant=bad)


@pytest.fixture(scope="module")
def report_json(trec_stores: dict[str, Path]) -> dict:
    stores = [str(trec_stores[k]) for k in ("random", "oracle", "fickle")]
    return _no_nan(render_report(stores, "json", draws=DRAWS, seed=3, family="all"))  # today's whole-report family


def test_json_schema(report_json: dict) -> None:
    assert report_json["draws"] == DRAWS and report_json["seed"] == 3
    settings = report_json["settings"]
    assert len(settings) == 4  # random, oracle, fickle direct, fickle membership
    assert report_json["family"] == {"name": "all", "tests": 8, "method": "holm", "alpha": 0.05,
                                     "description": "Holm family 'all': every test of the report; 8 tests"}
    for s in settings:
        for key in ("model", "dataset", "panel", "design", "n", "incomplete", "censored"):
            assert key in s
        assert s["n"] == 96 and s["incomplete"] == 0 and s["censored"] == 0
        for m in METRICS:
            iv = s[m]
            assert set(iv) == {"value", "lo", "hi"}
            assert 0 <= iv["lo"] <= iv["value"] <= iv["hi"] <= 1
        assert set(s["delta"]) == set(DELTA_OF)
        for iv in s["delta"].values():
            assert -1 <= iv["lo"] <= iv["value"] <= iv["hi"] <= 1
        assert set(s["decomposition"]) == {"R", "F"}
        assert set(s["decomposition"]["R"]) == {"c2w", "w2c", "w2w", "inv"}
        assert [t["metric"] for t in s["tests"]] == ["A-", "F+"]
        for t in s["tests"]:
            assert set(t) == {"metric", "b", "c", "p", "p_holm", "reject"}
    # settings keep the order of the stores given; direct before the intervention
    assert [s["model"].split(":")[0] for s in settings][:2] == ["baseline", "baseline"]
    assert [s["design"] for s in settings][2:] == ["direct", "membership"]


def _event_counts(store: Path, design: str) -> dict[str, tuple[int, int]]:
    """(b, c) of each test, computed from the raw stored choices."""
    cells: dict[str, dict[str, int]] = {}
    with Store(store, create=False) as st:
        for r in st.results():
            if r.request.design != design:
                continue
            fb = int(r.choice == r.request.fallback_index)
            cells.setdefault(r.request.text_id, {})[r.request.assignment + r.request.definition] = fb
    out = {}
    for metric, (u, c) in {"A-": ("FU", "FC"), "F+": ("RU", "RC")}.items():
        b = sum(1 for q in cells.values() if q[u] and not q[c])
        cc = sum(1 for q in cells.values() if q[c] and not q[u])
        out[metric] = (b, cc)
    return out


def test_mcnemar_from_raw_choices_and_holm(report_json: dict, trec_stores: dict[str, Path]) -> None:
    settings = report_json["settings"]
    fickle = [s for s in settings if s["model"] == "python:fickle.py:score"]
    assert len(fickle) == 2
    for s in fickle:
        raw = _event_counts(trec_stores["fickle"], s["design"])
        for t in s["tests"]:
            b, c = raw[t["metric"]]
            assert (t["b"], t["c"]) == (b, c)
            assert t["p"] == pytest.approx(binomtest(b, b + c, 0.5).pvalue if b + c else 1.0, rel=1e-12)
    direct = fickle[0]["tests"]
    assert direct[0]["c"] == 0 and direct[0]["b"] > 20  # C misses the fallback for ~half the texts
    pvals = [t["p"] for s in settings for t in s["tests"]]
    reject, adjusted, _, _ = multipletests(pvals, alpha=0.05, method="holm")
    got = [t for s in settings for t in s["tests"]]
    assert [t["p_holm"] for t in got] == pytest.approx(list(adjusted))
    assert [t["reject"] for t in got] == list(reject)
    assert direct[0]["reject"] and direct[1]["reject"]
    oracle = next(s for s in settings if s["model"] == "baseline:oracle")
    assert all(t["b"] == t["c"] == 0 and t["p"] == 1.0 for t in oracle["tests"])


def test_intervals_match_direct_bootstrap_and_degenerate(report_json: dict, trec_stores: dict[str, Path]) -> None:
    ind = api.indicators(trec_stores["random"])
    key = tuple(ind.index[0][:4])
    res = paired_bootstrap(ind[INDICATORS].to_numpy(), DRAWS, setting_rng(3, key))
    s = report_json["settings"][0]
    assert s["model"] == key[0]
    assert s["A-_C"] == res.metrics["A-_C"].as_dict()
    assert s["delta"]["J"] == res.delta["J"].as_dict()
    oracle = next(s for s in report_json["settings"] if s["model"] == "baseline:oracle")
    assert oracle["DR_F"] == {"value": 0.0, "lo": 0.0, "hi": 0.0}
    assert oracle["delta"]["A-"] == {"value": 0.0, "lo": 0.0, "hi": 0.0}


def test_same_seed_identical_other_seed_differs(trec_stores: dict[str, Path]) -> None:
    store = [str(trec_stores["random"])]
    a = render_report(store, "json", draws=500, seed=11)
    b = render_report(store, "json", draws=500, seed=11)
    c = render_report(store, "json", draws=500, seed=12)
    assert a == b
    assert a != c
    # a setting's intervals do not depend on the other stores in the report
    both = _no_nan(render_report([str(trec_stores["oracle"]), *store], "json", draws=500, seed=11))
    assert both["settings"][1]["A+_U"] == _no_nan(a)["settings"][0]["A+_U"]


def test_text_table1_layout(trec_stores: dict[str, Path]) -> None:
    text = render_report([str(trec_stores["fickle"])], "text", draws=500)
    assert "Table 1. PFR results (%)" in text
    head = next(line for line in text.splitlines() if line.startswith("model"))
    for col in ("dataset", "design", "n", "U", "C", "Δ", "DR-R", "DR-F", "P4"):
        assert col in head.split()
    assert "Table 2. Interventions against Direct (%)" in text
    rep = load_report([str(trec_stores["fickle"])], draws=200)
    s = rep.settings[0]
    row = next(line for line in text.splitlines() if line.startswith(s.model[:20]) and " direct " in line)
    # A− under C with its Δ, marked * where Holm rejects
    assert f"{100 * s.metrics['A-_C'].value:.1f}" in row
    assert f"{100 * s.delta['A-'].value:+.1f}*" in row


def test_table2_changes_in_pp(trec_stores: dict[str, Path]) -> None:
    rep = load_report([str(trec_stores["fickle"])], draws=200)
    direct, member = rep.settings
    t = table2(rep.settings)
    assert t is not None and len(t.rows) == 2
    cells = [c.text for c in t.rows[1]]
    change = 100 * (member.metrics["J_U"].value - direct.metrics["J_U"].value)
    assert cells[5] == f"{100 * member.metrics['J_U'].value:.1f} ({change:+.1f})".replace("(-0.0)", "(+0.0)")
    assert table2(rep.settings[:1]) is None


def test_table4_policy_counts(special_stores: dict[str, Path]) -> None:
    rep = load_report([str(special_stores["policy"])], draws=200)
    t = table4(rep.settings)
    assert t is not None
    s = rep.settings[0]
    ind = api.indicators(special_stores["policy"])
    row = [c.text for c in t.rows[0]]
    expected = [int(ind[c].sum()) for c in ("RU_ok", "RC_ok", "FU_ok", "FC_ok", "DR_R", "DR_F", "J_U", "J_C", "P4")]
    assert row[-9:] == [str(v) for v in expected]
    assert row[-10] == str(s.n) == "24"
    assert "Table 4. Policy decisions" in render_report([str(special_stores["policy"])], "markdown", draws=100)
    assert table4(load_report([str(special_stores["cross"])], draws=50).settings) is None


def test_boundary_table_counts_unnecessary_deferrals(data_dir: Path, tmp_path: Path) -> None:
    """Boundary panels require Fast on all four requests: Table 4 leaves them out, their own table
    counts Fast per slot and criterion, unnecessary Defers and texts right on all four."""
    reqs = api.build("trec", "boundary-zero-gain", Design(task="quality-cost"), data_dir=data_dir)
    stores = {}
    for kind in ("oracle", "always-fallback", "never-fallback"):
        stores[kind] = tmp_path / kind
        api.run(f"baseline:{kind}", reqs, stores[kind], progress=False)
    rep = load_report([str(p) for p in stores.values()], draws=50)
    assert table4(rep.settings) is None
    t = table_boundary(rep.settings)
    assert t is not None and len(t.rows) == 3
    got = {row[0].text: [c.text for c in row[-7:]] for row in t.rows}
    assert got["baseline:oracle"] == ["64", "64", "64", "64", "64", "0", "64"]
    assert got["baseline:always-fallback"] == ["64", "0", "0", "0", "0", "256", "0"]
    # never-fallback picks the regular option: Fast, right everywhere on a boundary panel
    assert got["baseline:never-fallback"] == ["64", "64", "64", "64", "64", "0", "64"]
    assert "Boundary conditions" in render_report([str(stores["oracle"])], "markdown", draws=50)


def test_compact_task_resamples_within_coarse_quotas(special_stores: dict[str, Path]) -> None:
    data = _no_nan(render_report([str(special_stores["cross"])], "json", draws=300))
    s = data["settings"][0]
    assert s["panel"] == "cross-backbone" and s["resampling"] == "stratified"
    rep = load_report([str(special_stores["cross"])], draws=300)
    strata = rep.texts["stratum"].tolist()
    assert set(strata) == {"ABBR", "DESC"}  # the first 64 texts of the quota panel
    res = paired_bootstrap(rep.indicators[INDICATORS].to_numpy(), 300, setting_rng(0, rep.settings[0].key), strata)
    assert s["A+_C"] == res.metrics["A+_C"].as_dict()


def _md_tables(text: str) -> list[list[list[str]]]:
    tables, cur = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            cur.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif cur:
            tables.append(cur)
            cur = []
    if cur:
        tables.append(cur)
    return tables


def test_markdown_parses(trec_stores: dict[str, Path]) -> None:
    text = render_report([str(p) for p in trec_stores.values()], "markdown", draws=300)
    tables = _md_tables(text)
    assert len(tables) == 5  # Table 1, intervals, tests, decomposition, Table 2
    for t in tables:
        assert len({len(r) for r in t}) == 1, t[0]
        assert all(re.fullmatch(r"-{3}:?", c) for c in t[1])
    assert tables[0][0][:3] == ["model", "dataset", "design"]
    assert "**" in text  # significant Δ of the fickle model in bold


def test_latex_parses(trec_stores: dict[str, Path]) -> None:
    text = render_report([str(p) for p in trec_stores.values()], "latex", draws=300)
    assert text.count(r"\begin{tabular}") == text.count(r"\end{tabular}") == 5
    for block in re.findall(r"\\begin\{tabular\}\{([lr]+)\}(.*?)\\end\{tabular\}", text, flags=re.S):
        spec, body = block
        for line in body.splitlines():
            if line.endswith(r"\\"):
                cells = re.split(r"(?<!\\)&", line[:-2])
                width = sum(int(m) for m in re.findall(r"\\multicolumn\{(\d+)\}", line)) + sum(
                    1 for c in cells if r"\multicolumn" not in c
                )
                assert width == len(spec), line
    assert r"\textbf{" in text
    assert "%" not in text.replace(r"\%", "").split("\n", 1)[1]  # only escaped percent signs in the body


def test_csv_parses_and_matches_json(trec_stores: dict[str, Path], report_json: dict) -> None:
    stores = [str(trec_stores[k]) for k in ("random", "oracle", "fickle")]
    frame = pd.read_csv(io.StringIO(render_report(stores, "csv", draws=DRAWS, seed=3, family="all")))
    assert list(frame.columns) == csv_header()
    assert len(frame) == len(report_json["settings"])
    for (_, row), s in zip(frame.iterrows(), report_json["settings"]):
        assert row["A-_U"] == pytest.approx(s["A-_U"]["value"])
        assert row["delta_F+_lo"] == pytest.approx(s["delta"]["F+"]["lo"])
        assert row["A-_p_holm"] == pytest.approx(s["tests"][0]["p_holm"])
        assert bool(row["F+_reject"]) == s["tests"][1]["reject"]
        assert row["F_w2w"] == s["decomposition"]["F"]["w2w"]
    assert np.isfinite(frame.select_dtypes("number").to_numpy()).all()


def test_cli_report_as_the_process_freezes_its_results(trec_stores: dict[str, Path], tmp_path: Path) -> None:
    """Run as the process's program, the report freezes what it built, so the collector's pass at
    exit skips it (in-process callers are left alone: the test below)."""
    code = (
        "import atexit, gc, sys; atexit.register(lambda: print('frozen', gc.get_freeze_count(), file=sys.stderr)); "
        "from pfr.cli import main; main()"
    )
    out = tmp_path / "r.json"
    args = ["report", str(trec_stores["oracle"]), "--format", "json", "--out", str(out), "--draws", "100"]
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    frozen = int(proc.stderr.split("frozen ")[1].split()[0])
    assert frozen > 1000 and out.stat().st_size > 0


def test_cli_report_json_out_and_errors(
    trec_stores: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    frozen = gc.get_freeze_count()
    cli_main(["report", str(trec_stores["oracle"]), "--format", "json", "--out", str(out), "--draws", "100"])
    assert gc.isenabled() and gc.get_freeze_count() == frozen  # called in-process: the caller's collector as it was
    data = _no_nan(out.read_text())
    assert data["settings"][0]["P4"]["value"] == 1.0
    with pytest.raises(SystemExit) as exc:
        cli_main(["report", str(trec_stores["oracle"]), "--format", "docx"])
    assert exc.value.code == 2
    assert "unknown report format 'docx'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli_main(["report", str(tmp_path / "missing")])
    assert exc.value.code == 2
    with pytest.raises(PfrError):
        render_report([str(trec_stores["oracle"])], "text", draws=0)


def test_empty_store_reports_no_settings(tmp_path: Path) -> None:
    with Store(tmp_path / "empty"):
        pass
    assert "no complete quads" in render_report([str(tmp_path / "empty")], "text")
    assert _no_nan(render_report([str(tmp_path / "empty")], "json"))["settings"] == []
    assert "<html" in render_report([str(tmp_path / "empty")], "html")


class _CensoringBackend:
    """A real backend that reports the last option's score as censored on gold-fallback requests
    (as an API whose top-k logprobs missed it would)."""

    temperature = 1.0

    @property
    def identity(self) -> dict[str, str]:
        return {"backend": "test", "name": "censoring"}

    def prompt(self, request: object) -> None:
        return None

    def score(self, requests: list) -> list:
        from pfr.models.base import Scores

        out = []
        for r in requests:
            k = len(r.options)
            logits = tuple(0.0 if i == r.expected else -1.0 - i for i in range(k))
            cens = tuple(r.assignment == "F" and i == k - 1 for i in range(k))
            out.append(Scores(logits, cens))
        return out


def test_incomplete_and_censored_are_reported(data_dir: Path, tmp_path: Path) -> None:
    reqs = api.build("trec", "main", data_dir=data_dir, limit=10)
    api.run(_CensoringBackend(), reqs[:-1], store=tmp_path / "s", progress=False)  # last quad lacks FC
    data = _no_nan(render_report([str(tmp_path / "s")], "json", draws=100))
    s = data["settings"][0]
    assert s["model"] == "censoring" and s["n"] == 9 and s["incomplete"] == 1
    assert s["censored"] == pytest.approx(0.5)
    text = render_report([str(tmp_path / "s")], "text", draws=100)
    assert "1 text(s) without all four requests" in text and "50.0% of requests" in text
