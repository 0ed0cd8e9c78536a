"""What ``decide=generate`` costs against letter scoring on the same requests (issue 33: at most 1.5×).

Usage (the llama.cpp SmolLM2 GGUF, 32 TREC requests, default ``max_tokens``)::

    python benchmarks/generate_cost_llamacpp.py --model llamacpp:preset:smollm2-135m --limit 8

It runs the requests twice through ``pfr.run`` with one loaded model each, letter scoring then
``decide=generate`` (any spec that offers it), and prints both scoring times as the run reports them
(model load excluded), the ratio, and the prompt tokens asked and evaluated where the backend counts
them; the figures go to ``benchmarks/results/generate_cost-<model>.json``.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path
from typing import Any

from _common import load_average, offline_defaults, write_results


def _options(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--model-opt {pair!r}: use KEY=VALUE")
        out[key] = value
    return out


def _timed(spec: str, options: dict[str, str], reqs: list[Any], store: Path) -> dict[str, Any]:
    import pfr
    from pfr.models.registry import load_model

    model = load_model(spec, options)
    lm = getattr(model, "lm", model)
    before = (getattr(lm, "tokens_prompt", 0), getattr(lm, "tokens_evaluated", 0))
    try:
        summary = pfr.run(model, reqs, store, progress=False)
    finally:
        model.close()
    return {
        "seconds": round(summary.seconds, 2),
        "prompt_tokens": getattr(lm, "tokens_prompt", 0) - before[0],
        "evaluated_tokens": getattr(lm, "tokens_evaluated", 0) - before[1],
    }


def main() -> None:
    offline_defaults()
    import pfr

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a model spec that offers decide=generate")
    p.add_argument("--model-opt", action="append", default=[], help="KEY=VALUE, for both runs")
    p.add_argument("--dataset", default="trec")
    p.add_argument("--limit", type=int, default=8, help="texts (four requests each)")
    args = p.parse_args()
    base = _options(args.model_opt)
    reqs = pfr.build(args.dataset, panel="main", limit=args.limit)
    load = {"before": load_average()}
    with tempfile.TemporaryDirectory() as tmp:
        letters = _timed(args.model, {**base}, reqs, Path(tmp) / "store")
        generate = _timed(args.model, {**base, "decide": "generate"}, reqs, Path(tmp) / "store")
    load["after"] = load_average()
    ratio = generate["seconds"] / letters["seconds"]
    print(f"{len(reqs)} requests of {args.dataset}, {args.model} {base or ''}")
    for label, f in (("letter scoring ", letters), ("decide=generate", generate)):
        print(f"{label} {f['seconds']:8.1f} s ({f['evaluated_tokens']} of {f['prompt_tokens']} prompt tokens computed)")
    print(f"ratio {ratio:.2f} (goal ≤ 1.5); load average before {load['before']}, after {load['after']}")
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", args.model).strip("-")
    figures = {"requests": len(reqs), "letters": letters, "generate": generate, "ratio": round(ratio, 3)}
    write_results(f"generate_cost-{name}", figures, options=base, load_during=load)


if __name__ == "__main__":
    main()
