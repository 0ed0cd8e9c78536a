"""The cost of a run before it starts (issue 26 item 1): token counts, an expected time, nothing stored;
the progress ETA follows the tokens left."""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pfr import api
from pfr.run import progress
from pfr.run.cost import distinct_tokens, new_tokens

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


def _pfr(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from pfr.cli import main; main()"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, env=env)


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def test_distinct_tokens_count_the_trie_nodes() -> None:
    seqs = [[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9], [7, 8], [1, 2, 3, 4, 6], [7, 8]]
    prefixes = {tuple(s[:i]) for s in seqs for i in range(1, len(s) + 1)}
    assert distinct_tokens(seqs) == len(prefixes) == 9
    assert new_tokens(seqs) == [4, 1, 1, 2, 5, 2]  # against the one before only
    assert new_tokens([[1, 2], [1, 2]]) == [2, 1]  # at least one: the answer is read after it


@pytest.mark.slow
def test_dry_run_prints_tokens_and_time_and_stores_nothing(tmp_path: Path) -> None:
    store = tmp_path / "smol"
    proc = _pfr("run", "--model", "smollm2-135m", "--dataset", "trec", "--data-dir", str(DATA), "--limit", "2",
                "--dry-run", "--store", str(store))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("8 requests to score with smollm2-135m\n"), out
    m = re.search(r"prompt tokens ([\d,]+); distinct \(must be computed, each shared prefix once\) ([\d,]+)", out)
    assert m, out
    prompt, distinct = (int(g.replace(",", "")) for g in m.groups())
    assert 0 < distinct < prompt  # the quads share their instruction and inventory
    assert re.search(r"expected time about \d+ (s|min)", out) and "an estimate" in out, out
    assert not store.exists()


@pytest.mark.slow
def test_counts_match_what_the_hf_backend_computes() -> None:
    from pfr.models.registry import load_model
    from pfr.run.cost import estimate

    reqs = api.build("trec", limit=2, data_dir=DATA)
    backend: Any = load_model("smollm2-135m")
    cost = estimate(backend, reqs, None, measure=False)
    assert cost.counts.requests == 8 and cost.rate is None
    before = backend.stats["computed_tokens"]
    backend.clear_prefixes()
    backend.score(reqs)  # one call: one trie over all eight prompts
    assert backend.stats["computed_tokens"] - before == cost.counts.distinct_tokens
    assert backend.stats["prompt_tokens"] == cost.counts.prompt_tokens


def test_dry_run_leaves_an_existing_store_unchanged(tmp_path: Path) -> None:
    store = tmp_path / "s"
    assert _pfr("run", "-m", "baseline:oracle", "-d", "trec", "--data-dir", str(DATA), "--limit", "2",
                "-s", str(store), "--no-progress").returncode == 0  # fmt: skip
    before = _snapshot(store)
    proc = _pfr("run", "-m", "baseline:oracle", "-d", "trec", "--data-dir", str(DATA), "--limit", "4",
                "-s", str(store), "--dry-run")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "8 requests to score with baseline:oracle (8 already in the store)"
    assert "expected time about" in proc.stdout and "requests/s" in proc.stdout
    after = _snapshot(store)
    # the database is byte-identical; a read-only open may leave SQLite's empty WAL side files
    assert after["results.sqlite"] == before["results.sqlite"]
    assert set(after) - set(before) <= {"results.sqlite-wal", "results.sqlite-shm"}
    assert (store / "results.sqlite-wal").stat().st_size == 0 if (store / "results.sqlite-wal").exists() else True


def test_study_dry_run_per_set_and_total(tmp_path: Path) -> None:
    study = tmp_path / "s.toml"
    study.write_text('store = "out"\n[[models]]\nmodel = "baseline:random"\n[[datasets]]\ndataset = "trec"\n'
                     'limit = 2\n[[designs]]\nmembership = [false, true]\n', encoding="utf-8")  # fmt: skip
    proc = _pfr("study", str(study), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    heads = [ln for ln in proc.stdout.splitlines() if not ln.startswith(" ")]
    assert len(heads) == 3 and heads[-1] == "baseline:random · total: 16 requests to score with baseline:random"
    assert all("trec/main" in h and h.endswith("8 requests to score with baseline:random") for h in heads[:2])
    assert not (tmp_path / "out").exists()


def test_progress_eta_follows_the_work_left() -> None:
    stream = io.StringIO()
    log = progress.ProgressLog(total=10, every=0.0, stream=stream, work=1000)
    log.advance(1, 900)  # the first request carried most of the tokens (the shared prefix)
    line = stream.getvalue().strip()
    assert re.fullmatch(r"pfr: scored 1/10 \(90%\), [\d.]+ req/s, eta \d+s", line), line


@pytest.mark.parametrize("prompts", [[None, None], ["a", None]])
def test_work_is_one_per_request_without_prompts(prompts: list[str | None]) -> None:
    class NoTokenizer:
        pass

    assert progress.work_weights(NoTokenizer(), prompts) == [1, 1]  # type: ignore[arg-type]
