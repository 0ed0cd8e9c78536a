"""Why the llamacpp backend cuts a reused prefix back to a multiple of ``ALIGN`` tokens, in figures.

    PFR_DATA_DIR=../shared/data .venv/bin/python benchmarks/llamacpp_prefix_alignment.py \\
        --model llamacpp:preset:qwen2.5-coder-1.5b [--texts 2]

The first ``--texts`` texts of TREC's main panel (4 requests each) are scored three ways by one GGUF:
each prompt from an empty cache (``prefix_reuse=off``, the reference), as one batch with prefix reuse
(the kept prefix cut to a multiple of ``ALIGN``, as the backend does), and as one batch with the whole
common prefix kept (``ALIGN`` set to 1 for that run: the backend before the cut). For each batch run:
how many requests' letter scores differ from the reference, the largest |Δ|, and the tokens evaluated.

With ``--server`` (a preset only), the same prompts also go one after another, in the batch's order, to
``python -m llama_cpp.server`` on the preset's GGUF (127.0.0.1, started here): the top token's log-prob
of each answer (``/v1/completions``, ``logprobs=1``) against the in-process top token's log-prob after
full evaluations, after aligned reuse and after whole-prefix reuse: which of them the server computes.
Figures go to ``benchmarks/results/llamacpp_prefix_alignment-<model>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from _common import load_average, offline_defaults, write_results


def _top1(model: Any, prompts: list[str], reuse: bool) -> list[float]:
    """The largest next-token log-prob after each prompt, scored in this order from an empty cache."""
    model.prefix_reuse = reuse
    model.llm.reset()
    return [float(model._next_token_logprobs(model.encode(p))[0].max()) for p in prompts]


def _server_top1(model_path: Path, prompts: list[str]) -> list[float]:
    from llamacpp_agreement import llama_server

    out = []
    with tempfile.TemporaryDirectory() as tmp, llama_server(model_path, Path(tmp) / "log") as base:
        for p in prompts:
            body = json.dumps({"prompt": p, "max_tokens": 1, "temperature": 0, "logprobs": 1}).encode()
            req = urllib.request.Request(f"{base}/completions", body, {"Content-Type": "application/json"})
            with contextlib.closing(urllib.request.urlopen(req, timeout=600)) as resp:
                data = json.load(resp)
            out.append(max(data["choices"][0]["logprobs"]["top_logprobs"][0].values()))
    return out


def main() -> None:
    offline_defaults()
    import pfr
    from pfr.models.llamacpp import backend as llamacpp

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="llamacpp:preset:qwen2.5-coder-1.5b", help="a llamacpp: spec")
    p.add_argument("--texts", type=int, default=2, help="TREC main-panel texts (4 requests each)")
    p.add_argument("--server", action="store_true", help="also ask llama_cpp.server (see above)")
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
    figures: dict[str, Any] = {"model": args.model, "runs": rows}
    if args.server:
        model = pfr.load_model(args.model, {})
        prompts = sorted((model.prompt(r) for r in reqs), key=model.encode)  # the batch's scoring order
        mine = {"full evaluation": _top1(model, prompts, False), "aligned reuse": _top1(model, prompts, True)}
        llamacpp.ALIGN = 1
        try:
            mine["whole-prefix reuse"] = _top1(model, prompts, True)
        finally:
            llamacpp.ALIGN = aligned
        path = model.path
        model.close()
        server = _server_top1(path, prompts)
        figures["server"] = {}
        for label, xs in mine.items():
            diffs = [abs(a - b) for a, b in zip(server, xs)]
            figures["server"][label] = {"differing": sum(d > 1e-5 for d in diffs), "max_abs_diff": max(diffs)}
            print(f"llama_cpp.server vs in process, {label}: {sum(d > 1e-5 for d in diffs)}/{len(diffs)} top-token "
                  f"log-probs differ by more than 1e-5, max |Δ| {max(diffs):.3g}")  # fmt: skip
    end = load_average()
    print(f"load average at end: {end}")
    name = "llamacpp_prefix_alignment-" + re.sub(r"[^A-Za-z0-9.]+", "-", args.model.split(":")[-1])
    write_results(name, figures, load_average_end=end)


if __name__ == "__main__":
    main()
