"""A batch array from the command line (issue 35 item 3): ``pfr run --shard I/N`` (or ``slurm``) in
each task, ``pfr merge`` afterwards, and the merged store's report byte for byte the one of a single
unsharded run; bad shards and clashing stores are one line and exit 2."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from .inprocess import run_pfr as _pfr

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()

MODEL = """
import hashlib

def score(r):
    h = hashlib.sha256((r.text + r.definition).encode()).digest()
    return [float(h[i]) / 32 for i in range(len(r.options))]
"""


def _run(capsys: pytest.CaptureFixture[str], models: list[str], store: Path, *shard: str) -> list[str]:
    said = []
    for model in models:
        for dataset in ("trec", "demo"):
            code, _, err = _pfr(capsys, "run", "-m", model, "-d", dataset, "--data-dir", str(DATA), "--limit", "20",
                                "-s", str(store), "--no-progress", *shard)  # fmt: skip
            assert code == 0, err
            said.append(err)
    return said


def _reports(capsys: pytest.CaptureFixture[str], store: Path) -> tuple[str, str]:
    code, text, err = _pfr(capsys, "report", str(store), "--draws", "500")
    assert code == 0, err
    code, js, err = _pfr(capsys, "report", str(store), "--format", "json", "--draws", "500")
    assert code == 0, err
    return text, js


def test_merged_shards_report_byte_identical_to_one_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    models = ["baseline:random", f"python:{tmp_path / 'model.py'}:score"]
    _run(capsys, models, tmp_path / "full")
    parts = [tmp_path / f"shard{i}" for i in (1, 2, 3)]
    for i, part in enumerate(parts[:2], start=1):
        said = _run(capsys, models, part, "--shard", f"{i}/3")
        assert all(err.splitlines()[-1].startswith(f"shard {i}/3: ") for err in said)
    # the third task of `sbatch --array=1-3`
    for name, value in {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1"}.items():
        monkeypatch.setenv(name, value)
    assert all(e.splitlines()[-1].startswith("shard 3/3: ") for e in _run(capsys, models, parts[2], "--shard", "slurm"))
    counts = [sqlite3.connect(p / "results.sqlite").execute("SELECT COUNT(*) FROM results").fetchone()[0]
              for p in [tmp_path / "full", *parts]]  # fmt: skip
    assert counts[0] == sum(counts[1:]) and all(counts[1:])

    code, _, err = _pfr(capsys, "merge", *map(str, parts), "--store", str(tmp_path / "merged"))
    assert code == 0 and f"merged 3 stores into {tmp_path / 'merged'}: {counts[0]} results added, 0 already" in err
    code, _, err = _pfr(capsys, "merge", *map(str, parts), "-s", str(tmp_path / "merged"))  # twice: a no-op
    assert code == 0 and f"0 results added, {counts[0]} already there" in err
    code, _, err = _pfr(capsys, "merge", *map(str, reversed(parts)), str(parts[1]), "-s", str(tmp_path / "reversed"))
    assert code == 0, err

    expected = _reports(capsys, tmp_path / "full")
    assert "baseline:random" in expected[0] and "model.py" in expected[0]
    assert _reports(capsys, tmp_path / "merged") == expected
    assert _reports(capsys, tmp_path / "reversed") == expected


def test_bad_shards_and_clashing_stores_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["run", "-m", "baseline:random", "-d", "trec", "--data-dir", str(DATA), "--limit", "8", "--no-progress"]
    for shard, says in [("0/2", "--shard 0/2: shard 0 is not between 1 and 2"), ("2", "expected I/N"),
                        ("slurm", "SLURM_ARRAY_TASK_ID is not set")]:  # fmt: skip
        monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
        code, out, err = _pfr(capsys, *base, "-s", str(tmp_path / "s"), "--shard", shard)
        assert (code, out) == (2, "") and err.count("\n") == 1 and says in err, err
        assert not (tmp_path / "s").exists()
    assert _pfr(capsys, *base, "-s", str(tmp_path / "a"))[0] == 0
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    with sqlite3.connect(tmp_path / "b" / "results.sqlite") as con:
        rkey = con.execute("SELECT request_key FROM results LIMIT 1").fetchone()[0]
        con.execute("UPDATE results SET choice = 1 - choice WHERE request_key = ?", (rkey,))
    code, out, err = _pfr(capsys, "merge", str(tmp_path / "a"), str(tmp_path / "b"), "-s", str(tmp_path / "m"))
    assert (code, out) == (2, "") and err.count("\n") == 1 and rkey in err and "baseline model random" in err, err
    assert not (tmp_path / "m").exists()
    code, _, err = _pfr(capsys, "merge", str(tmp_path / "nowhere"), "-s", str(tmp_path / "m"))
    assert code == 2 and err.count("\n") == 1 and "no results store here" in err


def test_study_shards_merge_to_the_study_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    study = tmp_path / "study.toml"
    study.write_text(f'name = "s"\nstore = "full"\ndata-dir = "{DATA}"\n[[models]]\nmodel = "baseline:random"\n'
                     '[[datasets]]\ndataset = "trec"\nlimit = 16\n[[datasets]]\ndataset = "demo"\nlimit = 8\n'
                     '[[designs]]\nwording = [1, 2]\n')  # fmt: skip
    code, _, err = _pfr(capsys, "study", str(study), "--no-progress")
    assert code == 0, err
    parts = [tmp_path / f"part{i}" for i in (1, 2)]
    for i, part in enumerate(parts, start=1):
        code, out, err = _pfr(capsys, "study", str(study), "--no-progress", "--shard", f"{i}/2", "--store", str(part))
        assert code == 0, err
        assert f"shard {i}/2 scored; no report" in err and not list(part.glob("report.*"))
    code, _, err = _pfr(capsys, "merge", *map(str, parts), "-s", str(tmp_path / "merged"))
    assert code == 0, err
    assert _reports(capsys, tmp_path / "merged") == _reports(capsys, tmp_path / "full")
    code, out, err = _pfr(capsys, "study", str(study), "--dry-run", "--no-progress", "--shard", "1/2")
    assert code == 0 and "total" in out, err
