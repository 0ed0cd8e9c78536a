"""pfr against lm-evaluation-harness on the same requests, model files and prompts, in one run.

Both score the same rendered prompts (``backend.prompt(request)``) with the same model folder (the
offline preset, dequantised from its packaged GGUF, CPU, the same threads): lm-eval through its HF
backend as ``loglikelihood(prompt, symbol)`` requests, one per option symbol; pfr with its
prefix-trie key/value cache. Each side runs in its own child process so that its peak memory
(``ru_maxrss``) is its own. The parent measures the matrix-multiply rate of this machine in the same
run and derives the *attention-aware FLOP bound* of the tokens that must be computed:

* the distinct token prefixes of all prompts (the nodes of their token trie) must each be run once;
* a token at position ``t`` costs ``2·P`` FLOPs in the weight matrices (``P`` = parameters outside the
  input embedding) plus ``4·L·d·t`` in attention over its cached context (``QKᵀ`` and ``AV``, ``L``
  layers, ``d`` = heads × head size), capped at the sliding window where the model has one;
* the vocabulary projection is needed only at each prompt's last position: ``2·V·h`` FLOPs per request.

FLOP fraction = bound / pfr's time (1.0 would be scoring at the measured matmul rate). The rate of
these shared hosts drifts within seconds (``benchmarks/micro_packed.py drift``), so each pfr run is
paired with the rate sustained over 3 s just before and just after it; the summary's ``flop_fraction``
is the median run's. The strictest reading (the bound at the fastest short burst seen anywhere in the
run, against pfr's fastest run) is printed too.

    make bench-lm-eval      # creates .venv-bench (lm-eval 0.4.13, torch 2.13.0 CPU, pfr) and runs this
    .venv-bench/bin/python benchmarks/throughput.py --requests 32 [--model gemma3-270m] [--dtype bfloat16]

The last line is machine-readable:
``speedup_vs_lm_eval=X flop_fraction=Y same_decisions=Z/N peak_mem_ratio=W`` (pfr peak / lm-eval peak).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: seconds of back-to-back products in each sustained-rate measurement
SUSTAINED_SECONDS = 3.0


def _requests(n: int) -> list[Any]:
    import pfr

    texts = -(-n // 4)
    reqs = pfr.build("trec", "main", data_dir=os.environ.get("PFR_DATA_DIR"), limit=texts)
    return reqs[:n]


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ------------------------------------------------------------------------------------------ workers
def _worker_pfr(args: argparse.Namespace) -> dict[str, Any]:
    import pfr

    reqs = _requests(args.requests)
    backend: Any = pfr.load_model(args.model, {"batch_size": str(args.batch_size), "dtype": args.dtype})
    prompts = [backend.prompt(r) for r in reqs]
    ids = [backend.encode(p) for p in prompts]
    # Each repeat scores the same requests from a cold prefix cache (the same work); the matmul rate is
    # measured before and after every repeat, beside the runs it is compared with: the fastest burst and
    # the rate sustained over a few seconds (the machine's rate drifts within a run).
    times: list[float] = []
    rates = [_matmul_gflops(args.dtype)]
    sustained = [_sustained_gflops(args.dtype)]
    computed = 0
    for _ in range(args.repeats):
        backend.clear_prefixes()
        before = backend.stats["computed_tokens"]
        t0 = time.perf_counter()
        scores = []
        for i in range(0, len(reqs), args.batch_size):
            scores.extend(backend.score(reqs[i : i + args.batch_size]))
        times.append(time.perf_counter() - t0)
        computed = backend.stats["computed_tokens"] - before
        sustained.append(_sustained_gflops(args.dtype))
        rates.append(_matmul_gflops(args.dtype))
    return {
        "seconds": statistics.median(times),
        "best_seconds": min(times),
        "all_seconds": times,
        "gflops": rates,
        "sustained_gflops": sustained,
        "scores": [list(s.logits) for s in scores],
        "prompts": prompts,
        "symbols": [[o.symbol for o in r.options] for r in reqs],
        "ids": ids,
        "computed_tokens": computed,
        "peak_mib": _peak_mib(),
        "threads": __import__("torch").get_num_threads(),
    }


def _worker_lm_eval(args: argparse.Namespace) -> dict[str, Any]:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from pfr.models.gguf_cache import PRESETS, ensure_converted

    # The prompts pfr rendered (read from its worker's output), so that this process never loads pfr's
    # copy of the model and its peak memory is lm-eval's own.
    given = json.loads(Path(args.prompts).read_text())
    folder = ensure_converted(PRESETS[args.model]())
    lm = HFLM(pretrained=str(folder), device="cpu", dtype=args.dtype, batch_size=args.batch_size)
    instances = []
    for j, (p, symbols) in enumerate(zip(given["prompts"], given["symbols"])):
        for sym in symbols:
            cont = sym if p[-1].isspace() else " " + sym
            instances.append(Instance("loglikelihood", doc={}, arguments=(p, cont), idx=j))
    t0 = time.perf_counter()
    out = lm.loglikelihood(instances, disable_tqdm=True)
    seconds = time.perf_counter() - t0
    k = len(given["symbols"][0])
    return {
        "seconds": seconds,
        "scores": [[ll for ll, _ in out[j * k : (j + 1) * k]] for j in range(len(given["prompts"]))],
        "peak_mib": _peak_mib(),
    }


# ------------------------------------------------------------------------------------------ parent
def _trie_positions(seqs: list[list[int]]) -> list[int]:
    """The position (0-based) of every distinct prefix: one entry per trie node."""
    root: dict[int, Any] = {}
    positions: list[int] = []
    for s in seqs:
        node = root
        for depth, tok in enumerate(s):
            if tok not in node:
                node[tok] = {}
                positions.append(depth)
            node = node[tok]
    return positions


def _matmul_gflops(dtype: str, n: int = 1024, reps: int = 30) -> float:
    import torch

    dt = getattr(torch, dtype)
    a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
    for _ in range(3):
        torch.matmul(a, b)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.matmul(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 * reps / best / 1e9


def _sustained_gflops(dtype: str, n: int = 1024, seconds: float = SUSTAINED_SECONDS) -> float:
    """The 1024² product rate over ``seconds`` of back-to-back products: what the machine sustains
    (short bursts run up to a fifth faster than the seconds around them on these shared hosts)."""
    import torch

    dt = getattr(torch, dtype)
    a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
    torch.matmul(a, b)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.matmul(a, b)
        done += 1
    return 2 * n**3 * done / (time.perf_counter() - t0) / 1e9


def _model_shape(model: str) -> dict[str, Any]:
    from safetensors import safe_open
    from transformers import AutoConfig

    from pfr.models.gguf_cache import PRESETS, ensure_converted

    folder = ensure_converted(PRESETS[model]())
    cfg = AutoConfig.from_pretrained(folder)
    cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    total = embed = 0
    for f in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(f), "pt") as st:
            for name in st.keys():  # noqa: SIM118 - safe_open has keys(), not iteration
                shape = st.get_slice(name).get_shape()
                n = 1
                for x in shape:
                    n *= int(x)
                total += n
                if "embed_tokens" in name:
                    embed += n
    heads = int(cfg.num_attention_heads)
    head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
    kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
    window = getattr(cfg, "sliding_window", None)
    return {
        "params": total,
        "matrix_params": total - embed,  # the input embedding is a lookup, not a product
        "layers": int(cfg.num_hidden_layers),
        "attn_width": heads * head_dim,
        "kv_width": kv_heads * head_dim,
        "hidden": int(cfg.hidden_size),
        "vocab": int(cfg.vocab_size),
        "window": int(window) if window else None,
        "tied": bool(getattr(cfg, "tie_word_embeddings", False)),
    }


def _child(worker: str, args: argparse.Namespace, out: Path, prompts: Path | None = None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", worker, "--out", str(out), "--requests", str(args.requests),
           "--model", args.model, "--dtype", args.dtype, "--batch-size", str(args.batch_size),
           "--repeats", str(args.repeats)]  # fmt: skip
    if prompts is not None:
        cmd += ["--prompts", str(prompts)]
    proc = subprocess.run(cmd, text=True, capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"{worker} worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return dict(json.loads(out.read_text()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=32, help="TREC main requests (4 per text)")
    ap.add_argument("--model", default="smollm2-135m", choices=["smollm2-135m", "gemma3-270m"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5,
                    help="pfr runs (cold prefix cache each; figures from the median run); lm-eval runs once")
    ap.add_argument("--pfr-only", action="store_true",
                    help="skip lm-eval: pfr's FLOP fraction alone, e.g. to compare two pfr versions (PYTHONPATH)")
    ap.add_argument("--worker", choices=["pfr", "lm-eval"], help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--prompts", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("PFR_DATA_DIR", str(ROOT.parent / "shared" / "data"))

    if args.worker:
        result = _worker_pfr(args) if args.worker == "pfr" else _worker_lm_eval(args)
        args.out.write_text(json.dumps(result))
        return

    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    shape = _model_shape(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        ours = _child("pfr", args, Path(tmp) / "pfr.json")
        theirs = None
        if not args.pfr_only:
            theirs = _child("lm-eval", args, Path(tmp) / "lm_eval.json", prompts=Path(tmp) / "pfr.json")
    rates = [*ours["gflops"], _matmul_gflops(args.dtype)]
    gflops = max(rates)  # the fastest rate seen anywhere in the run: the strictest bound

    n = len(ours["scores"])
    k = len(ours["scores"][0])
    same = 0
    diff = 0.0
    for a, b in zip(ours["scores"], theirs["scores"] if theirs else []):
        same += max(range(k), key=a.__getitem__) == max(range(k), key=b.__getitem__)
        diff = max(diff, max(abs(x - y) for x, y in zip(a, b)))

    positions = _trie_positions(ours["ids"])
    w = shape["window"]
    ctx = sum(min(t + 1, w) if w else t + 1 for t in positions)  # keys each new token attends to
    # Weight matrices at every computed position; the vocabulary head (tied to the embedding or not)
    # only at each prompt's last position, below.
    per_token = shape["matrix_params"] - (0 if shape["tied"] else shape["vocab"] * shape["hidden"])
    matmul = 2 * per_token * len(positions)
    attention = 4 * shape["layers"] * shape["attn_width"] * ctx
    head = 2 * shape["vocab"] * shape["hidden"] * n
    flops = matmul + attention + head
    bound = flops / (gflops * 1e9)
    best = ours["best_seconds"]
    # pfr runs the last layer's query, attention and MLP only at each prompt's final token (every other
    # position there is needed only for its keys and values): the work it cannot skip is smaller.
    layers, finals = shape["layers"], len(ours["ids"])
    last_unread = 2 * (per_token / layers - shape["hidden"] * 2 * shape["kv_width"]) * (len(positions) - finals)
    last_unread += 4 * shape["attn_width"] * (ctx - sum(len(x) for x in ours["ids"]))
    tight = (flops - last_unread) / (gflops * 1e9)
    # Paired: each run against the rate sustained in the seconds just before and after it.
    sus = ours["sustained_gflops"]
    paired = [flops / ((sus[i] + sus[i + 1]) / 2 * 1e9) / t for i, t in enumerate(ours["all_seconds"])]
    tight_median = statistics.median(f * (flops - last_unread) / flops for f in paired)
    prompt_tokens = sum(len(x) for x in ours["ids"])
    load_end = os.getloadavg()

    print(f"model: {args.model} ({shape['params'] / 1e6:.1f} M parameters, {args.dtype}, CPU, "
          f"{ours['threads']} threads); {n} TREC main requests × {k} options")  # fmt: skip
    print(f"prompt tokens {prompt_tokens:,}; distinct prefixes (must be computed) {len(positions):,} "
          f"({len(positions) / prompt_tokens:.1%}); pfr computed {ours['computed_tokens']:,} "
          f"({ours['computed_tokens'] / prompt_tokens:.1%})")  # fmt: skip
    if theirs:
        print(f"lm-evaluation-harness  {theirs['seconds']:8.2f} s  {n / theirs['seconds']:7.2f} req/s  "
              f"peak {theirs['peak_mib']:7.0f} MiB")  # fmt: skip
    print(f"pfr (prefix trie)      {ours['seconds']:8.2f} s  {n / ours['seconds']:7.2f} req/s  "
          f"peak {ours['peak_mib']:7.0f} MiB  (median of {len(ours['all_seconds'])} runs: "
          f"{' / '.join(f'{t:.2f}' for t in ours['all_seconds'])} s)")  # fmt: skip
    print(f"matmul rate ({args.dtype}, 1024², best of 30 products × 3, measured {len(rates)} times): "
          f"{' / '.join(f'{r:.0f}' for r in rates)} GFLOP/s")  # fmt: skip
    print(f"matmul rate sustained over {SUSTAINED_SECONDS:.0f} s before and after each pfr run: "
          f"{' / '.join(f'{r:.0f}' for r in sus)} GFLOP/s")  # fmt: skip
    print(
        f"bound: {flops / 1e9:.1f} GFLOP = {matmul / 1e9:.1f} weights + {attention / 1e9:.2f} attention + "
        f"{head / 1e9:.2f} vocabulary head; {bound:.2f} s at the fastest burst ({gflops:.0f} GFLOP/s)"
    )
    print(f"FLOP fraction of each pfr run at the rate sustained around it: "
          f"{' / '.join(f'{f:.2f}' for f in paired)} (median {statistics.median(paired):.2f}); without the last "
          f"layer's unread outputs ({last_unread / 1e9:.1f} GFLOP less) {tight_median:.2f}")  # fmt: skip
    print(f"strictest: bound at the fastest burst / pfr's fastest run ({best:.2f} s) = {bound / best:.2f} "
          f"({tight / best:.2f} without the unread outputs)")  # fmt: skip
    if theirs:
        print(f"max |Δ log-prob| pfr vs lm-eval {diff:.2e}")
    print(f"load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    if not theirs:
        print(f"flop_fraction={statistics.median(paired):.2f} (the median run's paired fraction; pfr only)")
        return
    print("flop_fraction = the median run's paired fraction; speed-up = lm-eval / pfr's median run")
    print(
        f"speedup_vs_lm_eval={theirs['seconds'] / ours['seconds']:.2f} flop_fraction={statistics.median(paired):.2f} "
        f"same_decisions={same}/{n} peak_mem_ratio={ours['peak_mib'] / theirs['peak_mib']:.2f}"
    )


if __name__ == "__main__":
    main()
