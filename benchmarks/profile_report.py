"""Where ``pfr report``'s time goes on a large store: imports, reading the store, building the report;
and inside the read, the SQL query, the request JSON, ``Request.from_dict`` and the score columns' JSON.

The store is the one ``benchmarks/bench_scale.py`` builds (BANKING77's train split as a user CSV, scored
by ``baseline:random``), kept in a folder of your choice:

    PFR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_scale.py --keep /tmp/scale
    .venv/bin/python benchmarks/profile_report.py /tmp/scale/store
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sqlite3
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    args = ap.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    t0 = time.perf_counter()
    from pfr.report import model

    t1 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    results = model._read([str(args.store)])
    t2 = time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    model.build_report(results, stores=[str(args.store)])
    t3 = time.perf_counter()
    print(f"report: imports {t1 - t0:.2f} s, read {t2 - t1:.2f} s (user {r1.ru_utime - r0.ru_utime:.2f}, "
          f"system {r1.ru_stime - r0.ru_stime:.2f}), build {t3 - t2:.2f} s; {len(results):,} results")  # fmt: skip

    from pfr.design.types import Category, Request
    from pfr.run.store import RESULTS_QUERY
    from pfr.run.store import _loads as loads  # the store's own parser (orjson, json for NaN/Infinity)

    was = gc.isenabled()
    gc.disable()  # as the store's own read does
    try:
        db = sqlite3.connect(f"file:{args.store / 'results.sqlite'}?mode=ro", uri=True)
        s0 = time.perf_counter()
        rows = db.execute(RESULTS_QUERY).fetchall()
        s1 = time.perf_counter()
        bodies = [loads(r[2]) for r in rows]
        s2 = time.perf_counter()
        inventories = {
            k: tuple(Category(**c) for c in json.loads(v))
            for k, v in db.execute("SELECT inventory_key, inventory FROM inventories")
        }
        requests = [Request.from_dict(b, inventories[r[3]]) for b, r in zip(bodies, rows)]
        s3 = time.perf_counter()
        scores = [loads(f"[{r[5]},{r[6]},{r[7]},{r[10]}]") for r in rows]
        s4 = time.perf_counter()
    finally:
        if was:
            gc.enable()
    print(f"read, part by part: SQL {s1 - s0:.2f} s, request JSON {s2 - s1:.2f} s, Request.from_dict "
          f"{s3 - s2:.2f} s, score columns' JSON {s4 - s3:.2f} s ({len(requests):,} rows, "
          f"{sum(len(x[0]) + len(x[1]) for x in scores):,} floats)")  # fmt: skip


if __name__ == "__main__":
    main()
