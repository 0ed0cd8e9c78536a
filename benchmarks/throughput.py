"""pfr's scoring against the FLOP bound of the work, on any model and dataset; optionally against
lm-evaluation-harness on the same requests, model files and prompts.

For each ``--model`` × ``--dataset`` (main panel, the first ``--requests`` requests, 4 per text) pfr
scores in a child process from a cold prefix cache, ``--repeats`` times; the parent derives the
*attention-aware FLOP bound* of the tokens that must be computed (``benchmarks/_bound.py``: the
distinct token prefixes once each, attention over their context, the vocabulary head at each prompt's
last token) at the matrix-product rate this machine sustains in the seconds just before and after
each run. FLOP fraction = bound / pfr's time (1.0 would be scoring at the measured matmul rate). For
llama.cpp (quantised kernels) the float32 rate is a yardstick only; there the figure that matters is
``computed`` (tokens llama.cpp evaluated, requests in prefix order, the cache reused across requests)
against ``distinct`` (the least any backend must compute).

lm-eval (its HF backend, ``loglikelihood(prompt, symbol)`` per option) runs for the hf presets unless
``--pfr-only``; it is taken from ``.venv-bench`` (``make bench-lm-eval`` creates it) when the running
interpreter lacks it. Each side runs in its own child so that its peak memory is its own.

    PYTHONPATH=src .venv/bin/python benchmarks/throughput.py --pfr-only --requests 8 \\
        --model qwen2.5-coder-1.5b --model llamacpp:preset:qwen2.5-coder-1.5b --dataset trec --dataset clinc150
    .venv-bench/bin/python benchmarks/throughput.py --requests 32 [--model gemma3-270m] [--dtype bfloat16]

Figures go to ``benchmarks/results/throughput-<models>-<datasets>.json`` (with machine, CPU flags,
load, date). The last line of each combination is machine-readable:
``flop_fraction=Y computed=C distinct=D`` (and ``speedup_vs_lm_eval=X same_decisions=Z/N
peak_mem_ratio=W`` with lm-eval).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _bound import SUSTAINED_SECONDS, flop_bound, matmul_gflops, shape_of, sustained_gflops
from _common import load_average, offline_defaults, write_results

ROOT = Path(__file__).resolve().parents[1]
NOT_HF = ("llamacpp", "vllm", "openai", "router", "baseline", "python")


def _is_hf(spec: str) -> bool:
    return spec.split(":", 1)[0] not in NOT_HF and spec != "minilm-router"


def _requests(dataset: str, n: int) -> list[Any]:
    import pfr

    reqs = pfr.build(dataset, "main", data_dir=os.environ.get("PFR_DATA_DIR"), limit=-(-n // 4))
    return reqs[:n]


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ------------------------------------------------------------------------------------------ workers
def _computed(backend: Any) -> int:
    stats = getattr(backend, "stats", None)
    if stats is not None:
        return int(stats["computed_tokens"])
    return int(getattr(backend, "tokens_evaluated", 0))


def _cold(backend: Any) -> None:
    """Forget every cached prefix, so that each repeat does the same work."""
    clear = getattr(backend, "clear_prefixes", None)
    if callable(clear):
        clear()
    llm = getattr(backend, "llm", None)
    if llm is not None:
        llm.reset()


def _worker_pfr(args: argparse.Namespace) -> dict[str, Any]:
    import pfr
    from pfr.run.cost import tokenizer_of

    reqs = _requests(args.dataset, args.requests)
    opts = dict(o.split("=", 1) for o in args.model_opt)
    if _is_hf(args.model):
        opts.setdefault("batch_size", str(args.batch_size))
        opts.setdefault("dtype", args.dtype)
    backend: Any = pfr.load_model(args.model, opts)
    prompts = [backend.prompt(r) for r in reqs]
    encode = tokenizer_of(backend)
    assert encode is not None, f"{args.model}: no tokenizer, no token bound"
    ids = [encode(p) for p in prompts]
    rate_dtype = backend.identity.get("dtype", "float32") if _is_hf(args.model) else "float32"
    times: list[float] = []
    rates = [matmul_gflops(rate_dtype)]
    sustained = [sustained_gflops(rate_dtype)]
    computed = 0
    for _ in range(args.repeats):
        _cold(backend)
        before = _computed(backend)
        t0 = time.perf_counter()
        scores = []
        for i in range(0, len(reqs), args.batch_size):
            scores.extend(backend.score(reqs[i : i + args.batch_size]))
        times.append(time.perf_counter() - t0)
        computed = _computed(backend) - before
        sustained.append(sustained_gflops(rate_dtype))
        rates.append(matmul_gflops(rate_dtype))
    return {
        "seconds": statistics.median(times),
        "best_seconds": min(times),
        "all_seconds": times,
        "gflops": rates,
        "sustained_gflops": sustained,
        "rate_dtype": rate_dtype,
        "identity": backend.identity,
        "shape": shape_of(backend),
        "scores": [list(s.logits) for s in scores],
        "prompts": prompts,
        "symbols": [[o.symbol for o in r.options] for r in reqs],
        "ids": ids,
        "computed_tokens": computed,
        "peak_mib": _peak_mib(),
        "threads": __import__("torch").get_num_threads(),
    }


def _worker_lm_eval(args: argparse.Namespace) -> dict[str, Any]:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from pfr.models.lm.gguf_cache import PRESETS, ensure_converted

    # The prompts pfr rendered (read from its worker's output), so that this process never loads pfr's
    # copy of the model and its peak memory is lm-eval's own.
    given = json.loads(Path(args.prompts).read_text())
    folder = ensure_converted(PRESETS[args.model]())
    lm = HFLM(pretrained=str(folder), device="cpu", dtype=args.dtype, batch_size=args.batch_size)
    instances = []
    for j, (p, symbols) in enumerate(zip(given["prompts"], given["symbols"])):
        for sym in symbols:
            cont = sym if p[-1].isspace() else " " + sym
            instances.append(Instance("loglikelihood", doc={}, arguments=(p, cont), idx=j))
    t0 = time.perf_counter()
    out = lm.loglikelihood(instances, disable_tqdm=True)
    seconds = time.perf_counter() - t0
    k = len(given["symbols"][0])
    return {
        "seconds": seconds,
        "scores": [[ll for ll, _ in out[j * k : (j + 1) * k]] for j in range(len(given["prompts"]))],
        "peak_mib": _peak_mib(),
    }


# ------------------------------------------------------------------------------------------ parent
def _child(worker: str, args: argparse.Namespace, model: str, dataset: str, out: Path,
           prompts: Path | None = None) -> dict[str, Any]:  # fmt: skip
    python = sys.executable
    bench = ROOT / ".venv-bench" / "bin" / "python"
    if worker == "lm-eval" and bench.is_file():
        try:
            import lm_eval  # noqa: F401
        except ImportError:
            python = str(bench)
    cmd = [python, __file__, "--worker", worker, "--out", str(out), "--requests", str(args.requests),
           "--model", model, "--dataset", dataset, "--dtype", args.dtype, "--batch-size", str(args.batch_size),
           "--repeats", str(args.repeats)]  # fmt: skip
    for o in args.model_opt:
        cmd += ["--model-opt", o]
    if prompts is not None:
        cmd += ["--prompts", str(prompts)]
    proc = subprocess.run(cmd, text=True, capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"{worker} worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return dict(json.loads(out.read_text()))


def _one(args: argparse.Namespace, model: str, dataset: str) -> dict[str, Any]:
    """Run and print one model × dataset; its figures."""
    with tempfile.TemporaryDirectory() as tmp:
        ours = _child("pfr", args, model, dataset, Path(tmp) / "pfr.json")
        theirs = None
        if not args.pfr_only and _is_hf(model):
            from pfr.models.lm.gguf_cache import PRESETS

            if model in PRESETS:
                theirs = _child("lm-eval", args, model, dataset, Path(tmp) / "lm.json", prompts=Path(tmp) / "pfr.json")
    n, k = len(ours["scores"]), len(ours["scores"][0])
    shape = ours["shape"]
    b = flop_bound(shape, ours["ids"])
    flops = b["flops"]
    gflops = max(ours["gflops"])  # the fastest burst seen anywhere in the run: the strictest bound
    sus = ours["sustained_gflops"]
    paired = [flops / ((sus[i] + sus[i + 1]) / 2 * 1e9) / t for i, t in enumerate(ours["all_seconds"])]
    fraction = statistics.median(paired)
    tight = statistics.median(f * (flops - b["last_unread"]) / flops for f in paired)
    prompt_tokens = sum(len(x) for x in ours["ids"])
    dtype = ours["identity"].get("dtype", "gguf")
    print(f"\n{model} ({shape['params'] / 1e6:.1f} M parameters, {dtype}, CPU, {ours['threads']} threads) on "
          f"{n} {dataset} main requests × {k} options")  # fmt: skip
    print(f"  prompt tokens {prompt_tokens:,}; distinct prefixes (must be computed) {b['distinct']:,} "
          f"({b['distinct'] / prompt_tokens:.1%}); pfr computed {ours['computed_tokens']:,} "
          f"({ours['computed_tokens'] / b['distinct']:.3f} of the distinct)")  # fmt: skip
    print(f"  pfr {ours['seconds']:.2f} s median ({' / '.join(f'{t:.2f}' for t in ours['all_seconds'])} s), "
          f"{n / ours['seconds']:.2f} req/s, peak {ours['peak_mib']:.0f} MiB")  # fmt: skip
    print(f"  matmul ({ours['rate_dtype']}, 1024²) bursts {' / '.join(f'{r:.0f}' for r in ours['gflops'])}, sustained "
          f"{SUSTAINED_SECONDS:.0f} s around each run {' / '.join(f'{r:.0f}' for r in sus)} GFLOP/s")  # fmt: skip
    print(f"  bound {flops / 1e9:.1f} GFLOP = {b['matmul'] / 1e9:.1f} weights + {b['attention'] / 1e9:.2f} attention + "
          f"{b['head'] / 1e9:.2f} head; {flops / gflops / 1e9:.2f} s at the fastest burst")  # fmt: skip
    print(f"  FLOP fraction per run at the rate sustained around it {' / '.join(f'{f:.2f}' for f in paired)} "
          f"(median {fraction:.2f}; {tight:.2f} without the last layer's unread outputs)")  # fmt: skip
    row: dict[str, Any] = {
        "model": model, "dataset": dataset, "dtype": dtype, "identity": ours["identity"], "requests": n,
        "prompt_tokens": prompt_tokens, "distinct_tokens": b["distinct"], "computed_tokens": ours["computed_tokens"],
        "seconds": ours["seconds"], "all_seconds": ours["all_seconds"], "bound_gflop": flops / 1e9,
        "sustained_gflops": sus, "burst_gflops": ours["gflops"], "rate_dtype": ours["rate_dtype"],
        "flop_fraction": round(fraction, 3), "flop_fraction_without_unread": round(tight, 3),
        "strictest_fraction": round(flops / gflops / 1e9 / ours["best_seconds"], 3), "peak_mib": ours["peak_mib"],
    }  # fmt: skip
    tail = f"flop_fraction={fraction:.2f} computed={ours['computed_tokens']} distinct={b['distinct']}"
    if theirs:
        same = sum(max(range(k), key=a.__getitem__) == max(range(k), key=c.__getitem__)
                   for a, c in zip(ours["scores"], theirs["scores"]))  # fmt: skip
        diff = max(abs(x - y) for a, c in zip(ours["scores"], theirs["scores"]) for x, y in zip(a, c))
        print(f"  lm-evaluation-harness {theirs['seconds']:.2f} s, peak {theirs['peak_mib']:.0f} MiB; "
              f"max |Δ log-prob| {diff:.2e}")  # fmt: skip
        row.update(lm_eval_seconds=theirs["seconds"], speedup_vs_lm_eval=theirs["seconds"] / ours["seconds"],
                   same_decisions=same, max_abs_diff=diff,
                   peak_mem_ratio=ours["peak_mib"] / theirs["peak_mib"])  # fmt: skip
        tail += (f" speedup_vs_lm_eval={row['speedup_vs_lm_eval']:.2f} same_decisions={same}/{n} "
                 f"peak_mem_ratio={row['peak_mem_ratio']:.2f}")  # fmt: skip
    print(tail)
    return row


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", text).strip("_")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=32, help="main-panel requests per dataset (4 per text)")
    ap.add_argument("--model", action="append", help="preset or spec, repeatable (default smollm2-135m), e.g. "
                    "qwen2.5-coder-1.5b, gemma3-270m, llamacpp:preset:qwen2.5-coder-1.5b, hf:PATH")  # fmt: skip
    ap.add_argument("--dataset", action="append", help="trec, clinc150, banking77 or a file; repeatable (default trec)")
    ap.add_argument("--model-opt", action="append", default=[], help="backend option key=value (repeatable)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "auto"], help="hf backends only")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="pfr runs (cold prefix cache each; figures from the median run); lm-eval runs once",
    )
    ap.add_argument("--pfr-only", action="store_true", help="skip lm-eval (runs with the project's own .venv)")
    ap.add_argument("--worker", choices=["pfr", "lm-eval"], help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--prompts", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    offline_defaults()
    if args.worker:
        args.model, args.dataset = args.model[0], (args.dataset or ["trec"])[0]
        result = _worker_pfr(args) if args.worker == "pfr" else _worker_lm_eval(args)
        args.out.write_text(json.dumps(result))
        return
    models, datasets = args.model or ["smollm2-135m"], args.dataset or ["trec"]
    load = load_average()
    print(f"load average at start: {load} ({os.cpu_count()} CPUs)")
    rows = [_one(args, m, d) for m in models for d in datasets]
    end = load_average()
    print(f"load average at end: {end}")
    name = f"throughput-{'+'.join(map(_slug, models))}-{'+'.join(map(_slug, datasets))}"
    write_results(name, {"runs": rows}, load_average_end=end, repeats=args.repeats)


if __name__ == "__main__":
    main()
