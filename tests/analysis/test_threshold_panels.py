"""``pfr thresholds`` keeps development and test apart by panel, never by storage order: one store
may hold both panels, a text in both sets stops the command, too few development texts for the
calibration are said, and a label-only setting is named instead of refusing the whole command."""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from pfr import api
from pfr.analysis.thresholds import threshold_summary
from pfr.run.store import Store


def _both_panels(store: Path, data_dir: Path, dev_first: bool) -> None:
    dev = api.build("trec", "development", data_dir=data_dir, limit=24)
    main = api.build("trec", "main", data_dir=data_dir, limit=32)
    for reqs in (dev, main) if dev_first else (main, dev):
        api.run("baseline:random", reqs, store, progress=False)


def _fit_by_hand(store: Path, panel: str) -> tuple[float, int]:
    """The development threshold as docs/usage.md states it, from the stored rows of ``panel`` alone:
    candidates are the midpoints of the sorted distinct margins, 0 and the extremes ± 1; the best has
    the highest mean B over U and C, then fewer false fallbacks, then smaller |τ|, then larger τ."""
    quads: dict[str, dict[str, tuple[float, bool]]] = {}
    with Store(store, create=False) as st:
        for r in st.results():
            q = r.request
            if q.panel != panel:
                continue
            fb = r.logprobs[q.fallback_index]
            regular = [(v, i) for i, v in enumerate(r.logprobs) if i != q.fallback_index]
            best = max(v for v, _ in regular)
            first = min(i for v, i in regular if v == best)
            quads.setdefault(q.text_id, {})[q.assignment + q.definition] = (fb - best, first == q.expected)
    margins = sorted({m for quad in quads.values() for m, _ in quad.values()})
    cands = {0.0, margins[0] - 1.0, margins[-1] + 1.0} | {(a + b) / 2 for a, b in itertools.pairwise(margins)}

    def score(tau: float) -> tuple[float, int, float, float]:
        right = false_fb = 0
        for quad in quads.values():
            for d in "UC":
                m_r, wins = quad["R" + d]
                right += (m_r <= tau and wins) + (quad["F" + d][0] > tau)
                false_fb += m_r > tau
        return (-round(right / (4 * len(quads)), 12), false_fb, abs(tau), -tau)

    return min(cands, key=score), len(quads)


def test_one_store_with_both_panels_fits_on_the_development_panel_in_either_order(
    data_dir: Path, tmp_path: Path
) -> None:
    outputs = []
    for dev_first in (True, False):
        store = tmp_path / f"dev_first_{dev_first}"
        _both_panels(store, data_dir, dev_first)
        rows = json.loads(api.thresholds(store, store, draws=50, fmt="json"))
        (row,) = (r for r in rows if r["panel"] == "main")
        tau, n_dev = _fit_by_hand(store, "development")
        assert math.isclose(row["tau_dev"], tau, rel_tol=0, abs_tol=1e-12), dev_first
        assert row["n_dev"] == n_dev == 24 and row["n"] == 32
        assert [(r["panel"], r.get("dev_panel")) for r in rows] == [("main", "development")]  # never tested on dev
        assert not math.isclose(tau, _fit_by_hand(store, "main")[0])  # fitting on the test texts differs
        outputs.append(rows)
    assert outputs[0] == outputs[1]


def test_a_text_in_both_sets_stops_the_command(pfr_cli: Callable[..., Any], tmp_path: Path) -> None:
    rows = [("how do I reset my password", "account"), ("where is my parcel", "shipping"),
            ("cancel my order please", "orders"), ("the app crashes on start", "bugs"),
            ("change my delivery address", "shipping"), ("refund for a broken item", "orders"),
            ("i cannot log in", "account"), ("the page is blank", "bugs")]  # fmt: skip
    dev = rows[:5]
    test = [("Where is my parcel?", "shipping"), ("Cancel my order,  please!", "orders"), *rows[5:]]
    for name, part in (("dev.csv", dev), ("test.csv", test)):
        with open(tmp_path / name, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([("text", "label"), *part])
    for name in ("dev", "test"):
        res = pfr_cli("run", "-m", "baseline:random", "-d", f"{name}.csv", "--dataset-name", "tickets",
                      "--options", "4", "--store", name, "--no-progress", cwd=tmp_path)  # fmt: skip
        assert res.returncode == 0, res.stderr
    res = pfr_cli("thresholds", "--dev", "dev", "--test", "test", cwd=tmp_path)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and res.stdout == "" and len(lines) == 1, res.stderr
    assert "2 text(s) are in both" in lines[0] and "--dev-fraction" in lines[0]
    res = pfr_cli("thresholds", "--dev", "test", "--test", "test", cwd=tmp_path)  # one store, no development panel
    assert res.returncode == 2 and "no development panel" in res.stderr and "--dev-fraction" in res.stderr


def test_too_few_development_texts_for_the_calibration_are_said(data_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / "s"
    api.run("baseline:random", api.build("trec", "development", data_dir=data_dir, limit=8), store, progress=False)
    api.run("baseline:random", api.build("trec", "main", data_dir=data_dir, limit=16), store, progress=False)
    text = api.thresholds(store, store, draws=20)
    assert "τ = +∞, 8 development texts are too few for α=0.05 (at least 19)" in text
    (row,) = json.loads(api.thresholds(store, store, draws=20, fmt="json"))
    assert row["calibration"]["tau"] == "inf" and any("too few" in n for n in row["notes"])
    assert json.loads(api.thresholds(store, store, draws=20, alpha=0.2, fmt="json"))[0]["notes"] == []


def test_a_label_only_setting_is_named_and_the_others_analysed(data_dir: Path, tmp_path: Path) -> None:
    model = tmp_path / "labels.py"
    model.write_text("def decide(request):\n    return request.fallback_index\n", encoding="utf-8")
    store = tmp_path / "s"
    for panel, limit in (("development", 24), ("main", 16)):
        reqs = api.build("trec", panel, data_dir=data_dir, limit=limit)
        api.run("baseline:random", reqs, store, progress=False)
        api.run(f"python:{model}:decide", reqs, store, progress=False)
    text = api.thresholds(store, store, draws=20)
    assert "baseline:random · trec · direct  (test: main panel" in text
    notes = [line for line in text.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2 and all("labels.py" in n and "label-only" in n for n in notes), notes
    assert {n.split(" · ")[2] for n in notes} == {"development", "main"}
    rows = json.loads(api.thresholds(store, store, draws=20, fmt="json"))
    assert [r["model"] for r in rows if "skipped" not in r] == ["baseline:random"]
    assert sum("skipped" in r for r in rows) == 2
    assert np.isfinite(rows[0]["tau_dev"])


def test_an_invalid_answer_is_never_read_as_a_margin(data_dir: Path, tmp_path: Path) -> None:
    """A result flagged invalid keeps its whole setting out of the analyses, scores or not: its
    margin would make it a fallback pick or a correct regular answer."""
    store = tmp_path / "s"
    for panel, limit in (("development", 24), ("main", 16)):
        api.run("baseline:random", api.build("trec", panel, data_dir=data_dir, limit=limit), store, progress=False)
    with Store(store, create=False) as st:
        results = list(st.results())
    i = next(i for i, r in enumerate(results) if r.request.panel == "main")
    flagged = [*results[:i], replace(results[i], meta={**results[i].meta, "invalid": True}), *results[i + 1 :]]
    rows = threshold_summary(flagged, flagged, draws=20)
    assert [r.get("skipped", "")[:30] for r in rows] == ["1 invalid answer(s) (naming no"]
    assert rows[0]["panel"] == "main"


def test_one_store_analyses_the_settings_with_a_development_panel_and_names_the_others(
    data_dir: Path, tmp_path: Path
) -> None:
    store = tmp_path / "s"
    _both_panels(store, data_dir, dev_first=True)
    api.run("baseline:oracle", api.build("trec", "main", data_dir=data_dir, limit=16), store, progress=False)
    rows = json.loads(api.thresholds(store, store, draws=20, fmt="json"))
    assert [(r["model"], r["panel"], r.get("dev_panel")) for r in rows if "skipped" not in r] == [
        ("baseline:random", "main", "development")
    ]
    (skipped,) = [r for r in rows if "skipped" in r]
    assert skipped["model"] == "baseline:oracle" and "no development panel" in skipped["skipped"]
