"""The HTML report: self-contained, escaped, filterable; figures; rendering in headless Chromium."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pfr import api
from pfr.models.base import Scores
from pfr.report import render_report
from pfr.report.figures import CAPTIONS, position_recall, recall_size, size_series, threshold_curves, write_figures
from pfr.report.html import failure_kinds
from pfr.report.identity import model_family, parse_params
from pfr.report.model import load_report
from pfr.run.store import Store

from .conftest import XSS_LABEL, XSS_TEXT

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium (apt-get install chromium)")


@pytest.fixture(scope="module")
def html_report(trec_stores: dict[str, Path], xss_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    stores = [str(trec_stores["fickle"]), str(trec_stores["oracle"]), str(xss_store)]
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(render_report(stores, "html", draws=500), encoding="utf-8")
    return path


def test_html_is_self_contained_and_complete(html_report: Path) -> None:
    html = html_report.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html
    for title in ("Table 1. PFR results (%)", "Paired intervals of Δ", "Exact McNemar tests",
                  "Decision changes from U to C", "Table 2. Interventions against Direct"):
        assert title in html
    imgs = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(imgs) == len(CAPTIONS)
    assert html.count('<article class="card"') == 96 * 3 + 32  # every text of every setting
    assert html.count("<script") == 1  # only the report's own filter script
    assert "Content-Security-Policy" in html
    for kind in ("missed-fallback", "false-fallback", "wrong-regular", "disagreement"):
        assert f'value="{kind}"' in html


def test_html_escapes_dataset_and_model_text(html_report: Path) -> None:
    html = html_report.read_text(encoding="utf-8")
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; where is my parcel" in html
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "<b>bold" not in html
    assert XSS_TEXT not in html and XSS_LABEL not in html


def test_failure_kinds_match_indicators(trec_stores: dict[str, Path]) -> None:
    rep = load_report([str(trec_stores["fickle"])], draws=100)
    ind = rep.indicators
    for _, row in ind.iterrows():
        kinds = failure_kinds(row)
        if row["P4"] > 0.5:
            assert kinds == ()
        else:
            assert kinds
        assert ("disagreement" in kinds) == bool(row["DR_R"] or row["DR_F"])
        assert ("missed-fallback" in kinds) == (row["FU_fb"] + row["FC_fb"] < 2)


def test_figures_written_as_png_and_svg(trec_stores: dict[str, Path], tmp_path: Path) -> None:
    rep = load_report([str(trec_stores["fickle"]), str(trec_stores["oracle"])], draws=200)
    paths = write_figures(rep, tmp_path / "figs")
    assert sorted(p.name for p in paths) == sorted(f"{n}.{e}" for n in CAPTIONS for e in ("png", "svg"))
    for p in paths:
        head = p.read_bytes()[:8]
        assert head == b"\x89PNG\r\n\x1a\n" if p.suffix == ".png" else b"<svg" in p.read_bytes()[:400]
        assert p.stat().st_size > 5000


def test_threshold_curve_at_zero_is_the_native_decision(trec_stores: dict[str, Path]) -> None:
    """The fickle model has no tied maxima, so τ = 0 must reproduce its stored metrics exactly."""
    rep = load_report([str(trec_stores["fickle"]), str(trec_stores["random"])], draws=100)
    for s in rep.settings:
        cur = threshold_curves(rep, s, np.array([0.0, 1e9, -1e9]))
        for m in ("A+_U", "A+_C", "A-_U", "A-_C", "F+_U", "F+_C"):
            assert cur[m][0] == pytest.approx(s.metrics[m].value)
        assert cur["A-_U"][1] == 0.0 and cur["A-_U"][2] == 1.0  # huge τ: never fallback; very low: always


def test_position_recall_from_raw_choices(trec_stores: dict[str, Path]) -> None:
    rep = load_report([str(trec_stores["fickle"])], draws=50)
    got = position_recall(rep, rep.settings[0])
    hits: dict[tuple[str, int], list[bool]] = {}
    with Store(trec_stores["fickle"], create=False) as st:
        for r in st.results():
            q = r.request
            if q.assignment == "F" and q.design == "direct":
                hits.setdefault((q.definition, q.fallback_index + 1), []).append(r.choice == q.fallback_index)
    for d in ("U", "C"):
        want = [np.mean(hits[(d, p)]) if (d, p) in hits else np.nan for p in got["position"]]
        np.testing.assert_allclose(got[f"A-_{d}"], want)
    assert got["n"].sum() == 96 and len(got["position"]) == 16


class _SizedOracle:
    """An oracle whose identity declares its size, as a model card would."""

    temperature = 1.0

    def __init__(self, name: str, params: object, family: str | None = None) -> None:
        self._identity = {"backend": "test", "name": name, "params": params}
        if family:
            self._identity["family"] = family

    @property
    def identity(self) -> dict[str, object]:
        return self._identity

    def prompt(self, request: object) -> None:
        return None

    def score(self, requests: list) -> list[Scores]:
        return [Scores(tuple(0.0 if i == r.expected else -5.0 for i in range(len(r.options)))) for r in requests]


def test_recall_against_size_uses_params(data_dir: Path, tmp_path: Path) -> None:
    assert parse_params({"params": "135M"}) == 135e6
    assert parse_params({"n_params": 4_000_000_000}) == 4e9
    assert parse_params({"name": "x"}) is None and parse_params({"params": "big"}) is None
    reqs = api.build("trec", "main", data_dir=data_dir, limit=8)
    for name, size in (("small", "135M"), ("large", 1.7e9)):
        api.run(_SizedOracle(name, size), reqs, store=tmp_path / "s", progress=False)
    rep = load_report([str(tmp_path / "s")], draws=50)
    assert [s.params for s in rep.settings] == [135e6, 1.7e9]
    assert recall_size(rep).axes[0].get_xscale() == "log"
    rep1 = load_report([str(tmp_path / "s")], draws=50)
    object.__setattr__(rep1.settings[0], "params", None)  # one model without a size → report order
    assert recall_size(rep1).axes[0].get_xscale() == "linear"


def test_model_family_is_the_name_without_its_size() -> None:
    assert model_family({}, "smollm2-135m") == "smollm2"
    assert model_family({}, "qwen2.5-coder-1.5b") == "qwen2.5-coder"
    assert model_family({}, "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf") == "qwen2.5-coder-instruct"
    assert model_family({}, "/models/SmolLM2-360M-Instruct/") == "smollm2-instruct"
    assert model_family({}, "smollm2-135m [llamacpp]") == "smollm2"
    assert model_family({}, "minilm-router") == "minilm-router"
    assert model_family({}, "python:my.py:score") == "python:my.py:score"
    assert model_family({"family": "acme"}, "smollm2-135m") == "acme"  # a declared family wins


def test_recall_against_size_never_joins_two_families(data_dir: Path, tmp_path: Path) -> None:
    reqs = api.build("trec", "main", data_dir=data_dir, limit=8)
    sized = (("smollm2-135m", "135M", None), ("smollm2-360m", "360M", None),
             ("gemma3-270m", "270M", None), ("acme-xl", "2B", "qwen2.5"), ("qwen2.5-0.5b", "0.5B", None))  # fmt: skip
    for name, size, fam in sized:
        api.run(_SizedOracle(name, size, fam), reqs, store=tmp_path / "s", progress=False)
    rep = load_report([str(tmp_path / "s")], draws=50)
    series = size_series(rep)
    got = {k[3]: [s.model for s in v] for k, v in series.items()}
    assert got == {"smollm2": ["smollm2-135m", "smollm2-360m"], "gemma3": ["gemma3-270m"],
                   "qwen2.5": ["qwen2.5-0.5b", "acme-xl"]}  # fmt: skip
    fig = recall_size(rep)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    # every drawn line (errorbar data line) stays inside one family: its points are that family's sizes
    # (drawn a little to one side of the true x, by less than a quarter of a decade)
    def family_of(x: float) -> str:
        near = min((s for v in series.values() for s in v), key=lambda s: abs(math.log10(x / (s.params or 1))))
        assert abs(math.log10(x / (near.params or 1))) < 0.25
        return near.family or ""

    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1 and ln.get_linestyle() != "None"]
    assert len(lines) == 4, "smollm2 and qwen2.5, under U and C"
    for ln in lines:
        fams = [family_of(float(x)) for x in ln.get_xdata()]
        assert len(set(fams)) == 1 and len(fams) == 2, fams
    # the single-size family is a marker without a line
    gem = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 1 and family_of(float(ln.get_xdata()[0])) == "gemma3"]
    assert gem and all(ln.get_linestyle() == "None" for ln in gem)
    names = [t.get_text() for t in ax.child_axes[0].get_xticklabels()]  # the top axis names each model size
    assert names == ["smollm2-135m", "gemma3-270m", "smollm2-360m", "qwen2.5-0.5b", "acme-xl"]
    out = rep.as_dict()["settings"]
    assert {(s["model"], s["family"], s["params"]) for s in out} >= {("acme-xl", "qwen2.5", 2e9)}


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip


@needs_chromium
def test_chromium_dom_shows_markup_as_text(html_report: Path) -> None:
    res = _chromium("--dump-dom", html_report.as_uri())
    dom = res.stdout
    assert "PFR report" in dom, res.stderr[-2000:]
    assert dom.count("<script") == 1
    assert "alert(1)</script>" not in dom.replace("&lt;/script&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt; where is my parcel" in dom
    assert "<img src=\"x\"" not in dom and "<img src=x" not in dom
    # the filter script ran (CSP allowed it by hash): it wrote the count of shown cases
    assert re.search(r'id="f-count"[^>]*>\d+ of \d+ shown<', dom)


@needs_chromium
def test_screenshot_script(html_report: Path, tmp_path: Path) -> None:
    out = tmp_path / "shot.png"
    res = subprocess.run(["bash", str(ROOT / "scripts" / "screenshot_report.sh"), str(html_report), str(out)],
                         capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
    assert res.returncode == 0, res.stderr
    img = Image.open(out).convert("L")
    assert img.size == (1400, 2400)
    pixels = np.asarray(img, dtype=float)
    assert out.stat().st_size > 50_000
    assert pixels.std() > 20  # not a blank page
    assert (pixels < 128).mean() > 0.01  # a fair amount of dark text and lines
