"""A fixed run end to end against committed files: refactoring must not change what users get.

``pfr build`` (TREC, 4 texts), two baselines and the MiniLM router scored into stores, the baseline
store's report in every text format and both exports. Requests, the baseline reports and the
baseline export compare byte for byte (the export without its timing field); the router's choices
exactly and its scores within 5e-5: MiniLM's float32 products differ between CPU kinds (an AMD EPYC
without AVX-512 gave 5.7e-6 against the file, which was written on an Intel Xeon with AVX-512).

``PFR_GOLDEN_WRITE=1`` rewrites tests/golden/ from the current code (only after a change of
behaviour that is meant).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from pfr.cli import main

GOLDEN = Path(__file__).resolve().parent / "golden"
WRITE = os.environ.get("PFR_GOLDEN_WRITE") == "1"
FORMATS = {"text": "txt", "markdown": "md", "latex": "tex", "csv": "csv", "json": "json"}


def _export_rows(path: Path) -> list[dict[str, Any]]:
    """An export's rows without the timing; prompt and options as SHA-256 (keeps the committed file small)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for r in rows:
        r.pop("seconds")
        r["options"] = json.dumps(r["options"], ensure_ascii=False, sort_keys=True)
        for key in ("prompt", "options"):
            if r[key] is not None:
                r[key] = hashlib.sha256(r[key].encode("utf-8")).hexdigest()
    return rows


def _same_bytes(got: Path, name: str) -> None:
    want = GOLDEN / name
    if WRITE:
        want.write_bytes(got.read_bytes())
    assert got.read_bytes() == want.read_bytes(), f"{name} differs from tests/golden/{name}"


@pytest.fixture(scope="module")
def requests_file(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    if WRITE:
        GOLDEN.mkdir(exist_ok=True)
    out = tmp_path_factory.mktemp("golden") / "requests.jsonl"
    main(["build", "-d", "trec", "--panel", "main", "--limit", "4", "--data-dir", str(data_dir), "--out", str(out)])
    return out


def test_requests(requests_file: Path) -> None:
    _same_bytes(requests_file, "requests.jsonl")


def test_baseline_reports_and_export(requests_file: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    for model in ("baseline:random", "baseline:oracle"):
        main(["run", "--requests", str(requests_file), "--model", model, "--store", str(store), "--no-progress"])
    for fmt, suffix in FORMATS.items():
        out = tmp_path / f"report.{suffix}"
        main(["report", str(store), "--format", fmt, "--draws", "200", "--out", str(out)])
        _same_bytes(out, f"report.{suffix}")
    main(["export", str(store), "--out", str(tmp_path / "export.jsonl")])
    got = _export_rows(tmp_path / "export.jsonl")
    if WRITE:
        (GOLDEN / "export-baselines.jsonl").write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in got), encoding="utf-8"
        )
    assert got == _export_rows_golden("export-baselines.jsonl")


def _export_rows_golden(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (GOLDEN / name).read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_router_scores(requests_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    store = tmp_path / "store"
    main(["run", "--requests", str(requests_file), "--model", "minilm-router", "--store", str(store), "--no-progress"])
    main(["export", str(store), "--out", str(tmp_path / "export.jsonl")])
    got = {r["request_id"]: r for r in _export_rows(tmp_path / "export.jsonl")}
    if WRITE:
        slim = {k: {"scores": r["scores"], "choice": r["choice"], "prompt": r["prompt"]} for k, r in got.items()}
        (GOLDEN / "router-scores.json").write_text(json.dumps(slim, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    want = json.loads((GOLDEN / "router-scores.json").read_text(encoding="utf-8"))
    assert sorted(got) == sorted(want)
    for rid, w in want.items():
        g = got[rid]
        assert g["prompt"] == w["prompt"], rid
        assert g["choice"] == w["choice"], rid
        assert len(g["scores"]) == len(w["scores"])
        assert all(math.isclose(a, b, rel_tol=0, abs_tol=5e-5) for a, b in zip(g["scores"], w["scores"])), rid
