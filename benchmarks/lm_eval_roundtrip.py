"""pfr → lm-evaluation-harness → pfr: do lm-eval's scores of an exported task equal pfr's own?

Runs pfr's hf scoring (``--model``, float32) into store A, ``pfr export --format lm-eval``, the real
``lm_eval --model hf --include_path`` on that task (from the benchmark environment, which has lm-eval:
``.venv-bench`` from ``make bench-lm-eval``, or ``--bench-python``), ``pfr import --from lm-eval`` into
store B, and compares per option:

* ``normalised``: the log-probabilities over the options (what decisions and metrics use);
* ``raw``: the symbol's log-probability. lm-eval moves a prompt's trailing whitespace into the
  continuation, so after a prompt ending in whitespace (a chat template's ``assistant\\n``) its
  score adds log P(whitespace | prompt), the same for every option of a request; ``raw_shift_spread``
  is how much that shift varies within a request (0 when only the constant differs).

``python benchmarks/lm_eval_roundtrip.py --limit 2`` writes ``benchmarks/results/lm_eval_roundtrip.json``
(``--chat-template off``: ``lm_eval_roundtrip_plain.json``, plain prompts ending in ``Answer:``).
``--variants`` runs lm-eval at batch sizes 1, 4 and 16, with one thread, and in bfloat16 against pfr's
float32 and bfloat16 scores (``lm_eval_roundtrip_variants.json``): what float32 noise and a type
mismatch each look like.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import ROOT, offline_defaults, write_results


def _pfr(*args: str) -> None:
    code = "from pfr.cli import main; main()"
    subprocess.run([sys.executable, "-c", code, *args], check=True)


def _bench_python(given: str | None) -> str:
    for cand in [given, str(ROOT / ".venv-bench" / "bin" / "python")]:
        if cand and Path(cand).is_file():
            return cand
    sys.exit("no Python with lm-eval: run `make bench-lm-eval` or pass --bench-python")


def _scores(store: Path) -> dict[str, tuple[tuple[float, ...], tuple[float, ...], int]]:
    from pfr.run.store import Store

    with Store(store, create=False) as st:
        return {r.request.request_id: (r.logits, r.logprobs, r.choice) for r in st.results()}


def _dtype(store: Path) -> str:
    """The dtype in the identity of the store's model (one LM model: pfr's hf run)."""
    from pfr.run.store import Store

    with Store(store, create=False) as st:
        return str(next(iter(st.results())).model.get("dtype"))


#: ``--variants``: (label, lm-eval batch size, lm-eval dtype, pfr dtype, OMP_NUM_THREADS for lm-eval or None)
VARIANTS = (
    ("float32, B = 4", 4, "float32", "float32", None),
    ("float32, B = 1", 1, "float32", "float32", None),
    ("float32, B = 16", 16, "float32", "float32", None),
    ("float32, B = 4, OMP_NUM_THREADS=1", 4, "float32", "float32", "1"),
    ("lm-eval bfloat16, pfr float32", 4, "bfloat16", "float32", None),
    ("both bfloat16", 4, "bfloat16", "bfloat16", None),
)


def _pfr_store(args: argparse.Namespace, store: Path, dtype: str) -> None:
    run = ["run", "--model", args.model, "--model-opt", f"dtype={dtype}", "--dataset", args.dataset,
           "--limit", str(args.limit), "--store", str(store)]  # fmt: skip
    if args.chat_template:
        run += ["--model-opt", f"chat_template={args.chat_template}"]
    if args.options:
        run += ["--options", str(args.options)]
    _pfr(*run)


def _roundtrip(
    args: argparse.Namespace, bench: str, a_store: Path, t: Path, batch: int, lm_dtype: str, threads: str | None
) -> dict[str, Any]:
    """lm-eval on the export of ``a_store`` (pfr's scores), read back and compared with them."""
    t.mkdir(exist_ok=True)
    task = t / "task"
    if not task.exists():
        _pfr("export", str(a_store), "--format", "lm-eval", "--out", str(task), "--task", "pfr_roundtrip")
    folder = subprocess.run(
        [bench, "-c", "from pfr.models.lm.gguf_cache import PRESETS, ensure_converted; "
         f"print(ensure_converted(PRESETS[{args.model!r}]()))"],
        check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    ).stdout.strip().splitlines()[-1]  # fmt: skip
    lm_eval = str(Path(bench).parent / "lm_eval")
    out = Path(tempfile.mkdtemp(dir=t))
    env = {**os.environ, **({"OMP_NUM_THREADS": threads} if threads else {})}
    subprocess.run([lm_eval, "--model", "hf", "--model_args", f"pretrained={folder},dtype={lm_dtype}",
                    "--device", "cpu", "--batch_size", str(batch), "--include_path", str(task),
                    "--tasks", "pfr_roundtrip", "--log_samples", "--output_path", str(out / "O")],
                   check=True, env=env)  # fmt: skip
    samples = glob.glob(str(out / "O" / "*" / "samples_pfr_roundtrip_*.jsonl"))[0]
    results = json.loads(Path(glob.glob(str(out / "O" / "*" / "results_*.json"))[0]).read_text())
    _pfr("import", samples, "--from", "lm-eval", "--store", str(out / "B"))
    a, b = _scores(a_store), _scores(out / "B")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        _pfr("export", str(a_store), "--out", str(args.keep / "pfr_export.jsonl"))
        shutil.copy(samples, args.keep / "lm_eval_samples.jsonl")
    norm = raw = spread = 0.0
    same = 0
    for rid, (logits, logprobs, choice) in a.items():
        lg, lp, ch = b[rid]
        norm = max(norm, max(abs(x - y) for x, y in zip(logprobs, lp)))
        shifts = [x - y for x, y in zip(logits, lg)]
        raw = max(raw, max(abs(s) for s in shifts))
        spread = max(spread, max(shifts) - min(shifts))
        same += choice == ch
    print(f"{len(a)} requests: normalised log-probs max |Δ| {norm:.2e}; raw max |Δ| {raw:.2e} "
          f"(spread of the shift within a request {spread:.2e}); same decisions {same}/{len(a)}")  # fmt: skip
    return {
        "requests": len(a),
        "imported": len(b),
        "max_abs_diff_normalised": norm,
        "max_abs_diff_raw": raw,
        "raw_shift_spread": spread,
        "same_decisions": same,
        # both sides must compute in the same type: a bfloat16 side differs by ~1e-1 (docs/lm-eval.md)
        "pfr_dtype": _dtype(a_store),
        "lm_eval_dtype": str(results.get("config", {}).get("model_dtype")),
        "lm_eval_batch_size": batch,
        "lm_eval_omp_threads": threads,
        "lm_eval_transformers": str(results.get("transformers_version")),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="a GGUF-packaged hf preset")
    ap.add_argument("--dataset", default="trec")
    ap.add_argument("--limit", type=int, default=2, help="texts (4 requests each on the main panel)")
    ap.add_argument("--options", "-k", type=int, default=None, help="options per request (pfr's default if unset)")
    ap.add_argument("--chat-template", choices=["on", "off"], help="pfr's chat_template option (the preset's if unset)")
    ap.add_argument("--variants", action="store_true",
                    help="lm-eval at batch sizes 1, 4, 16, one thread, and bfloat16 on one or both sides "
                         "(benchmarks/results/lm_eval_roundtrip_variants.json)")  # fmt: skip
    ap.add_argument("--bench-python", help="a Python with lm-eval (default .venv-bench/bin/python)")
    ap.add_argument("--json", type=Path, help="write the figures here instead of benchmarks/results/")
    ap.add_argument("--keep", type=Path, help="copy the pfr export of A and lm-eval's samples file here")
    args = ap.parse_args()
    offline_defaults()
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    bench = _bench_python(args.bench_python)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        if not args.variants:
            _pfr_store(args, t / "A", "float32")
            figures = _roundtrip(args, bench, t / "A", t, 4, "float32", None)
        else:
            rows = []
            for label, batch, lm_dtype, pfr_dtype, threads in VARIANTS:
                store = t / f"A-{pfr_dtype}"
                if not store.exists():
                    _pfr_store(args, store, pfr_dtype)
                print(f"== {label}")
                rows.append({"variant": label, **_roundtrip(args, bench, store, t / f"w-{pfr_dtype}", batch,
                                                            lm_dtype, threads)})  # fmt: skip
            figures = {"variants": rows}
    if args.json:
        args.json.write_text(json.dumps(figures) + "\n")
        return
    name = "lm_eval_roundtrip" + ("_variants" if args.variants else "_plain" if args.chat_template == "off" else "")
    write_results(name, figures, model=args.model, dataset=args.dataset, limit=args.limit,
                  chat_template=args.chat_template or "preset")  # fmt: skip


if __name__ == "__main__":
    main()
