"""vLLM scale-out layouts against one engine, on the same requests, one after another.

Each layout scores the same TREC requests in its own child process (so each has the machine to
itself) with the same weights and dtype; every layout is compared with ``single``: decisions that
agree and the largest |Δ| of the letter log-probs (the model's own next-token log-probabilities).

* ``single``: one engine, ``vllm:MODEL`` (the reference);
* ``dp2``: ``data_parallel_size=2``: pfr starts a second engine in its own process (its own cores on
  CPU, its own GPUs on CUDA) and deals whole quads to the two in turn;
* ``tp2``: ``tensor_parallel_size=2``: one engine, vLLM splits every layer's heads over two workers
  (the model's attention heads must divide by 2: gemma3-270m has 4, SmolLM2-135M 9);
* ``pp2``: ``pipeline_parallel_size=2``: one engine, each worker holds half the layers (compiled
  mode on CPU: pfr turns ``enforce_eager`` off there);
* ``ray`` (``pip install ray`` first): ``tensor_parallel_size=2`` with
  ``distributed_executor_backend=ray`` on a Ray cluster this script starts on 127.0.0.1
  (``ray start --head``; a multi-node study joins more nodes to it);
* ``fleet2``: two OpenAI-compatible vLLM servers on 127.0.0.1 behind one endpoint (a round-robin
  proxy in this script), scored by ``openai:NAME@http://127.0.0.1:PORT/v1``.

A layout that cannot run here prints its one-line reason (a layout of two workers on a machine with
one GPU, Ray not installed, an engine that refuses it). The default model is the offline preset
``gemma3-270m`` (chat template off) because its heads split in two.

    make vllm && .venv/bin/python benchmarks/scale_out.py --requests 32     # or: make bench-scale-out
    .venv/bin/python benchmarks/scale_out.py --layouts single,fleet2 --dtype bfloat16   # e.g. one GPU

The last line is machine-readable: ``layout=req/s …`` for each layout that ran.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from _common import agreement, free_port, load_average, offline_defaults, write_results

LAYOUTS = ("single", "dp2", "tp2", "pp2", "ray", "fleet2")
#: model options that make each layout (on top of the common dtype / max_model_len).
LAYOUT_OPTS = {
    "single": {},
    "dp2": {"data_parallel_size": "2"},
    "tp2": {"tensor_parallel_size": "2"},
    "pp2": {"pipeline_parallel_size": "2"},
    "ray": {"tensor_parallel_size": "2", "distributed_executor_backend": "ray"},
}


def _gpus() -> int:
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except ImportError:
        return 0


# ---------------------------------------------------------------------------------------------- fleet
class _RoundRobin(BaseHTTPRequestHandler):
    """Forwards each request to the next server in turn: one endpoint in front of several servers."""

    backends: ClassVar[list[tuple[str, int]]] = []
    counter: ClassVar[Iterator[int]] = itertools.count()

    def _forward(self) -> None:
        host, port = self.backends[next(self.counter) % len(self.backends)]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        conn = http.client.HTTPConnection(host, port, timeout=600)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(self.command, self.path, body=body or None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = do_POST = _forward

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@contextlib.contextmanager
def _fleet(folder: Path, name: str, args: argparse.Namespace, log_dir: Path) -> Iterator[str]:
    """Two vLLM OpenAI-compatible servers (one CPU core each on CPU) behind a round-robin proxy."""
    from pfr.models.vllm import cpu_binding

    gpu = _gpus() > 0
    shares = cpu_binding(2, sorted(os.sched_getaffinity(0)))
    procs, ports = [], []
    try:
        for k in range(2):
            port = free_port()
            cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
                   "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port), "--dtype", args.dtype,
                   "--max-model-len", str(args.max_model_len), "--enable-prefix-caching", "--seed", "0"]  # fmt: skip
            env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING"}
            if gpu:
                cmd += ["--gpu-memory-utilization", "0.4"]  # two servers share the device
            else:
                cmd += ["--enforce-eager", "--kv-cache-memory-bytes", str(1 << 30)]
                env["VLLM_CPU_OMP_THREADS_BIND"] = shares[k]
            with (log_dir / f"server{k}.log").open("w") as log:  # the server keeps its own copy of the handle
                procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env))
            ports.append(port)
        deadline = time.monotonic() + 900
        for k, (proc, port) in enumerate(zip(procs, ports)):
            while True:
                if proc.poll() is not None:
                    tail = (log_dir / f"server{k}.log").read_text()[-2000:]
                    raise RuntimeError(f"a vLLM server exited ({proc.returncode}): {tail.strip().splitlines()[-1:]}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("a vLLM server did not start within 15 minutes") from None
                    time.sleep(1)
        handler = type("Proxy", (_RoundRobin,), {"backends": [("127.0.0.1", p) for p in ports],
                                                  "counter": itertools.count()})  # fmt: skip
        proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{proxy.server_address[1]}/v1"
        finally:
            proxy.shutdown()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextlib.contextmanager
def _ray_cluster() -> Iterator[None]:
    """``ray start --head`` on 127.0.0.1 for the run (what a multi-node study joins more nodes to)."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if ray is None:
        raise RuntimeError("Ray is not installed (pip install ray)")
    port = free_port()
    subprocess.run([ray, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                    "--num-cpus", str(len(os.sched_getaffinity(0))), "--include-dashboard=false",
                    "--disable-usage-stats"], check=True, capture_output=True)  # fmt: skip
    os.environ["RAY_ADDRESS"] = f"127.0.0.1:{port}"
    try:
        yield
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True)


# ---------------------------------------------------------------------------------------------- worker
def _worker(args: argparse.Namespace) -> dict[str, Any]:
    """Start the layout, score the requests once, close; timings, letter log-probs and decisions."""
    import pfr
    from pfr.models.base import native_choice, normalise_scores
    from pfr.models.lm.gguf_cache import PRESET_CHAT, PRESETS, ensure_converted

    reqs = pfr.build("trec", "main", data_dir=os.environ.get("PFR_DATA_DIR"), limit=-(-args.requests // 4))
    reqs = reqs[: args.requests]
    layout = args.worker
    with contextlib.ExitStack() as stack:
        t0 = time.perf_counter()
        if layout == "fleet2":
            if args.model not in PRESETS:
                raise RuntimeError(f"fleet2 serves an offline preset folder: one of {', '.join(PRESETS)}")
            folder = ensure_converted(PRESETS[args.model]())
            base = stack.enter_context(_fleet(folder, args.model, args, args.out.parent))
            # the chat endpoint for a preset the vllm backend wraps in its chat template, so both score one prompt
            endpoint = "chat" if PRESET_CHAT[args.model] else "completions"
            opts = {"concurrency": "32", "endpoint": endpoint}
            backend: Any = pfr.load_model(f"openai:{args.model}@{base}", opts)
        else:
            if layout == "ray":
                stack.enter_context(_ray_cluster())
            opts = {"dtype": args.dtype, "max_model_len": str(args.max_model_len), **LAYOUT_OPTS[layout]}
            backend = pfr.load_model(f"vllm:{args.model}", opts)
            stack.callback(backend.close)
        start = time.perf_counter() - t0
        t0 = time.perf_counter()
        scores = backend.score(reqs)
        seconds = time.perf_counter() - t0
        identity = backend.identity
    return {
        "start": start,
        "seconds": seconds,
        "logits": [list(s.logits) for s in scores],
        "choices": [native_choice(normalise_scores(s.logits)) for s in scores],
        "censored": sum(sum(s.censored) for s in scores),
        "identity": {k: identity.get(k) for k in ("backend", "name", "dtype", "scoring")},
    }


def _needs(layout: str) -> int:
    """Devices a layout needs on a GPU machine."""
    return 1 if layout in ("single", "fleet2") else 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=32, help="TREC main requests (4 per text)")
    ap.add_argument("--layouts", default=",".join(LAYOUTS), help=f"comma-separated, of {', '.join(LAYOUTS)}")
    ap.add_argument("--model", default="gemma3-270m", help="offline preset or hub id / folder (not for fleet2)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    offline_defaults()
    if args.worker:
        args.out.write_text(json.dumps(_worker(args)))
        return

    layouts = [x for x in args.layouts.split(",") if x]
    unknown = sorted(set(layouts) - set(LAYOUTS))
    if unknown:
        ap.error(f"unknown layout(s) {', '.join(unknown)}")
    gpus = _gpus()
    where = f"{gpus} GPU(s)" if gpus else f"CPU only, {len(os.sched_getaffinity(0))} cores"
    print(f"load average at start: {load_average()} ({where}); {args.requests} TREC main requests, {args.model}, "
          f"{args.dtype}", flush=True)  # fmt: skip
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for layout in layouts:
            if gpus and _needs(layout) > gpus:
                print(f"{layout:7s} skipped: needs {_needs(layout)} GPUs, this machine has {gpus}", flush=True)
                continue
            out = Path(tmp) / layout / "result.json"
            out.parent.mkdir()
            cmd = [sys.executable, __file__, "--worker", layout, "--out", str(out), "--requests",
                   str(args.requests), "--model", args.model, "--dtype", args.dtype,
                   "--max-model-len", str(args.max_model_len)]  # fmt: skip
            print(f"{layout:7s} starting (load average {load_average()})", flush=True)
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, text=True, capture_output=True)
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
                print(f"{layout:7s} FAILED after {wall:.0f} s: {lines[-1] if lines else proc.returncode}", flush=True)
                continue
            res = json.loads(out.read_text())
            results[layout] = res
            n = len(res["logits"])
            print(f"{layout:7s} start {res['start']:6.1f} s  score {res['seconds']:6.2f} s  "
                  f"{n / res['seconds']:6.2f} req/s  censored {res['censored']}  {json.dumps(res['identity'])}",
                  flush=True)  # fmt: skip
    print(f"load average at end: {load_average()}")
    ref = results.get("single")
    pairs = {}
    if ref is not None:
        for name, res in results.items():
            if name == "single":
                continue
            pairs[name] = agree = agreement(ref, res)
            same, diff = agree["same_decisions"], agree["max_abs_diff"]
            print(f"{name:7s} vs single: same decisions {same}/{len(res['choices'])}  max |Δ log-prob| {diff:.2e}")
    summary = {k: {kk: v for kk, v in r.items() if kk not in ("logits", "choices")} for k, r in results.items()}
    if args.json:
        args.json.write_text(json.dumps({"layouts": summary, "vs_single": pairs}, indent=1))
    write_results("scale_out", {"layouts": summary, "vs_single": pairs}, requests=args.requests, model=args.model,
                  dtype=args.dtype)  # fmt: skip
    print(" ".join(f"{k}={len(r['logits']) / r['seconds']:.2f}" for k, r in results.items()))


if __name__ == "__main__":
    main()
