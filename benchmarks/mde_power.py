"""The power of pfr's exact McNemar test at the MDE that `pfr compare` prints, by simulation.

    .venv/bin/python benchmarks/mde_power.py [--replications 20000] [--seed 2026]

For each panel size ``n`` and discordant share ``p_d`` of the grid, paired binary data are drawn with
discordance ``p_d`` and a true difference equal to ``pfr.analysis.compare.mde`` of that discordance
(``b`` texts fail only under one version, ``c`` only under the other, ``(c − b)/n`` = the MDE on
average); each replication is tested with ``pfr.analysis.stats_tests.binom_two_sided_half`` (the
exact two-sided McNemar pfr reports) at α = .05. The share of rejections is the power the MDE's
normal approximation promises to be 80 %. Figures go to ``benchmarks/results/mde_power.json``.
"""

from __future__ import annotations

import argparse
import functools
import math

import numpy as np
from _common import load_average, write_results

GRID = [(n, p_d) for n in (200, 400, 1000) for p_d in (0.1, 0.2, 0.3)]


def main() -> None:
    from pfr.analysis.compare import mde
    from pfr.analysis.stats_tests import binom_two_sided_half

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replications", type=int, default=20000, help="simulated panels per grid point")
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args()
    load = load_average()
    print(f"load average at start: {load}")
    rng = np.random.default_rng(args.seed)
    p_exact = functools.lru_cache(maxsize=None)(binom_two_sided_half)
    rows = []
    for n, p_d in GRID:
        effect = mde(round(p_d * n), 0, n)
        p_b, p_c = (p_d - effect) / 2, (p_d + effect) / 2
        counts = rng.multinomial(n, [p_b, p_c, 1 - p_d], size=args.replications)
        power = float(np.mean([p_exact(int(b), int(b + c)) < 0.05 for b, c, _ in counts]))
        se = math.sqrt(power * (1 - power) / args.replications)
        rows.append({"n": n, "p_d": p_d, "mde": effect, "power": power, "standard_error": se})
        print(f"n={n:5d} p_d={p_d:.1f}: MDE {effect:.4f}, power {power:.3f} ± {se:.3f}")
    powers = [r["power"] for r in rows]
    print(f"power over the grid: {min(powers):.3f}–{max(powers):.3f} ({args.replications} replications each)")
    write_results("mde_power", {"alpha": 0.05, "replications": args.replications, "seed": args.seed,
                                "grid": rows, "power_min": min(powers), "power_max": max(powers)})  # fmt: skip


if __name__ == "__main__":
    main()
