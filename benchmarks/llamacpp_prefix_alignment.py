"""Why the llamacpp backend cuts a reused prefix back to a multiple of ``ALIGN`` tokens, in figures.

    PFR_DATA_DIR=../shared/data .venv/bin/python benchmarks/llamacpp_prefix_alignment.py \\
        --model llamacpp:preset:qwen2.5-coder-1.5b [--texts 2]

The first ``--texts`` texts of TREC's main panel (4 requests each) are scored three ways by one GGUF:
each prompt from an empty cache (``prefix_reuse=off``, the reference), as one batch with prefix reuse
(the kept prefix cut to a multiple of ``ALIGN``, as the backend does), and as one batch with the whole
common prefix kept (``ALIGN`` set to 1 for that run: the backend before the cut). For each batch run:
how many requests' letter scores differ from the reference, the largest |Δ|, and the tokens evaluated.
Figures go to ``benchmarks/results/llamacpp_prefix_alignment-<model>.json``.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from _common import load_average, offline_defaults, write_results


def main() -> None:
    offline_defaults()
    import pfr
    from pfr.models.llamacpp import backend as llamacpp

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="llamacpp:preset:qwen2.5-coder-1.5b", help="a llamacpp: spec")
    p.add_argument("--texts", type=int, default=2, help="TREC main-panel texts (4 requests each)")
    args = p.parse_args()
    load = load_average()
    print(f"load average at start: {load}")
    reqs = pfr.build("trec", "main", limit=args.texts)
    ref: Any = pfr.load_model(args.model, {"prefix_reuse": "off"})
    alone = [s.logits for s in ref.score(reqs)]
    ref.close()
    rows = []
    aligned = llamacpp.ALIGN
    for label, align in (("aligned", aligned), ("whole common prefix", 1)):
        llamacpp.ALIGN = align
        try:
            model: Any = pfr.load_model(args.model, {})
            batch = [s.logits for s in model.score(reqs)]
            evaluated, prompt = model.tokens_evaluated, model.tokens_prompt
            model.close()
        finally:
            llamacpp.ALIGN = aligned
        diffs = [max(abs(x - y) for x, y in zip(a, b)) for a, b in zip(batch, alone)]
        row = {"run": label, "align": align, "requests": len(reqs), "differing": sum(d > 0 for d in diffs),
               "max_abs_diff": max(diffs), "evaluated_tokens": evaluated, "prompt_tokens": prompt}  # fmt: skip
        rows.append(row)
        print(f"{label} (ALIGN={align}): {row['differing']}/{len(reqs)} requests' letter scores differ from the "
              f"full evaluation, max |Δ| {row['max_abs_diff']:.3g}; evaluated {evaluated:,} of {prompt:,} tokens")
    end = load_average()
    print(f"load average at end: {end}")
    name = "llamacpp_prefix_alignment-" + re.sub(r"[^A-Za-z0-9.]+", "-", args.model.split(":")[-1])
    write_results(name, {"model": args.model, "runs": rows}, load_average_end=end)


if __name__ == "__main__":
    main()
