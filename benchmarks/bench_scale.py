"""The data path at 10^4 texts: request JSONL size, store size, `pfr report` time and peak memory.

A new user's large file: BANKING77's train split (10,003 texts, 77 intents) given as their own CSV,
the whole file as one panel (``--limit`` none), scored by ``baseline:random`` (no model cost), then
reported as JSON. Each step runs as the ``pfr`` command in its own process, so that its wall time and
peak resident memory (``ru_maxrss`` of that child) are its own.

    .venv/bin/python benchmarks/bench_scale.py                 # prints one line per step and a summary
    .venv/bin/python benchmarks/bench_scale.py --texts 2000    # a smaller slice of the file
    .venv/bin/python benchmarks/bench_scale.py --keep DIR      # keep the CSV, JSONL and store in a new DIR

Targets: report ≤ 5 s and ≤ 1 GiB peak; the request JSONL ≤ 100 MB. The report runs three
times by default (``--report-runs``) and its figure is the median run; peak memory is the largest.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, write_results  # this folder is first on sys.path when run as a script


def _step(name: str, args: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, peak MiB) of one ``pfr`` command run in a child process (its own ru_maxrss)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", "from pfr.cli import main; main()", *args], cwd=cwd,
                                stdout=subprocess.DEVNULL, stderr=err, text=True)  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{name} failed ({proc.returncode}): {err.read()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def _python_loop_seconds() -> float:
    """Seconds for a fixed pure-Python loop (10^7 additions): a record of the host's state beside the
    figures. It does not predict the report's time (a slow report has been seen beside a steady loop),
    so compare medians, not single runs."""
    t0 = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--texts",
        type=int,
        default=None,
        help="every k-th row of train.csv, N in all (the file is sorted by label; default all)",
    )
    ap.add_argument(
        "--data-dir", type=Path, default=Path(os.environ.get("PFR_DATA_DIR", ROOT.parent / "shared" / "data"))
    )
    ap.add_argument("--keep", type=Path, help="build in this folder and keep it (else a temporary one)")
    ap.add_argument(
        "--report-runs",
        type=int,
        default=3,
        help="report the store this many times; the figure is the median run (single runs swing with the host)",
    )
    args = ap.parse_args()
    src = args.data_dir / "banking77" / "train.csv"
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    loop_start = _python_loop_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) if args.keep is None else args.keep
        work.mkdir(parents=True, exist_ok=True)
        user = work / "banking_train.csv"
        with src.open(newline="", encoding="utf-8") as f, user.open("w", newline="", encoding="utf-8") as g:
            rows = list(csv.reader(f))
            body = rows[1:] if args.texts is None else rows[1:][:: max(1, (len(rows) - 1) // args.texts)][: args.texts]
            w = csv.writer(g)
            w.writerow(["text", "label"])
            w.writerows(body)
        common = ["--dataset", str(user), "--text-col", "text", "--label-col", "label"]
        t_build, m_build = _step("build", ["build", *common, "--out", "requests.jsonl"], work)
        jsonl = (work / "requests.jsonl").stat().st_size
        n_req = sum(1 for line in (work / "requests.jsonl").open(encoding="utf-8") if line.strip())
        t_run, m_run = _step("run", ["run", "--model", "baseline:random", "--requests", "requests.jsonl",
                                     "--store", "store", "--no-progress"], work)  # fmt: skip
        store = sum(p.stat().st_size for p in (work / "store").rglob("*") if p.is_file())
        reports = [
            _step("report", ["report", "store", "--format", "json", "--out", "report.json"], work)
            for _ in range(max(1, args.report_runs))
        ]
        t_rep = statistics.median(t for t, _ in reports)
        m_rep = max(m for _, m in reports)
    print(f"texts {len(body):,}; requests {n_req:,}")
    print(
        f"build   {t_build:7.2f} s  peak {m_build:7.0f} MiB  "
        f"JSONL {jsonl / 1e6:8.1f} MB ({jsonl / n_req:,.0f} B/request)"
    )
    print(
        f"run     {t_run:7.2f} s  peak {m_run:7.0f} MiB  store {store / 1e6:8.1f} MB ({store / n_req:,.0f} B/request)"
    )
    runs = " / ".join(f"{t:.2f}" for t, _ in reports)
    print(f"report  {t_rep:7.2f} s  peak {m_rep:7.0f} MiB  (json, 10,000 bootstrap draws; median of {runs} s)")
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"python loop (10^7 additions): {loop_start:.2f} s at start, {_python_loop_seconds():.2f} s at end")
    print(
        f"report_seconds={t_rep:.2f} report_peak_mib={m_rep:.0f} jsonl_mb={jsonl / 1e6:.1f} store_mb={store / 1e6:.1f}"
    )
    figures = {
        "build_seconds": round(t_build, 2),
        "build_peak_mib": round(m_build),
        "jsonl_mb": round(jsonl / 1e6, 1),
        "jsonl_bytes_per_request": round(jsonl / n_req),
        "run_seconds": round(t_run, 2),
        "run_peak_mib": round(m_run),
        "store_mb": round(store / 1e6, 1),
        "store_bytes_per_request": round(store / n_req),
        "report_seconds": round(t_rep, 2),
        "report_runs_seconds": [round(t, 2) for t, _ in reports],
        "report_peak_mib": round(m_rep),
    }
    write_results("bench_scale", figures, texts=len(body), requests=n_req, targets={"report_seconds": 5,
                  "report_peak_mib": 1024, "jsonl_mb": 100})  # fmt: skip


if __name__ == "__main__":
    main()
