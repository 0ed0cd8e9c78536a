"""Time a whole study step by step: what a user runs (``pfr study studies/reproduction.toml``), not a slice.

The study's requests are built, each model is loaded, and every request set (dataset × panel × design:
CLINC150's 150-category prompts, the membership tables, the development panels) is scored from a
cold store and a cold prefix cache, then the study's reports and thresholds are written. Per step it
records the requests, prompt tokens, distinct tokens (the least any backend must compute), the
tokens the backend computed, seconds, and the fraction of the FLOP bound (``benchmarks/_bound.py``)
at the float32 (or the model's dtype) matrix-product rate sustained just before and after the step.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_study.py --limit 1 [--model smollm2-135m] \\
        [--model-opt dtype=float32] [--study studies/reproduction.toml]

Figures go to ``benchmarks/results/bench_study-<study>-<model>-limit<N>.json`` with machine, CPU
flags, load and date. The machine is shared: quote the load averages printed with the figures.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from _bound import flop_bound, shape_of, sustained_gflops
from _common import ROOT, load_average, offline_defaults, write_results

#: seconds of back-to-back products for the rate around each step (short: a study has many steps)
RATE_SECONDS = 1.0


def _computed(backend: Any) -> int | None:
    stats = getattr(backend, "stats", None)
    if stats is not None:
        return int(stats["computed_tokens"])
    got = getattr(backend, "tokens_evaluated", None)
    return None if got is None else int(got)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", type=Path, default=ROOT / "studies" / "reproduction.toml")
    ap.add_argument("--limit", type=int, default=1, help="texts per panel (fixed, so runs compare)")
    ap.add_argument("--model", help="score this model instead of the study file's")
    ap.add_argument("--model-opt", action="append", default=[], help="backend option key=value for --model")
    args = ap.parse_args()
    offline_defaults()

    from pfr import api
    from pfr.models.registry import parse_options
    from pfr.run.cost import count_tokens, pending
    from pfr.studies import load_study, run_study
    from pfr.studies.execute import build_request_sets, load_study_model

    print(f"load average at start: {load_average()}")
    steps: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        study = load_study(args.study, model=args.model, model_options=parse_options(args.model_opt) or None,
                           limit=args.limit, store=Path(tmp) / "store")  # fmt: skip
        t0 = time.perf_counter()
        sets = build_request_sets(study)
        steps.append({"step": "build requests", "seconds": time.perf_counter() - t0})
        for m in study.models:
            t0 = time.perf_counter()
            backend = load_study_model(study, m)
            steps.append({"step": f"load {m.spec}", "seconds": time.perf_counter() - t0})
            shape = shape_of(backend)
            dtype = str(backend.identity.get("dtype", "float32"))
            rate_dtype = dtype if dtype in ("float32", "bfloat16") else "float32"
            for d, panel, design, reqs, store in sets:
                todo, _ = pending(backend, reqs, store)
                counts, ids = count_tokens(backend, todo)
                clear = getattr(backend, "clear_prefixes", None)
                if callable(clear):
                    clear()
                before_rate = sustained_gflops(rate_dtype, seconds=RATE_SECONDS)
                before = _computed(backend)
                t0 = time.perf_counter()
                api.run(backend, reqs, store, progress=False)
                seconds = time.perf_counter() - t0
                after = _computed(backend)
                rate = (before_rate + sustained_gflops(rate_dtype, seconds=RATE_SECONDS)) / 2
                row: dict[str, Any] = {
                    "step": f"{m.spec} · {d.name}/{panel} · {design.name}",
                    "requests": counts.requests,
                    "prompt_tokens": counts.prompt_tokens,
                    "distinct_tokens": counts.distinct_tokens,
                    "computed_tokens": None if before is None or after is None else after - before,
                    "seconds": seconds,
                    "gflops": rate,
                }
                if shape is not None and ids:
                    row["bound_gflop"] = flop_bound(shape, ids)["flops"] / 1e9
                    row["flop_fraction"] = row["bound_gflop"] / rate / seconds
                steps.append(row)
                print(_line(row), flush=True)
        t0 = time.perf_counter()
        run_study(study, progress=False, log=False)  # everything is stored: the reports and thresholds
        steps.append({"step": "reports and thresholds", "seconds": time.perf_counter() - t0})
    scored = [s for s in steps if "requests" in s]
    total = {k: sum(s.get(k) or 0 for s in scored) for k in ("requests", "prompt_tokens", "distinct_tokens",
                                                             "computed_tokens", "seconds", "bound_gflop")}  # fmt: skip
    total["all_steps_seconds"] = sum(s["seconds"] for s in steps)
    if total["bound_gflop"]:
        total["flop_fraction"] = sum(s["bound_gflop"] / s["gflops"] for s in scored if "bound_gflop" in s) / sum(
            s["seconds"] for s in scored if "bound_gflop" in s
        )
    for s in steps:
        if "requests" not in s:
            print(f"{s['step']}: {s['seconds']:.1f} s")
    print("total scoring: " + _line({"step": "", **total}).lstrip(": "))
    end = load_average()
    print(f"load average at end: {end}")
    model = args.model or "+".join(m.spec for m in study.models)
    name = f"bench_study-{args.study.stem}-{re.sub(r'[^A-Za-z0-9.]+', '_', model)}-limit{args.limit}"
    write_results(name, {"steps": steps, "total": total}, limit=args.limit, load_average_end=end)


def _line(row: dict[str, Any]) -> str:
    parts = [f"{row['step']}: {row['requests']} requests"]
    if row.get("prompt_tokens"):
        parts.append(f"{row['prompt_tokens']:,} prompt tokens, {row['distinct_tokens']:,} distinct")
    if row.get("computed_tokens") is not None:
        parts.append(f"{row['computed_tokens']:,} computed")
    parts.append(f"{row['seconds']:.1f} s")
    if "flop_fraction" in row:
        parts.append(f"{row['flop_fraction']:.2f} of the FLOP bound")
    return ", ".join(parts)


if __name__ == "__main__":
    main()
