"""How often a generated (``decide=generate``) or constrained (``decide=choice``) answer equals the argmax
letter on the same requests.

Usage (any model spec that offers the mode; both runs on the same requests)::

    python benchmarks/generate_agreement.py --model openai:smollm2@http://127.0.0.1:8081/v1 \\
        --dataset trec --limit 25 --out runs/agree
    python benchmarks/generate_agreement.py --model smollm2-135m --limit 10 --out runs/agree-hf
    python benchmarks/generate_agreement.py --model llamacpp:preset:smollm2-135m --decide choice \\
        --limit 10 --out runs/agree-ll

It scores the requests twice into one store — letter log-probabilities (the default) and the
generated answer — and prints, overall and per request kind (RU/RC/FU/FC): the invalid rate and how
often a valid answer is the argmax option, and how many answers each parse reason read (``meta.parse``);
the figures go to benchmarks/results/ too.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from _common import load_average, offline_defaults, write_results

CELLS = ("RU", "RC", "FU", "FC")


def main() -> None:
    offline_defaults()
    import pfr
    from pfr.run.store import Store

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a model spec: openai:MODEL@URL, hf:…, llamacpp:…, a preset")
    p.add_argument("--decide", default="generate", choices=("generate", "choice"))
    p.add_argument("--model-opt", action="append", default=[], help="KEY=VALUE, for both runs")
    p.add_argument("--dataset", default="trec")
    p.add_argument("--limit", type=int, default=25)
    p.add_argument("--out", required=True, help="store folder")
    p.add_argument("--endpoint", default=None, help="openai: completions (default) or chat")
    args = p.parse_args()
    base = _options(args.model_opt)
    if args.endpoint:
        base["endpoint"] = args.endpoint
    elif args.model.startswith("openai:"):
        base["endpoint"] = "completions"
    reqs = pfr.build(args.dataset, panel="main", limit=args.limit)
    seconds = {}
    for decide in ("scores", args.decide):
        t0 = time.perf_counter()
        pfr.run(args.model, reqs, args.out, options={**base, "decide": decide}, progress=False)
        seconds[decide] = round(time.perf_counter() - t0, 1)
    by: dict[str, dict[str, Any]] = {"scores": {}, "generate": {}}  # "generate": the generated or constrained
    with Store(args.out, create=False) as st:
        for r in st.results():
            kind = "generate" if r.model.get("decide") == args.decide else "scores"
            if r.model.get("decide") not in (None, "scores", args.decide):
                continue
            by[kind][r.request.request_id] = r
    rows: dict[str, dict[str, float]] = {}
    for cell in ("all", *CELLS):
        ids = [q.request_id for q in reqs if cell == "all" or q.assignment + q.definition == cell]
        gen = [by["generate"][i] for i in ids]
        valid = [i for i, g in zip(ids, gen) if not g.meta.get("invalid")]
        same = sum(by["generate"][i].choice == by["scores"][i].choice for i in valid)
        rows[cell] = {
            "n": len(ids),
            "invalid": round(1 - len(valid) / len(ids), 4),
            "agree_of_valid": round(same / len(valid), 4) if valid else float("nan"),
            "agree_of_all": round(same / len(ids), 4),
        }
    from pfr.models.decide import PARSE_RULE, reason_counts

    parses = reason_counts(g.meta for g in by["generate"].values())  # how the answers were read (meta.parse)
    figures = {"model": args.model, "decide": args.decide, "options": base, "dataset": args.dataset,
               "requests": len(reqs), "seconds": seconds, "load_average": load_average(),
               "parse_rule": PARSE_RULE, "parses": parses, "agreement": rows}  # fmt: skip
    print(json.dumps(figures, indent=2))
    answers: dict[str, int] = {}
    for g in by["generate"].values():
        answers[g.meta.get("raw", "")] = answers.get(g.meta.get("raw", ""), 0) + 1
    print("most frequent raw answers:", sorted(answers.items(), key=lambda kv: -kv[1])[:8])
    safe = "".join(c if c.isalnum() else "-" for c in args.model.split("@")[0])
    write_results(f"generate_agreement-{safe}-{args.decide}", figures)


def _options(pairs: list[str]) -> dict[str, str]:
    from pfr.models.registry import parse_options

    return parse_options(pairs)


if __name__ == "__main__":
    main()
