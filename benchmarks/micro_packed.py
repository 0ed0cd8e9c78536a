"""Small timings behind choices in ``pfr.models.packed`` and ``benchmarks/throughput.py``.

Three measurements, each alternating its variants in one process (median of the rounds):

* ``drift``: the 1024² float32 product rate read 40 times, every 15 products (about 0.2 s), with the
  CPU steal ticks of ``/proc/stat`` in each window: how fast this machine's rate moves, which is why
  ``throughput.py`` pairs each pfr run with the rate sustained around it instead of the fastest burst;
* ``gather``: a row gather of 20,376 rows of 64 floats (a 2,264-token level × 9 heads) through
  ``t[index]`` and through ``index_select``, and a row scatter through ``t[index] = ...`` and
  ``index_copy_``;
* ``private``: the CPU flash kernel on the private-attention shapes of the benchmark's largest levels,
  the query heads passed as the kernel's grouped heads ``(nodes, 9, slots, 64)`` against each key/value
  head's query heads as one longer sequence ``(nodes, 3, 3 × slots, 64)``, under the same mask.

    .venv/bin/python benchmarks/micro_packed.py [drift|gather|private ...]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable


def _median_ms(variants: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    for f in variants.values():
        f()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for name, f in variants.items():
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def _steal() -> int:
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def drift() -> None:
    import torch

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    for _ in range(3):
        a @ b
    rates, steal = [], 0
    for _ in range(40):
        s0, t0 = _steal(), time.perf_counter()
        for _ in range(15):
            a @ b
        rates.append(2 * 1024**3 * 15 / (time.perf_counter() - t0) / 1e9)
        steal += _steal() - s0
    print(f"drift: 40 reads of 15 products: {min(rates):.0f}–{max(rates):.0f} GFLOP/s "
          f"(median {statistics.median(rates):.0f}); CPU steal ticks in those windows: {steal}")  # fmt: skip
    print("       " + " ".join(f"{r:.0f}" for r in rates))


def gather() -> None:
    import torch

    src = torch.randn(2264 * 15, 64)
    idx = torch.randperm(2264 * 9)
    dst = torch.zeros(8 * 3 * 573, 64)
    put = torch.randperm(dst.shape[0])
    rows = src[: dst.shape[0]]

    def setitem() -> None:
        dst[put] = rows

    ms = _median_ms(
        {
            "t[index]": lambda: src[idx],
            "index_select": lambda: src.index_select(0, idx),
            "t[index] = rows": setitem,
            "index_copy_": lambda: dst.index_copy_(0, put, rows),
        },
        rounds=30,
    )
    print("gather: " + ", ".join(f"{k} {v:.3f} ms" for k, v in ms.items()))


def private() -> None:
    import torch

    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    for b, slots, width in ((8, 191, 325), (4, 189, 324), (8, 95, 229), (6, 114, 135)):
        k, v = torch.randn(b, 3, width, 64), torch.randn(b, 3, width, 64)
        allowed = torch.arange(width)[None, :] <= (width - slots + torch.arange(slots))[:, None]
        mask = torch.zeros(b, 1, slots, width).masked_fill_(~allowed, float("-inf"))
        folded_mask = mask.repeat(1, 1, 3, 1)
        q_heads = torch.randn(b, slots, 9, 64).transpose(1, 2)
        q_folded = torch.randn(b, 3, 3 * slots, 64)
        ms = _median_ms(
            {
                "grouped heads": functools.partial(flash, q_heads, k, v, 0.0, False, attn_mask=mask, scale=0.125),
                "folded": functools.partial(flash, q_folded, k, v, 0.0, False, attn_mask=folded_mask, scale=0.125),
            },
            rounds=15,
        )
        print(f"private: {b} nodes × {slots} slots × {width} keys: grouped heads {ms['grouped heads']:.2f} ms, "
              f"folded {ms['folded']:.2f} ms ({ms['grouped heads'] / ms['folded']:.2f}×)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="*", choices=["drift", "gather", "private", []], default=[])
    args = ap.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name in args.what or ["drift", "gather", "private"]:
        {"drift": drift, "gather": gather, "private": private}[name]()


if __name__ == "__main__":
    main()
