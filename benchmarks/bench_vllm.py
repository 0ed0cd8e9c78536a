"""hf prefix trie vs vLLM (float32, bfloat16) vs lm-evaluation-harness on the same requests, one after another.

Every engine scores the same TREC requests (the offline preset ``smollm2-135m``: SmolLM2-135M-Instruct
dequantised from its packaged GGUF, chat template on) in its own child process, one after another, so
that each has the machine to itself and its peak memory is its own:

* ``hf``: pfr's Transformers backend with the prefix-trie key/value cache (float32);
* ``vllm-float32`` / ``vllm-bfloat16``: ``vllm:smollm2-135m`` (exact letter log-probs through
  ``logprob_token_ids``, automatic prefix caching);
* ``lm-eval``: lm-evaluation-harness's HF backend, ``loglikelihood(prompt, " A")`` per option, through
  the worker of ``benchmarks/throughput.py`` in ``.venv-bench`` (``make bench-lm-eval`` makes it);
  skipped with a note when that venv is missing.

Printed: the load average before each engine and at the end; per engine its start-up and scoring time
and peak memory; for every pair the decisions that agree and the largest |Δ| of the raw letter
log-probs (the models' own next-token log-probabilities, before pfr's normalisation over the options).

    make vllm && .venv/bin/python benchmarks/bench_vllm.py --requests 32
    .venv/bin/python benchmarks/bench_vllm.py --requests 256 --device cuda --engines vllm-bfloat16,vllm-float32
    .venv/bin/python benchmarks/bench_vllm.py --vllm-opt tensor_parallel_size=2 --engines vllm-bfloat16

The last line is machine-readable: ``engine=req/s …`` for each engine that ran.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, agreement, load_average, offline_defaults, write_results

ENGINES = ("hf", "vllm-float32", "vllm-bfloat16", "lm-eval")


def _requests(n: int) -> list[Any]:
    import pfr

    reqs = pfr.build("trec", "main", data_dir=os.environ.get("PFR_DATA_DIR"), limit=-(-n // 4))
    return reqs[:n]


def _worker(args: argparse.Namespace) -> dict[str, Any]:
    """Score the requests with one engine; returns timings, raw letter log-probs, decisions and prompts."""
    import pfr
    from pfr.models.base import native_choice, normalise_scores

    reqs = _requests(args.requests)
    t0 = time.perf_counter()
    if args.worker == "hf":
        opts = {"dtype": "float32", "batch_size": "16"}
        if args.device:
            opts["device"] = args.device
        backend: Any = pfr.load_model("smollm2-135m", opts)
    else:
        opts = {"dtype": args.worker.removeprefix("vllm-"), "max_model_len": str(args.max_model_len)}
        opts.update(dict(kv.split("=", 1) for kv in args.vllm_opt))
        backend = pfr.load_model("vllm:smollm2-135m", opts)
    start = time.perf_counter() - t0
    batch = int(getattr(backend, "batch_size", 16))
    t0 = time.perf_counter()
    scores = []
    for i in range(0, len(reqs), batch):
        scores.extend(backend.score(reqs[i : i + batch]))
    seconds = time.perf_counter() - t0
    stats = dict(getattr(backend, "stats", {}))
    identity = backend.identity
    close = getattr(backend, "close", None)
    if close is not None:
        close()
    return {
        "start": start,
        "seconds": seconds,
        "logits": [list(s.logits) for s in scores],
        "choices": [native_choice(normalise_scores(s.logits)) for s in scores],
        "censored": sum(sum(s.censored) for s in scores),
        "prompts": [backend.prompt(r) for r in reqs],
        "symbols": [[o.symbol for o in r.options] for r in reqs],
        "stats": stats,
        "dtype": identity.get("dtype"),
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _run(engine: str, args: argparse.Namespace, tmp: Path, prompts: Path | None) -> dict[str, Any] | None:
    out = tmp / f"{engine}.json"
    if engine == "lm-eval":
        py = ROOT / ".venv-bench" / "bin" / "python"
        if not py.exists() or prompts is None:
            print("lm-eval: skipped (no .venv-bench; `make bench-lm-eval` creates it)", flush=True)
            return None
        cmd = [str(py), str(ROOT / "benchmarks" / "throughput.py"), "--worker", "lm-eval", "--out", str(out),
               "--requests", str(args.requests), "--model", "smollm2-135m", "--dtype", "float32",
               "--batch-size", "16", "--prompts", str(prompts)]  # fmt: skip
    else:
        cmd = [sys.executable, __file__, "--worker", engine, "--out", str(out), "--requests", str(args.requests),
               "--max-model-len", str(args.max_model_len)]  # fmt: skip
        if args.device:
            cmd += ["--device", args.device]
        for kv in args.vllm_opt:
            cmd += ["--vllm-opt", kv]
    print(f"{engine}: starting (load average {load_average()})", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, text=True, capture_output=True)
    if proc.returncode != 0:
        print(f"{engine}: FAILED ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}", flush=True)
        return None
    result = dict(json.loads(out.read_text()))
    result.setdefault("start", time.perf_counter() - t0 - result["seconds"])  # lm-eval: the rest of its wall time
    if "logits" not in result:  # throughput.py's lm-eval worker: "scores" are raw log-likelihoods
        result["logits"] = result["scores"]
        result["choices"] = [max(range(len(x)), key=lambda i, x=x: (x[i], -i)) for x in result["logits"]]
        result["censored"] = 0
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=32, help="TREC main requests (4 per text)")
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated, of {', '.join(ENGINES)}")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--device", default=None, help="hf device (cuda on a GPU machine); vLLM picks its platform")
    ap.add_argument("--vllm-opt", action="append", default=[], help="extra vllm model option key=value")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    offline_defaults()
    if args.worker:
        args.out.write_text(json.dumps(_worker(args)))
        return

    engines = [e for e in args.engines.split(",") if e]
    print(f"load average at start: {load_average()} ({os.cpu_count()} CPUs); {args.requests} TREC main requests, "
          f"smollm2-135m (chat template on)", flush=True)  # fmt: skip
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        prompts: Path | None = None
        for engine in engines:
            res = _run(engine, args, Path(tmp), prompts)
            if res is None:
                continue
            results[engine] = res
            if prompts is None and "prompts" in res:
                prompts = Path(tmp) / "prompts.json"
                prompts.write_text(json.dumps({"prompts": res["prompts"], "symbols": res["symbols"]}))
            n = len(res["logits"])
            print(f"{engine:14s} start {res['start']:7.1f} s  score {res['seconds']:7.2f} s  "
                  f"{n / res['seconds']:6.2f} req/s  peak {res['peak_mib']:6.0f} MiB  censored {res['censored']}  "
                  f"{json.dumps(res.get('stats', {}))}", flush=True)  # fmt: skip
    print(f"load average at end: {load_average()}")
    names = list(results)
    base_prompts = next((r["prompts"] for r in results.values() if "prompts" in r), None)
    for name in names:
        if "prompts" in results[name] and results[name]["prompts"] != base_prompts:
            print(f"WARNING: {name} rendered different prompts")
    pairs = {}
    for a, b in itertools.combinations(names, 2):
        ra, rb = results[a], results[b]
        pairs[f"{a}~{b}"] = agree = agreement(ra, rb)
        same, diff = agree["same_decisions"], agree["max_abs_diff"]
        print(f"{a:14s} vs {b:14s} same decisions {same}/{len(ra['choices'])}  max |Δ log-prob| {diff:.2e}")
    summary = {k: {kk: v for kk, v in r.items() if kk not in ("logits", "prompts", "symbols", "choices")}
               for k, r in results.items()}  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"engines": summary, "pairs": pairs}, indent=1))
    write_results("bench_vllm", {"engines": summary, "pairs": pairs}, requests=args.requests)
    print(" ".join(f"{k}={len(r['logits']) / r['seconds']:.2f}" for k, r in results.items()))


if __name__ == "__main__":
    main()
