"""Where pfr's scoring time goes, by kind of work, against the machine's matrix-multiply rate.

Runs the benchmark's 32 TREC requests (two ``score`` calls of 16, the prefix cache cleared first) under
``torch.profiler`` with input shapes, and sums the operators into: weight products (``mm``/``addmm``,
FLOPs from their shapes), attention (the CPU flash kernel, ``4·B·H·L·S·E`` FLOPs: every query row
against every key slot it is given, padding and masked slots included), and everything else (norms,
rotary, gathers, merges, activation). Each kind's achieved GFLOP/s is printed beside the 1024² float32
matmul rate measured in the same process before and after, so the gap between pfr and the FLOP bound
of ``benchmarks/throughput.py`` splits into "products slower than the 1024² product" and "time outside
products".

    PFR_DATA_DIR=../shared/data .venv/bin/python benchmarks/profile_packed.py [--model-opt packed=off]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from typing import Any

from _bound import matmul_gflops as _matmul_gflops  # the same 1024² rate as the throughput benchmark

PRODUCTS = {"aten::mm", "aten::addmm", "aten::addmm_"}
ATTENTION = {"aten::_scaled_dot_product_flash_attention_for_cpu"}


def _flash_rate(queries: int = 2264, keys: int = 535, heads: int = 9, size: int = 64) -> float:
    """The CPU flash kernel alone on the heaviest root call's shape (best of 5)."""
    import torch

    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    q = torch.randn(1, heads, queries, size)
    k, v = torch.randn(1, heads, keys, size), torch.randn(1, heads, keys, size)
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        flash(q, k, v, 0.0, False, attn_mask=None, scale=size**-0.5)
        best = min(best, time.perf_counter() - t0)
    return 4 * heads * queries * keys * size / best / 1e9


def _flops(name: str, shapes: list[Any]) -> float:
    if name == "aten::mm":
        (m, k), (_, n) = shapes[0], shapes[1]
        return 2.0 * m * k * n
    if name in ("aten::addmm", "aten::addmm_"):
        (m, k), (_, n) = shapes[1], shapes[2]
        return 2.0 * m * k * n
    if name in ATTENTION:
        b, h, q_len, e = shapes[0]
        return 4.0 * b * h * q_len * shapes[1][2] * e
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--model-opt", action="append", default=[], help="KEY=VALUE, as for `pfr run`")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from torch.profiler import ProfilerActivity, profile

    import pfr
    from pfr.models.registry import parse_options

    reqs = pfr.build("trec", "main", data_dir=os.environ.get("PFR_DATA_DIR"), limit=-(-args.requests // 4))
    reqs = reqs[: args.requests]
    backend: Any = pfr.load_model(args.model, {"batch_size": "16", **parse_options(args.model_opt)})
    backend.score(reqs[:16])  # warm-up
    backend.clear_prefixes()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; torch threads {torch.get_num_threads()}")
    before = _matmul_gflops("float32")
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for i in range(0, len(reqs), 16):
            backend.score(reqs[i : i + 16])
    wall = time.perf_counter() - t0
    after = _matmul_gflops("float32")
    alone = _flash_rate()
    seconds: dict[str, float] = defaultdict(float)
    flops: dict[str, float] = defaultdict(float)
    for ev in prof.key_averages(group_by_input_shape=True):
        kind = "products" if ev.key in PRODUCTS else "attention" if ev.key in ATTENTION else "other"
        seconds[kind] += ev.self_cpu_time_total / 1e6
        if kind != "other":
            flops[kind] += _flops(ev.key, ev.input_shapes) * ev.count
    total = sum(seconds.values())
    print(f"{args.model}, {len(reqs)} requests: {wall:.2f} s wall ({total:.2f} s in operators)")
    print(f"1024² float32 matmul: {before:.0f} GFLOP/s before, {after:.0f} after; the flash kernel alone "
          f"(9 heads × 2,264 queries × 535 keys × 64): {alone:.0f} GFLOP/s")  # fmt: skip
    for kind in ("products", "attention", "other"):
        rate = f"{flops[kind] / seconds[kind] / 1e9:6.0f} GFLOP/s" if flops[kind] else ""
        gf = f"{flops[kind] / 1e9:8.1f} GFLOP" if flops[kind] else " " * 13
        print(f"  {kind:<10} {seconds[kind]:6.2f} s  {seconds[kind] / total:6.1%}  {gf}  {rate}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


if __name__ == "__main__":
    main()
