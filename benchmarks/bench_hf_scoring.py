"""Throughput of the Transformers backend with prefix caching vs a plain forward pass per request.

Scores N TREC main requests (4 per text) with a model (default the smollm2-135m preset) and prints
requests/s and prompt tokens/s for both, the share of prompt tokens the cached path actually ran,
the minimum share any exact prefix-sharing scorer must run (the token trie of the prompts), and the
largest score difference between the two paths.

    .venv/bin/python benchmarks/bench_hf_scoring.py --n 32
    .venv/bin/python benchmarks/bench_hf_scoring.py --model gemma3-270m --n 16
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def trie_tokens(ids: list[list[int]]) -> int:
    """Distinct token prefixes over all prompts: the tokens an exact prefix-sharing scorer must run."""
    root: dict[int, Any] = {}
    count = 0
    for seq in ids:
        node = root
        for tok in seq:
            if tok not in node:
                node[tok] = {}
                count += 1
            node = node[tok]
    return count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--n", type=int, default=32, help="requests (a multiple of 4)")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--model-opt", action="append", default=[], help="backend option key=value")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    import pfr
    from pfr.models.registry import load_model, parse_options

    if args.threads:
        torch.set_num_threads(args.threads)
    requests = pfr.build("trec", "main", data_dir=args.data_dir, limit=max(1, args.n // 4))[: args.n]
    t0 = time.perf_counter()
    backend: Any = load_model(args.model, parse_options(args.model_opt))
    print(f"model {args.model}: loaded in {time.perf_counter() - t0:.1f} s; dtype {backend.dtype}, "
          f"device {backend._device}, torch threads {torch.get_num_threads()}")
    prompts = [backend.prompt(r) for r in requests]
    ids = [backend.encode(p) for p in prompts]
    total = sum(len(x) for x in ids)
    print(f"{len(requests)} requests, {total} prompt tokens (mean {total / len(ids):.0f}, max {max(map(len, ids))})")

    backend.score(requests[:1])  # warm-up (allocator, kernels); then forget its prefix
    backend._prefixes.clear()
    before = dict(backend.stats)
    t0 = time.perf_counter()
    cached = []
    for i in range(0, len(requests), backend.batch_size):
        cached.extend(backend.score(requests[i : i + backend.batch_size]))
    t_cached = time.perf_counter() - t0
    computed = backend.stats["computed_tokens"] - before["computed_tokens"]
    padded = backend.stats["padded_tokens"] - before["padded_tokens"]
    calls = backend.stats["forward_calls"] - before["forward_calls"]

    plain = []
    t0 = time.perf_counter()
    with torch.inference_mode():
        for r, p, x in zip(requests, prompts, ids):
            inp = torch.tensor([x], device=backend._device)
            logits = backend.model(input_ids=inp, use_cache=False, logits_to_keep=1).logits[0, -1]
            lp = torch.log_softmax(logits.double(), dim=-1)
            plain.append([float(lp[backend.symbol_id(p, o.symbol)]) for o in r.options])
    t_plain = time.perf_counter() - t0
    diff = max(abs(a - b) for s, q in zip(cached, plain) for a, b in zip(s.logits, q))

    n = len(requests)
    print(f"prefix cache : {n / t_cached:7.2f} req/s  {total / t_cached:8.0f} prompt tok/s  ({t_cached:.1f} s, "
          f"batch {backend.batch_size}, {calls} forward calls)")
    print(f"plain forward: {n / t_plain:7.2f} req/s  {total / t_plain:8.0f} prompt tok/s  ({t_plain:.1f} s)")
    print(f"speed-up {t_plain / t_cached:.2f}x; tokens run: {computed / total:.1%} of prompt tokens "
          f"({padded / total:.1%} with padding); token-trie minimum {trie_tokens(ids) / total:.1%}")
    print(f"max |cached - plain| log-prob over {n * len(requests[0].options)} option scores: {diff:.2e}")


if __name__ == "__main__":
    main()
