"""Wall and CPU time of the commands the user guides walk through, each in its own process, in order.

The guides (deployed.md, report.md, before-release.md, usage.md) quote these figures from the file this
writes, ``benchmarks/results/doc_commands.json``. Needs the data (``PFR_DATA_DIR``) and the router extra::

    PFR_DATA_DIR=../shared/data .venv/bin/python benchmarks/doc_commands.py

Per command: wall seconds, CPU seconds of the process (user + system), and the scoring seconds that
``pfr run`` prints; the export's size raw and gzipped. The router service (``examples/router_service.py``)
runs on a free port of 127.0.0.1 for the two ``http:`` runs.
"""

from __future__ import annotations

import gzip
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from _common import ROOT, free_port, load_average, offline_defaults, write_results

PFR = str(Path(sys.executable).with_name("pfr"))


def timed(args: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """One command in its own process: wall and CPU seconds, and the scoring time ``pfr run`` reports."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    res = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode not in ok:
        raise SystemExit(f"{' '.join(args)}: exit {res.returncode}\n{res.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    scored = re.search(r"scored now, \d+ already in .* \((\d+(?:\.\d+)?) s\)", res.stdout + res.stderr)
    out = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
    if scored:
        out["scoring_s"] = float(scored.group(1))
    print(f"{' '.join(args[1:])[:90]:90}  {out}", flush=True)
    return out


def main() -> None:
    offline_defaults()
    print(f"load average at start: {load_average()}", flush=True)
    fig: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # deployed.md: the router as a service (label-only and scored) and in process, TREC main, 100 texts
        port = free_port()
        svc = subprocess.Popen([sys.executable, str(ROOT / "examples" / "router_service.py"), "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                    break
                except OSError:
                    time.sleep(0.5)
            url = f"http://127.0.0.1:{port}"
            base = ["--dataset", "trec", "--limit", "100", "--store", "router"]
            fig["service_decide"] = timed([PFR, "run", "--model", f"http:{url}/decide", *base], d)
            fig["service_scores"] = timed([PFR, "run", "--model", f"http:{url}/scores", "--model-opt", "answer=scores",
                                           "--model-opt", "numbers=prob", *base], d)  # fmt: skip
        finally:
            svc.terminate()
            svc.wait()
        fig["router_in_process"] = timed([PFR, "run", "--model", "minilm-router", *base[:-1], "inproc"], d)
        # before-release.md: two versions of the router on the demo data, the gate, the export
        fig["demo_v1"] = timed([PFR, "run", "-m", "minilm-router", "-d", "demo", "-s", "v1"], d)
        candidate = ["--model-opt", "tau=0.3", "-d", "demo", "-s", "v2"]
        fig["demo_v2"] = timed([PFR, "run", "-m", "minilm-router", *candidate], d)
        fig["gate"] = timed([PFR, "check", "v2", "--baseline", "v1", "--max-drop", "P4=0.02", "--max-drop", "A-=0.02",
                             "--max-rise", "F+=0.02", "--junit", "gate.xml"], d, ok=(1,))  # fmt: skip
        timed([PFR, "export", "v1", "--out", "v1.jsonl"], d)
        raw = (d / "v1.jsonl").read_bytes()
        fig["export_bytes"] = {"raw": len(raw), "gzip": len(gzip.compress(raw))}
        # report.md and usage.md: the demo store's report, its HTML page and a four-check release gate
        fig["report_text"] = timed([PFR, "report", "v1"], d)
        fig["report_html"] = timed([PFR, "report", "v1", "--format", "html", "--out", "r.html"], d)
        fig["check_four"] = timed([PFR, "check", "v1", "--min", "P4=0.6", "--min", "A-=0.8", "--max", "DR-F=0.2"], d,
                                  ok=(0, 1))  # fmt: skip
        # usage.md: pfr thresholds on one setting (128 development texts, 100 test texts, 2,000 refits)
        timed([PFR, "run", "--model", "minilm-router", "-d", "trec", "--panel", "development", "-s", "inproc"], d)
        fig["thresholds_one_setting"] = timed([PFR, "thresholds", "--dev", "inproc", "--test", "inproc"], d)
    print(f"load average at end: {load_average()}")
    write_results("doc_commands", fig, load_average_end=load_average(), data_dir=os.environ.get("PFR_DATA_DIR"))


if __name__ == "__main__":
    main()
