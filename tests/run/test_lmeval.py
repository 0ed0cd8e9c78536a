"""lm-evaluation-harness interchange (issue 23 item 6): `pfr export --format lm-eval` writes a task that
carries pfr's exact prompts and symbols; `pfr import --from lm-eval` reads lm-eval's --log_samples back.

The fixtures are real outputs of ``benchmarks/lm_eval_roundtrip.py --limit 1 -k 4 --keep DIR``:
``pfr_export.jsonl`` (pfr's own float32 hf scores of SmolLM2-135M on one TREC text, the main panel's
four requests) and ``lm_eval_samples.jsonl`` (lm-eval 0.4.13's ``--log_samples`` file for the task
exported from that store). The last test runs the real lm-eval where the benchmark environment has it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pfr.design.types import Request
from pfr.models.lm.letters import answer_form
from pfr.run.store import Store, StoredResult

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "lmeval"


def _pfr(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from pfr.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)


def _ok(*args: str) -> subprocess.CompletedProcess[str]:
    proc = _pfr(*args)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Store A (pfr's scores), the exported task folder, store B (lm-eval's scores imported)."""
    tmp = tmp_path_factory.mktemp("lmeval")
    _ok("import", str(FIX / "pfr_export.jsonl"), "--store", str(tmp / "A"))
    _ok("export", str(tmp / "A"), "--format", "lm-eval", "--out", str(tmp / "task"), "--task", "pfr_trec")
    _ok("import", str(FIX / "lm_eval_samples.jsonl"), "--from", "lm-eval", "--store", str(tmp / "B"))
    return tmp / "A", tmp / "task", tmp / "B"


def _results(store: Path) -> dict[str, StoredResult]:
    with Store(store, create=False) as st:
        return {r.request.request_id: r for r in st.results()}


def test_export_writes_a_multiple_choice_task_with_pfrs_prompts(stores: tuple[Path, Path, Path]) -> None:
    a, task, _ = stores
    spec = yaml.safe_load((task / "pfr_trec.yaml").read_text())
    assert spec["task"] == "pfr_trec"
    assert spec["output_type"] == "multiple_choice"
    assert (spec["doc_to_text"], spec["doc_to_choice"], spec["doc_to_target"]) == ("prompt", "choices", "target")
    assert spec["target_delimiter"] == ""  # the continuation is the choice text itself
    assert Path(spec["dataset_kwargs"]["data_files"]["test"]) == (task / "docs.jsonl").resolve()
    docs = [json.loads(line) for line in (task / "docs.jsonl").read_text().splitlines()]
    results = _results(a)
    assert sorted(d["request_id"] for d in docs) == sorted(results)
    for d in docs:
        r = results[d["request_id"]]
        assert r.prompt is not None and d["prompt"] == r.prompt
        assert d["choices"] == [answer_form(r.prompt, o.symbol) for o in r.request.options]
        assert d["target"] == r.request.expected
        assert Request.from_dict(json.loads(d["pfr_request"])) == r.request
        assert json.loads(d["pfr_model"]) == r.model


def test_lm_eval_scored_exactly_the_exported_strings() -> None:
    """lm-eval's own record of what it scored: context + continuation = pfr's prompt + symbol."""
    for line in (FIX / "lm_eval_samples.jsonl").read_text().splitlines():
        row = json.loads(line)
        doc = row["doc"]
        args = [row["arguments"][f"gen_args_{i}"] for i in range(len(doc["choices"]))]
        assert [x["arg_0"] + x["arg_1"] for x in args] == [doc["prompt"] + c for c in doc["choices"]]


def test_import_gives_lm_eval_scores_equal_to_pfrs(stores: tuple[Path, Path, Path]) -> None:
    a, b = _results(stores[0]), _results(stores[2])
    assert sorted(a) == sorted(b) and len(b) == 4
    for rid, ours in a.items():
        theirs = b[rid]
        assert theirs.model["backend"] == "lm-eval"
        assert theirs.model["name"] == "lm-eval:smollm2-135m"
        assert theirs.model["prompts_of"] == ours.model
        assert theirs.request == ours.request and theirs.prompt == ours.prompt
        assert max(abs(x - y) for x, y in zip(ours.logprobs, theirs.logprobs)) < 1e-4
        assert theirs.choice == ours.choice
        # the chat prompt ends in "\n": lm-eval adds log P("\n" | prompt) to every option alike
        shifts = [x - y for x, y in zip(ours.logits, theirs.logits)]
        assert max(shifts) - min(shifts) < 1e-4


def test_import_keeps_pfrs_timing_and_lm_evals_has_none(stores: tuple[Path, Path, Path]) -> None:
    """A pfr export row carries its request's seconds and the import keeps them; lm-eval's samples
    carry no per-request time, so its results store 0 (docs/lm-eval.md)."""
    exported = {json.loads(line)["request_id"]: json.loads(line)["seconds"]
                for line in (FIX / "pfr_export.jsonl").read_text().splitlines()}  # fmt: skip
    a, b = _results(stores[0]), _results(stores[2])
    assert {rid: r.seconds for rid, r in a.items()} == exported and all(s > 0 for s in exported.values())
    assert {r.seconds for r in b.values()} == {0.0}


def test_report_and_check_read_the_imported_store(stores: tuple[Path, Path, Path]) -> None:
    b = str(stores[2])
    out = _ok("report", b).stdout
    assert "lm-eval:smollm2-135m" in out and "trec" in out
    assert "lm-eval:smollm2-135m" in _ok("check", b, "--min", "P4=0", "--on", "point").stdout
    assert _pfr("check", b, "--min", "J=1.01", "--on", "point").returncode in (1, 2)


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "samples.jsonl"
    bad.write_text('{"doc_id": 0, "doc": {"question": "x"}, "filtered_resps": [["-1.0", "False"]]}\n')
    proc = _pfr("import", str(bad), "--from", "lm-eval", "--store", str(tmp_path / "S"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{bad}: line 1: doc:" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = _pfr("export", str(tmp_path / "S"), "--format", "csv", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_export_refuses_a_store_without_one_lm_model(data_dir: Path, tmp_path: Path) -> None:
    """Baselines have no prompt to export; prompts of two models cannot be one lm-eval task."""
    base = tmp_path / "base"
    _ok(
        "run",
        "-m",
        "baseline:oracle",
        "-d",
        "trec",
        "--data-dir",
        str(data_dir),
        "--limit",
        "1",
        "-s",
        str(base),
        "--no-progress",
    )
    proc = _pfr("export", str(base), "--format", "lm-eval", "--out", str(tmp_path / "t1"))
    assert proc.returncode == 2 and "no scored request with a prompt" in proc.stderr and "Traceback" not in proc.stderr
    two = tmp_path / "two"
    _ok("import", str(FIX / "pfr_export.jsonl"), "--store", str(two))
    _ok("import", str(FIX / "lm_eval_samples.jsonl"), "--from", "lm-eval", "--store", str(two))
    proc = _pfr("export", str(two), "--format", "lm-eval", "--out", str(tmp_path / "t2"))
    assert proc.returncode == 2 and "prompts of 2 models" in proc.stderr and not (tmp_path / "t2").exists()


def _bench_python() -> str | None:
    for cand in (os.environ.get("PFR_LM_EVAL_PYTHON"), str(ROOT / ".venv-bench" / "bin" / "python")):
        if cand and Path(cand).is_file():
            return cand
    return None


@pytest.mark.slow
@pytest.mark.skipif(
    _bench_python() is None, reason="lm-eval is not a pfr dependency: needs .venv-bench (make bench-lm-eval)"
)
def test_real_lm_eval_round_trip(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "lm_eval_roundtrip.py"), "--limit", "1", "-k", "4",
         "--bench-python", str(_bench_python()), "--json", str(tmp_path / "figures.json")],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert figures["imported"] == figures["requests"] == 4
    # the same computation in float32 on both sides (a bfloat16 side differs by ~1e-1, docs/lm-eval.md)
    assert (figures["pfr_dtype"], figures["lm_eval_dtype"]) == ("float32", "torch.float32")
    # float32 disagreement measured at 0.8e-5 to 2.1e-5 (docs/lm-eval.md): the bound is five times that
    assert figures["max_abs_diff_normalised"] < 1e-4 and figures["raw_shift_spread"] < 1e-4
