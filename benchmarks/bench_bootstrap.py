"""Time the full Table 1 (every metric and Δ with 10,000-draw paired bootstrap intervals, exact
McNemar tests, Holm) for 500 texts.

The texts are TREC's 500-question main panel (2,000 requests) scored by ``baseline:random``
into a real store (built once in a temporary folder, not timed). Three timings, median of
``--repeat`` runs each (``time.perf_counter``):

- statistics: bootstrap + McNemar + Holm on the (500 × 19) indicator matrix;
- table 1: the above plus the indicator matrix from the read results and the text tables;
- end to end: ``render_report(store, "text")``, including reading the SQLite store.

    .venv/bin/python benchmarks/bench_bootstrap.py [--data-dir ../shared/data] [--draws 10000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import ROOT, write_results  # this folder is first on sys.path when run as a script

from pfr import api
from pfr.analysis.bootstrap import paired_bootstrap, setting_rng
from pfr.analysis.metrics import INDICATORS
from pfr.analysis.stats_tests import holm, setting_tests
from pfr.report.render import build_report, render, render_report
from pfr.run.store import Store


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, list[float]]:
    fn()  # warm-up (imports, caches)
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs), runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.environ.get("PFR_DATA_DIR", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--draws", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        reqs = api.build("trec", "main", data_dir=args.data_dir)
        api.run("baseline:random", reqs, store=store, progress=False)
        with Store(store, create=False) as st:
            results = list(st.results())
        ind = api.indicators(store)
        x = ind[INDICATORS].to_numpy(dtype=np.float64)
        key = tuple(str(k) for k in ind.index[0][:4])
        n = x.shape[0]

        def stats_only() -> None:
            boot = paired_bootstrap(x, args.draws, setting_rng(0, key))
            tests = setting_tests(x, INDICATORS)
            holm([t.p for t in tests])
            assert boot.draws == args.draws

        def table1() -> None:
            render(build_report(results, draws=args.draws, seed=0), "text")

        def end_to_end() -> None:
            render_report([str(store)], "text", draws=args.draws)

        print(
            f"texts: {n}, requests: {len(results)}, draws: {args.draws:,}, quantities: 18 (13 metrics + 5 Δ), "
            f"tests: 2, cores: {os.cpu_count()}"
        )
        figures: dict[str, float] = {}
        steps: list[tuple[str, str, Callable[[], None], int]] = [
            ("statistics_ms", "statistics (bootstrap+McNemar+Holm)", stats_only, args.repeat),
            ("table1_ms", "table 1 from read results", table1, args.repeat),
            ("end_to_end_ms", "end to end incl. store read", end_to_end, max(3, args.repeat // 2)),
        ]
        for key_, name, fn, reps in steps:
            med, runs = timed(fn, reps)
            figures[key_] = round(med * 1000, 1)
            print(f"{name:<38} median {med * 1000:8.1f} ms  (runs: {', '.join(f'{r * 1000:.0f}' for r in runs)} ms)")
        write_results("bench_bootstrap", figures, texts=n, requests=len(results), draws=args.draws, repeat=args.repeat)


if __name__ == "__main__":
    main()
