"""float32 vs bfloat16 in the Transformers backend: speed, decisions and accuracy in one run.

Scores the same N TREC main requests (4 per text) with one model loaded twice, in float32 and in
bfloat16 (the separate, documented fast mode on CPUs with bf16 matrix units), and prints for each
requests/s and how many requests it answers correctly, then the speed ratio, how many decisions
the two agree on, and the largest difference between their option log-probabilities. The load
average is printed first: timings on a shared machine mean something only at load ≈ 1.

    .venv/bin/python benchmarks/bench_dtype.py --model qwen2.5-coder-1.5b --n 64   # after `make models`
    .venv/bin/python benchmarks/bench_dtype.py --model smollm2-135m --n 64
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import time
from typing import Any

from _common import ROOT, write_results  # this folder is first on sys.path when run as a script


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--n", type=int, default=64, help="requests (a multiple of 4)")
    ap.add_argument("--data-dir", default=os.environ.get("PFR_DATA_DIR", str(ROOT.parent / "shared" / "data")))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import pfr
    from pfr.models.registry import load_model

    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}, "
          f"{os.cpu_count()} CPUs")
    requests = pfr.build("trec", "main", data_dir=args.data_dir, limit=max(1, args.n // 4))[: args.n]
    results: dict[str, dict[str, Any]] = {}
    for dtype in ("float32", "bfloat16"):
        t0 = time.perf_counter()
        backend: Any = load_model(args.model, {"dtype": dtype})
        load_s = time.perf_counter() - t0
        backend.score(requests[:1])  # warm-up, then forget its prefix so both dtypes start alike
        backend._prefixes.clear()
        t0 = time.perf_counter()
        scores = []
        for i in range(0, len(requests), backend.batch_size):
            scores.extend(backend.score(requests[i : i + backend.batch_size]))
        seconds = time.perf_counter() - t0
        choices = [max(range(len(s.logits)), key=s.logits.__getitem__) for s in scores]
        correct = sum(c == r.expected for c, r in zip(choices, requests))
        results[dtype] = {"seconds": seconds, "choices": choices, "scores": scores, "correct": correct}
        print(f"{dtype:>8}: loaded in {load_s:5.1f} s; {len(requests) / seconds:6.2f} req/s ({seconds:.1f} s); "
              f"correct {correct}/{len(requests)}")
        del backend
        gc.collect()
    f32, b16 = results["float32"], results["bfloat16"]
    same = sum(a == b for a, b in zip(f32["choices"], b16["choices"]))
    diff = max(abs(a - b) for s, q in zip(f32["scores"], b16["scores"]) for a, b in zip(s.logits, q.logits))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"bfloat16 speed-up {f32['seconds'] / b16['seconds']:.2f}x; same decisions {same}/{len(requests)}; "
          f"max |Δ log-prob| {diff:.3f}; peak RSS {peak:.1f} GiB; "
          f"chance {sum(1 / len(r.options) for r in requests):.1f}/{len(requests)}")
    figures = {
        dtype: {"seconds": round(r["seconds"], 2), "requests_per_s": round(len(requests) / r["seconds"], 3),
                "correct": r["correct"]}
        for dtype, r in results.items()
    }  # fmt: skip
    figures["agreement"] = {"same_decisions": same, "max_abs_diff": diff, "peak_rss_gib": round(peak, 2)}
    write_results("bench_dtype", figures, model=args.model, requests=len(requests))


if __name__ == "__main__":
    main()
