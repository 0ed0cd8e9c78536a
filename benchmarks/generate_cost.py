"""The cost of ``decide=generate`` against letter scoring, for the same requests on the same loaded model.

One process loads the model once (``--model SPEC`` with ``decide=generate``: the generating backend
wraps the letter-scoring one, same weights), warms both paths on one request, then times, each from
a cold prefix cache and in the runner's batches, letter scoring and generation of the first
``--limit`` texts of the TREC main panel (4 requests each), ``--repeats`` times alternating. It prints
both times (medians), their ratio and the load average, and writes
``benchmarks/results/generate_cost-<model>.json`` (machine, CPU flags, load, date, command).

    PYTHONPATH=src .venv/bin/python benchmarks/generate_cost.py --model smollm2-135m --limit 8
    PYTHONPATH=src .venv/bin/python benchmarks/generate_cost.py --model llamacpp:preset:smollm2-135m --limit 8

The last line is machine-readable: ``scores_s=S generate_s=G ratio=R``. Issue 33 asks for a ratio of
at most 1.5 (default ``max_tokens``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from _common import load_average, offline_defaults, write_results


def _cold(backend: Any) -> None:
    """Forget every cached prefix, so that each timing does the whole work."""
    clear = getattr(backend, "clear_prefixes", None)
    if callable(clear):
        clear()
    llm = getattr(backend, "llm", None)
    if llm is not None and callable(getattr(llm, "reset", None)):
        llm.reset()


def _timed(backend: Any, lm: Any, reqs: list[Any], batch: int) -> tuple[float, list[Any]]:
    _cold(lm)
    t0 = time.perf_counter()
    out: list[Any] = []
    for i in range(0, len(reqs), batch):
        out.extend(backend.score(reqs[i : i + batch]))
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m", help="model spec (an hf preset, hf:…, llamacpp:…)")
    ap.add_argument("--limit", type=int, default=8, help="texts of the TREC main panel (4 requests each)")
    ap.add_argument("--dataset", default="trec")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--model-opt", action="append", default=[], metavar="KEY=VALUE",
                    help="more model options (dtype defaults to float32 on hf)")  # fmt: skip
    args = ap.parse_args()
    offline_defaults()
    import pfr

    opts = dict(o.split("=", 1) for o in args.model_opt)
    opts["decide"] = "generate"
    if args.model.split(":", 1)[0] not in ("llamacpp", "vllm"):
        opts.setdefault("dtype", "float32")
    reqs = pfr.build(args.dataset, "main", data_dir=os.environ.get("PFR_DATA_DIR"), limit=args.limit)
    backend: Any = pfr.load_model(args.model, opts)
    lm = backend.lm
    batch = int(getattr(lm, "batch_size", 16))
    # first-call set-up of both paths, untimed: on hf a first batch of greedy answers also calibrates
    # the check of batched decoding against one-at-a-time decoding (pfr.models.hf.decoding)
    lm.score(reqs[:1])
    backend.score(reqs[:4])
    scores_s: list[float] = []
    generate_s: list[float] = []
    loads = [load_average()]
    answers: list[Any] = []
    for _ in range(args.repeats):
        scores_s.append(_timed(lm, lm, reqs, batch)[0])
        seconds, answers = _timed(backend, lm, reqs, batch)
        generate_s.append(seconds)
        loads.append(load_average())
    s, g = statistics.median(scores_s), statistics.median(generate_s)
    invalid = sum(a.meta.get("invalid", False) for a in answers)
    print(f"{args.model} on {len(reqs)} {args.dataset} requests (--limit {args.limit}), "
          f"max_tokens {backend.decoding.max_tokens}, batches of {batch}")  # fmt: skip
    print(f"letter scoring {s:.2f} s, decide=generate {g:.2f} s: ratio {g / s:.2f} (load average {loads[-1]})")
    threads = __import__("torch").get_num_threads() if "torch" in sys.modules else None
    figures = {"requests": len(reqs), "scores_seconds": scores_s, "generate_seconds": generate_s,
               "ratio": g / s, "max_tokens": backend.decoding.max_tokens, "invalid_answers": invalid,
               "load_averages": loads, "torch_threads": threads, "identity": backend.identity,
               # hf: the logit gap below which a batched answer is decoded again one at a time
               "close_threshold": getattr(lm, "_gen_close", None)}  # fmt: skip
    name = args.model.replace(":", "-").replace("/", "_")
    write_results(f"generate_cost-{name}", figures)
    print(f"scores_s={s:.3f} generate_s={g:.3f} ratio={g / s:.3f}")


if __name__ == "__main__":
    main()
