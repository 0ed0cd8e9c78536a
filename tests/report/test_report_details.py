"""Report details (issue 9 item 7): tiny p-values, python labels, strict JSON, wrapped long text,
figure titles that never overlap."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pfr import api
from pfr.design.types import Design
from pfr.report import render_report
from pfr.report.cells import pval
from pfr.report.figures import figures
from pfr.report.model import json_safe, load_report


def _strict(text: str) -> object:
    def bad(name: str) -> None:
        raise AssertionError(f"JSON contains {name}")

    return json.loads(text, parse_constant=bad)


def test_tiny_p_values_never_print_as_zero() -> None:
    assert pval(0.0) == "< 1e-300"
    assert pval(5e-324) == "< 1e-300"
    assert pval(2e-300) == "2.0e-300"
    assert pval(0.0004) == "4.0e-04" and pval(0.25) == "0.250"


def test_json_safe_replaces_non_finite_numbers() -> None:
    import numpy as np

    data = {"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": np.float64("nan"), "d": (1, "x")}
    assert json_safe(data) == {"a": None, "b": ["inf", "-inf", 1.5], "c": None, "d": [1, "x"]}
    json.dumps(json_safe(data), allow_nan=False)


def test_python_models_are_labelled_with_their_function(trec_stores: dict[str, Path]) -> None:
    text = render_report([str(trec_stores["fickle"])], "text", draws=100)
    assert "python:fickle.py:score" in text


def test_thresholds_json_is_strict_with_an_infinite_calibration(data_dir: Path, tmp_path: Path) -> None:
    dev, test = tmp_path / "dev", tmp_path / "test"
    api.run("baseline:random", api.build("trec", "development", data_dir=data_dir, limit=8), dev, progress=False)
    api.run("baseline:random", api.build("trec", "main", data_dir=data_dir, limit=16), test, progress=False)
    code = "from pfr.cli import main; main()"
    proc = subprocess.run([sys.executable, "-c", code, "thresholds", "--dev", str(dev), "--test", str(test),
                           "--format", "json", "--draws", "50"], capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Infinity" not in proc.stdout and "NaN" not in proc.stdout
    rows = _strict(proc.stdout)
    assert isinstance(rows, list) and rows
    assert '"inf"' in proc.stdout  # 8 development texts: no order statistic reaches the 95 % level


def test_report_json_is_strict(trec_stores: dict[str, Path]) -> None:
    stores = [str(trec_stores[k]) for k in ("random", "fickle")]
    text = render_report(stores, "json", draws=100)
    assert "NaN" not in text and "Infinity" not in text
    _strict(text)


def test_long_unbroken_text_wraps_in_the_html(tmp_path: Path, fickle_model: str) -> None:
    import csv

    long_word = "x" * 600
    path = tmp_path / "long.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows([[f"{long_word}{i}", f"topic_{i % 4}"] for i in range(8)])
    store = tmp_path / "store"
    api.run(fickle_model, api.build(str(path), design=Design(k=4)), store, progress=False)
    html = render_report([str(store)], "html", draws=50)
    assert long_word in html
    rule = next(line for line in html.splitlines() if line.strip().startswith(".text {"))
    assert "overflow-wrap: anywhere" in rule and "pre-wrap" in rule


@pytest.mark.parametrize("n_models", [3, 6])
def test_figure_titles_never_overlap(data_dir: Path, tmp_path: Path, n_models: int) -> None:
    reqs = api.build("trec", "main", data_dir=data_dir, limit=16)
    stores = []
    for i in range(n_models):
        source = tmp_path / f"a_model_with_a_very_long_descriptive_file_name_number_{i}.py"
        source.write_text(f"def decide_with_a_long_function_name(r):\n    return [float(j == {i} % len(r.options))"
                          " for j in range(len(r.options))]\n")  # fmt: skip
        store = tmp_path / f"store{i}"
        api.run(f"python:{source}:decide_with_a_long_function_name", reqs, store, progress=False)
        stores.append(str(store))
    report = load_report(stores, draws=50)
    checked = 0
    for name, fig in figures(report).items():
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        boxes = [ax.title.get_window_extent(renderer) for ax in fig.axes if ax.get_visible() and ax.get_title()]
        for a, b in itertools.combinations(boxes, 2):
            assert not a.overlaps(b), (name, a, b)
        width = fig.bbox.width
        for box in boxes:
            assert box.x0 >= -1 and box.x1 <= width + 1, (name, box)
        checked += len(boxes)
    assert checked >= n_models  # at least one panelled figure was checked
