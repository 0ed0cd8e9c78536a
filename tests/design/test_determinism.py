"""`pfr build` is byte-identical across processes and PYTHONHASHSEED, and writes the documented fields."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pfr

DATASETS = ("clinc150", "banking77", "trec")
HASH_SEEDS = ("1", "2")
FIELDS = (
    "request_id", "text_id", "dataset", "panel", "assignment", "definition", "text",
    "options", "expected", "fallback_index", "criterion", "factors",
)  # fmt: skip


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[tuple[str, str], Path]:
    """The main panels built by six `pfr build` processes, run in parallel: (dataset, hash seed) → file."""
    out = tmp_path_factory.mktemp("builds")
    procs = {}
    for seed in HASH_SEEDS:
        for name in DATASETS:
            path = out / f"{name}-{seed}.jsonl"
            env = {**os.environ, "PYTHONHASHSEED": seed}
            cmd = [sys.executable, "-c", "from pfr.cli import main; main()", "build", "-d", name]
            cmd += ["--data-dir", str(data_dir), "-o", str(path)]
            procs[(name, seed)] = (path, subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True))
    for (name, seed), (_path, proc) in procs.items():
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, (name, seed, err)
        assert f"({len_texts(name)} texts)" in err
    return {key: path for key, (path, _) in procs.items()}


def len_texts(name: str) -> int:
    return {"clinc150": 450, "banking77": 385, "trec": 500}[name]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_builds_are_byte_identical_across_hash_seeds(builds: dict[tuple[str, str], Path]) -> None:
    total = 0
    for name in DATASETS:
        a, b = builds[(name, "1")], builds[(name, "2")]
        assert _sha(a) == _sha(b), name
        lines = a.read_bytes().split(b"\n")
        assert lines[-1] == b""
        n_requests = sum(json.loads(x).get("kind") == "request" for x in lines[:-1])
        total += n_requests
        assert n_requests == 4 * len_texts(name)
    assert total == 5_340


def test_api_build_writes_the_same_bytes(builds: dict[tuple[str, str], Path], data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "trec.jsonl"
    requests = pfr.build("trec", data_dir=data_dir)
    pfr.write_requests(requests, path)
    assert path.read_bytes() == builds[("trec", "1")].read_bytes()
    assert pfr.read_requests(path) == requests


@pytest.mark.parametrize("name", DATASETS)
def test_jsonl_fields(builds: dict[tuple[str, str], Path], name: str) -> None:
    # Format version 2 (pfr.design.jsonl): inventories and factors are records of their own; resolve
    # them so that each request row is checked with every documented field.
    with builds[(name, "1")].open(encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    assert records[0] == {"format": "pfr-requests", "version": 2}
    inventories = {r["key"]: r["categories"] for r in records if r.get("kind") == "inventory"}
    factors = {r["key"]: r["factors"] for r in records if r.get("kind") == "factors"}
    rows = []
    for r in records:
        if r.get("kind") != "request":
            continue
        r["inventory"] = [{"id": i, "description": d, "parent": p} for i, d, p in inventories[r["inventory"]]]
        r["factors"] = factors[r["factors"]]
        r["options"] = [{"symbol": s, "category": c, "is_fallback": fb, "label": lab} for s, c, fb, lab in r["options"]]
        rows.append(r)
    for i, row in enumerate(rows):
        for key in FIELDS:
            assert key in row, key
        assert (row["dataset"], row["panel"]) == (name, "main")
        assert row["assignment"] == "RF"[i // 2 % 2] and row["definition"] == "UC"[i % 2]
        assert isinstance(row["text"], str) and row["text"]
        assert len(row["options"]) == 16
        for j, opt in enumerate(row["options"]):
            assert {"symbol", "category", "is_fallback"} <= set(opt)
            assert opt["is_fallback"] == (j == row["fallback_index"]) == (opt["category"] is None)
        if row["assignment"] == "F":
            assert row["expected"] == row["fallback_index"]
        else:
            assert row["options"][row["expected"]]["category"] == row["y"]
        assert row["factors"]["k"] == 16 and row["factors"]["fallback"] == "Other"
        assert [c["id"] for c in row["inventory"]] == sorted(c["id"] for c in row["inventory"])
