"""Two Ray workers against one on this machine, for a model whose cost is waiting.

The model is an ``http:`` service started here on 127.0.0.1 that answers every call after a fixed
latency (a deployed router or a remote engine, as pfr sees it). The same study runs with
``replicas = 1`` and ``replicas = 2`` on one local Ray (started once, not timed: its start-up is the
same for both), each into a fresh store; the time is ``pfr.studies.ray_executor.run_study_ray``'s,
which includes planning, every merge and the reports. Both reports must be byte-identical.

    PYTHONPATH=src .venv/bin/python benchmarks/ray_scale.py [--latency 0.2] [--limit 100] [--unit-texts 5]

Figures go to ``benchmarks/results/ray_scale.json`` with machine, CPU flags, load and date.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _common import load_average, offline_defaults, write_results


def serve(latency: float) -> ThreadingHTTPServer:
    """A decision service on 127.0.0.1: every call waits ``latency`` s, then names the first option."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(latency)
            out = json.dumps({"label": body["options"][0]["label"]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def study_file(folder: Path, url: str, replicas: int, limit: int) -> Path:
    path = folder / f"replicas{replicas}.toml"
    path.write_text(
        f'name = "ray-scale"\nstore = "store{replicas}"\n'
        f'[[models]]\nmodel = "http:{url}"\nmodel-opt = {{ concurrency = 1 }}\nreplicas = {replicas}\n'
        f'[[datasets]]\ndataset = "trec"\nlimit = {limit}\n[report]\nformat = ["text"]\ndraws = 100\n',
        encoding="utf-8",
    )
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the service waits per call")
    ap.add_argument("--limit", type=int, default=100, help="trec texts (four requests each)")
    ap.add_argument("--unit-texts", type=int, default=5, help="texts per unit")
    args = ap.parse_args()
    offline_defaults()

    from pfr.studies import load_study
    from pfr.studies.ray_executor import connect, run_study_ray

    server = serve(args.latency)
    url = f"http://127.0.0.1:{server.server_address[1]}/decide"
    connect(None)  # one local Ray for both runs
    seconds, reports = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for replicas in (1, 2):
            study = load_study(study_file(Path(tmp), url, replicas, args.limit))
            t0 = time.perf_counter()
            run_study_ray(study, unit_texts=args.unit_texts, log=False)
            seconds[replicas] = time.perf_counter() - t0
            reports[replicas] = (study.store / "report.txt").read_bytes()
    server.shutdown()
    assert reports[1] == reports[2], "the two runs' reports differ"
    requests = 4 * args.limit
    figures = {
        "requests": requests,
        "latency_s": args.latency,
        "one_worker_s": round(seconds[1], 2),
        "two_workers_s": round(seconds[2], 2),
        "speedup": round(seconds[1] / seconds[2], 2),
        "waiting_floor_one_worker_s": round(requests * args.latency, 2),
    }
    print(
        f"{requests} requests, {args.latency * 1000:.0f} ms each: one worker {seconds[1]:.1f} s, "
        f"two workers {seconds[2]:.1f} s, speedup {figures['speedup']:.2f}× (load {load_average()})"
    )
    print("command: PYTHONPATH=src python " + " ".join(sys.argv))
    write_results("ray_scale", figures, unit_texts=args.unit_texts)


if __name__ == "__main__":
    main()
