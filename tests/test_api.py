"""The Python API: build, write/read, run (specs and backend objects), model loading errors."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.api import atomic_write
from pfr.design.types import Request
from pfr.errors import DataError, ModelError, StoreError
from pfr.models.simple.baselines import Baseline
from pfr.run.store import Store


@pytest.fixture(scope="module")
def demo() -> list[Request]:
    return pfr.build("demo")


def test_build_demo(demo: list[Request]) -> None:
    assert len(demo) == 576
    assert [r.index for r in demo[:8]] == [0, 0, 0, 0, 1, 1, 1, 1]
    sample = pfr.build("demo", limit=5)  # a label-balanced hash sample, in file order (not the first rows)
    assert len(sample) == 20 and len({r.y for r in sample}) == 5
    assert {r.text_id for r in sample} < {r.text_id for r in demo}
    other = pfr.build("demo", seed=1)
    assert [r.text_id for r in other] == [r.text_id for r in demo]  # user data keeps file order
    assert [r.options for r in other] != [r.options for r in demo]  # the design seed changes the draws


def test_write_read_roundtrip(demo: list[Request], tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    pfr.write_requests(demo, path)
    back = pfr.read_requests(path)
    assert back == demo
    assert [r.factors for r in back] == [r.factors for r in demo]
    kinds = [json.loads(x).get("kind") for x in path.read_text(encoding="utf-8").splitlines()]
    assert kinds.count("request") == 576


def test_read_requests_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="file not found"):
        pfr.read_requests(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"request_id": "x"}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl: line 1: not a pfr request"):
        pfr.read_requests(bad)


def test_atomic_write_uses_the_umask_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "a.txt", ["x"])
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_atomic_write_never_leaves_half_a_file(tmp_path: Path) -> None:
    dest = tmp_path / "out.jsonl"
    dest.write_text("old\n")

    def lines() -> Iterator[str]:
        yield "first"
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        atomic_write(dest, lines())
    assert dest.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_run_with_a_backend_object_and_a_store_object(demo: list[Request], tmp_path: Path) -> None:
    with Store(tmp_path / "s") as st:
        first = pfr.run(Baseline("random", seed=3), demo[:40], st, progress=False, batch_size=7)
        again = pfr.run(Baseline("random", seed=3), demo[:40], st, progress=False)
        other = pfr.run(Baseline("random", seed=4), demo[:40], st, progress=False)
        assert (first.total, first.scored, first.cached) == (40, 40, 0)
        assert (again.scored, again.cached) == (0, 40)
        assert other.scored == 40 and other.model_key != first.model_key
        assert st.count() == 80
        choices: dict[int, list[int]] = {3: [], 4: []}
        for r in st.results():
            choices[r.model["seed"]].append(r.choice)
    assert choices[3] != choices[4]
    assert choices[3] == [pfr_choice(Baseline("random", seed=3), r) for r in demo[:40]]


def pfr_choice(model: Baseline, request: Request) -> int:
    logits = model.score([request])[0].logits
    return logits.index(max(logits))


def test_spec_and_object_give_the_same_results(demo: list[Request], tmp_path: Path) -> None:
    pfr.run("baseline:random", demo[:16], tmp_path / "a", options={"seed": 5}, progress=False)
    pfr.run(Baseline("random", seed=5), demo[:16], tmp_path / "b", progress=False)
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        assert [r.logprobs for r in a.results()] == [r.logprobs for r in b.results()]


def test_metrics_of_a_missing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no-store"):
        pfr.metrics(tmp_path / "no-store")
    assert not (tmp_path / "no-store").exists()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-17", "unknown model spec 'gpt-17'"),
        ("nosuch:thing", "unknown model spec 'nosuch:thing'"),
        ("baseline:psychic", "unknown baseline 'psychic'"),
        ("python:only_a_path.py", "python:PATH_OR_MODULE:FUNCTION"),
        ("python:pfr_no_such_module_xyz:f", "cannot import module 'pfr_no_such_module_xyz'"),
        ("python:json:no_such_function", "has no callable 'no_such_function'"),
    ],
)
def test_model_spec_errors(spec: str, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        pfr.load_model(spec)


def _model_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "m.py"
    path.write_text(body)
    return str(path)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("def f(r):\n    return [0.0]\n", "returned 1 scores for 16 options"),
        ("def f(r):\n    raise ValueError('boom')\n", "failed on request .*ValueError: boom"),
        ("def f(r):\n    return [float('nan')] * len(r.options)\n", "returned NaN"),
        ("def f(r):\n    return ['high'] * len(r.options)\n", "non-numeric"),
        ("import not_a_module_xyz\n", "importing .*m.py failed"),
    ],
)
def test_python_model_errors(demo: list[Request], tmp_path: Path, body: str, message: str) -> None:
    path = _model_file(tmp_path, body)
    with pytest.raises(ModelError, match=message):
        model = pfr.load_model(f"python:{path}:f")
        model.score(demo[:1])


def test_python_model_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    with pytest.raises(ModelError, match=f"file not found: {missing}"):
        pfr.load_model(f"python:{missing}:f")


def test_python_model_identity_follows_its_source(tmp_path: Path) -> None:
    path = _model_file(tmp_path, "def f(r):\n    return [0.0] * len(r.options)\n")
    a = pfr.load_model(f"python:{path}:f").identity
    Path(path).write_text("def f(r):\n    return [1.0] * len(r.options)\n")
    b = pfr.load_model(f"python:{path}:f").identity
    assert a["source_sha"] != b["source_sha"]


def test_python_model_size_and_family_are_options(tmp_path: Path) -> None:
    path = _model_file(tmp_path, "def f(r):\n    return [0.0] * len(r.options)\n")
    plain = pfr.load_model(f"python:{path}:f").identity
    assert "params" not in plain and "family" not in plain  # only what the user declares
    ident = pfr.load_model(f"python:{path}:f", {"params": "1.5B", "family": "acme"}).identity
    assert (ident["params"], ident["family"]) == (1_500_000_000, "acme")
    assert pfr.load_model(f"python:{path}:f", {"params": "135M"}).identity["params"] == 135_000_000
    with pytest.raises(ModelError, match="not a parameter count"):
        pfr.load_model(f"python:{path}:f", {"params": "big"})
    with pytest.raises(ModelError, match="unknown python option tau"):
        pfr.load_model(f"python:{path}:f", {"tau": "1"})
    with pytest.raises(ModelError, match="temperature=0: must be a finite number > 0"):
        pfr.load_model(f"python:{path}:f", {"temperature": "0"})


def test_baseline_temperature_does_not_change_the_decision(demo: list[Request], tmp_path: Path) -> None:
    pfr.run("baseline:oracle", demo[:8], tmp_path / "s", options={"temperature": "0.25"}, progress=False)
    with Store(tmp_path / "s") as st:
        results = list(st.results())
    assert [r.choice for r in results] == [r.request.expected for r in results]
    for r in results:
        assert abs(sum(2.718281828459045**v for v in r.logprobs) - 1) < 1e-9


def test_report_export_and_thresholds_through_the_api(demo: list[Request], tmp_path: Path) -> None:
    """The functions the CLI calls for report, export and thresholds, used from Python."""
    from pfr.report.render import render_report

    reqs = demo[:32]
    store = tmp_path / "store"
    pfr.run("baseline:random", reqs, store, progress=False)
    text = pfr.api.report([store], "markdown", draws=50)
    assert text == render_report([str(store)], "markdown", draws=50)
    assert "baseline:random" in text
    figures = tmp_path / "figures"
    pfr.api.report([store], "json", draws=50, figures=figures)
    assert {p.suffix for p in figures.iterdir()} == {".png", ".svg"}
    out = tmp_path / "export.jsonl"
    assert pfr.api.export(store, out) == len(reqs)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["request_id"] for r in rows) == sorted(r.request_id for r in reqs)
    with pytest.raises(DataError, match="no development panel"):  # one store with its main panel only
        pfr.api.thresholds(store, store, draws=20)
    dev = tmp_path / "dev"
    pfr.run("baseline:random", demo[128:256], dev, progress=False)  # other texts of the same dataset
    assert "baseline:random" in pfr.api.thresholds(dev, store, draws=20)
    other = tmp_path / "other"
    pfr.run("baseline:oracle", reqs, other, progress=False)
    with pytest.raises(DataError, match="scored in both"):
        pfr.api.thresholds(store, other, draws=20)  # no model is in both stores


def test_build_notes_of_a_user_file(tmp_path: Path) -> None:
    path = tmp_path / "tickets.csv"
    rows = ["text,label", "a b c,x", "a b c,x", "d e f,y", "g h i,y", "j k l,x", "m n o,z", "p q r,z"]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    design = pfr.Design(k=3)
    notes = pfr.api.build_notes(str(path), design=design, limit=3, show_dropped=True)
    assert "dropped 1 duplicate text(s) and 0 row(s)" in notes[0]
    assert notes[1].startswith("  ") and "tickets.csv" in notes[1]
    assert "--limit 3: a hash-ranked sample of 3 of 6 texts" in notes[2]
    assert pfr.api.build_notes("trec", data_dir=os.environ.get("PFR_DATA_DIR")) == []  # a built-in set: no notes


# --------------------------------------------------------------------------- closing backends
def test_run_closes_the_backend_it_loaded_also_on_error(closing: Any, demo: list[Request], tmp_path: Path) -> None:
    pfr.run("closing:oracle", demo[:8], tmp_path / "a", progress=False)
    assert closing.CLOSED == ["oracle"]
    with pytest.raises(RuntimeError, match="scoring failed"):
        pfr.run("closing:fail", demo[:8], tmp_path / "b", progress=False)
    assert closing.CLOSED == ["oracle", "oracle"]  # the failed run's backend ("fail" scores as an oracle) too


def test_run_leaves_a_given_backend_open(closing: Any, demo: list[Request], tmp_path: Path) -> None:
    backend = closing.Closing("oracle")
    pfr.run(backend, demo[:8], tmp_path / "a", progress=False)
    pfr.run(backend, demo[8:16], tmp_path / "a", progress=False)  # the caller reuses it
    assert closing.CLOSED == []
