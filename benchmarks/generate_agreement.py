"""How often a generated answer (``decide=generate``) equals the argmax letter on the same requests.

Usage (an OpenAI-compatible server serving MODEL at URL; both runs on the same requests)::

    python benchmarks/generate_agreement.py --model openai:smollm2@http://127.0.0.1:8081/v1 \\
        --dataset trec --limit 25 --out runs/agree

It scores the requests twice into one store — letter log-probabilities (the default) and the
generated answer (``decide=generate``) — and prints, overall and per request kind (RU/RC/FU/FC):
the invalid rate and how often a valid generated answer is the argmax option.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from _common import load_average, offline_defaults

CELLS = ("RU", "RC", "FU", "FC")


def main() -> None:
    offline_defaults()
    import pfr
    from pfr.run.store import Store

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="openai:MODEL@URL")
    p.add_argument("--dataset", default="trec")
    p.add_argument("--limit", type=int, default=25)
    p.add_argument("--out", required=True, help="store folder")
    p.add_argument("--endpoint", default="completions")
    args = p.parse_args()
    reqs = pfr.build(args.dataset, panel="main", limit=args.limit)
    seconds = {}
    for decide in ("scores", "generate"):
        t0 = time.perf_counter()
        pfr.run(args.model, reqs, args.out, options={"decide": decide, "endpoint": args.endpoint}, progress=False)
        seconds[decide] = round(time.perf_counter() - t0, 1)
    by: dict[str, dict[str, Any]] = {"scores": {}, "generate": {}}
    with Store(args.out, create=False) as st:
        for r in st.results():
            kind = "generate" if r.model.get("decide") == "generate" else "scores"
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
    print(json.dumps({"model": args.model, "dataset": args.dataset, "requests": len(reqs), "seconds": seconds,
                      "load_average": load_average(), "agreement": rows}, indent=2))  # fmt: skip
    answers: dict[str, int] = {}
    for g in by["generate"].values():
        answers[g.meta.get("raw", "")] = answers.get(g.meta.get("raw", ""), 0) + 1
    print("most frequent raw answers:", sorted(answers.items(), key=lambda kv: -kv[1])[:8])


if __name__ == "__main__":
    main()
