"""llama.cpp in process against its own OpenAI-compatible server and against Transformers, on the same
requests: decisions, letter log-prob differences, censored server scores, and prefix reuse.

    PFR_DATA_DIR=../shared/data .venv/bin/python benchmarks/llamacpp_agreement.py [--limit 8] [--store DIR]
        [--preset smollm2-135m|gemma3-270m]

It scores the first ``--limit`` texts of TREC's main panel (4 requests each) into one store, with the
preset's GGUF each time (SmolLM2-135M-Instruct by default), in two prompt modes:

* **plain** (no chat template): ``llamacpp:preset:PRESET`` with ``chat_template=off``; the
  server's ``completions`` endpoint (``top_k=20``); ``PRESET`` (Transformers, the same GGUF
  dequantised to float32) with ``chat_template=off``;
* **chat** (instruct presets only; gemma3-270m is a base model): the two presets' defaults (chat
  template on) and the server's ``chat`` endpoint.

The server is ``python -m llama_cpp.server`` on the preset's GGUF, on a free port of 127.0.0.1, started
here and stopped at the end. For each mode and each other backend it prints, against llama.cpp in
process: the same decisions, the mean and largest |Δ| of the letter log-probs over the options the
other backend did not censor, and how many option scores it censored; for the decisions that differ,
the winning option's margin over the other backend's choice on each side; whether llama.cpp and
Transformers render the same prompts and the same token ids in each mode; and the prompt tokens
llama.cpp was given against those it evaluated (prefix reuse, from each score's ``meta``).
Figures go to ``benchmarks/results/llamacpp_agreement.json`` (``llamacpp_agreement-PRESET.json`` for
another preset).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import free_port, load_average, offline_defaults, serve, write_results

PRESET = "smollm2-135m"


@contextlib.contextmanager
def llama_server(gguf: Path, log: Path) -> Iterator[str]:
    """``llama_cpp.server`` for ``gguf`` on a free port of 127.0.0.1; yields its base URL once it answers."""
    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "4096"]  # fmt: skip
    with serve(cmd, f"{base}/models", log):
        yield base


def _margin(logits: tuple[float, ...], mine: int, theirs: int) -> float:
    """How far this side's choice is ahead of the other side's choice, in nats."""
    return logits[mine] - logits[theirs]


def _compare(ref: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    keys = sorted(set(ref) & set(other))
    diffs = [abs(x - y) for k in keys
             for x, y, c in zip(ref[k].logits, other[k].logits, other[k].censored) if not c]  # fmt: skip
    differ = [k for k in keys if ref[k].choice != other[k].choice]
    return {
        "requests": len(keys),
        "same_decisions": len(keys) - len(differ),
        "uncensored_scores": len(diffs),
        "censored_scores": sum(sum(other[k].censored) for k in keys),
        "option_scores": sum(len(other[k].censored) for k in keys),
        "mean_abs_diff": sum(diffs) / len(diffs) if diffs else None,
        "max_abs_diff": max(diffs) if diffs else None,
        "differing": [
            {
                "request_id": k,
                "llamacpp_margin": _margin(ref[k].logits, ref[k].choice, other[k].choice),
                "other_margin": _margin(other[k].logits, other[k].choice, ref[k].choice),
            }
            for k in differ
        ],
    }


def _same_tokens(preset: str, modes: list[str], reqs: list[Any]) -> dict[str, int]:
    """Per mode, on how many requests llama.cpp and Transformers render the same prompt and token ids."""
    import pfr
    from pfr.run.cost import tokenizer_of

    out = {}
    for mode in modes:
        opts = {"chat_template": "off" if mode == "plain" else "on"}
        ll, hf = pfr.load_model(f"llamacpp:preset:{preset}", opts), pfr.load_model(preset, opts)
        enc_ll, enc_hf = tokenizer_of(ll), tokenizer_of(hf)
        assert enc_ll is not None and enc_hf is not None
        out[mode] = sum(ll.prompt(r) == hf.prompt(r) and enc_ll(ll.prompt(r)) == enc_hf(hf.prompt(r)) for r in reqs)
        for b in (ll, hf):
            close = getattr(b, "close", None)
            if callable(close):
                close()
    return out


def main() -> None:
    offline_defaults()
    import pfr
    from pfr.models.lm.gguf_cache import PRESET_CHAT, PRESETS
    from pfr.run.store import Store

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=int, default=8, help="TREC main-panel texts (4 requests each)")
    p.add_argument("--store", type=Path, help="store folder (default: a temporary one)")
    p.add_argument("--preset", default=PRESET, choices=sorted(PRESETS), help="the GGUF preset compared")
    args = p.parse_args()
    preset = args.preset
    modes = ["plain", "chat"] if PRESET_CHAT[preset] else ["plain"]
    load = load_average()
    print(f"load average at start: {load}")
    reqs = pfr.build("trec", "main", limit=args.limit)
    gguf = PRESETS[preset]().path
    with contextlib.ExitStack() as stack:
        store = args.store or Path(stack.enter_context(tempfile.TemporaryDirectory())) / "store"
        seconds: dict[str, float] = {}

        def score(label: str, spec: str, **opts: str) -> None:
            t0 = time.perf_counter()
            pfr.run(spec, reqs, store, options=opts, progress=False)
            seconds[label] = round(time.perf_counter() - t0, 1)
            print(f"  {label}: {seconds[label]} s")

        for mode in modes:
            switch = "off" if mode == "plain" else "on"
            score(f"llamacpp {mode}", f"llamacpp:preset:{preset}", chat_template=switch)
            score(f"hf {mode}", preset, chat_template=switch)
        base = stack.enter_context(llama_server(gguf, Path(stack.enter_context(tempfile.TemporaryDirectory())) / "log"))
        for mode in modes:
            endpoint = "completions" if mode == "plain" else "chat"
            score(f"server {endpoint}", f"openai:{preset}@{base}", endpoint=endpoint, top_k="20")
        by: dict[tuple[str, str], dict[str, Any]] = {}
        with Store(store, create=False) as st:
            for r in st.results():
                chat = r.model.get("chat_template") == "on" or r.model.get("endpoint") == "chat"
                by.setdefault(("chat" if chat else "plain", r.model["backend"]), {})[r.request.request_id] = r
    same_tokens = _same_tokens(preset, modes, reqs)
    plain = by["plain", "llamacpp"]
    reuse = {
        "prompt_tokens": sum(int(r.meta["prompt_tokens"]) for r in plain.values()),
        "evaluated_tokens": sum(int(r.meta["evaluated_tokens"]) for r in plain.values()),
    }
    reuse["evaluated_fraction"] = reuse["evaluated_tokens"] / reuse["prompt_tokens"]
    print(f"\n{preset}, {len(reqs)} TREC main requests ({args.limit} texts)")
    print(f"prefix reuse (plain): {reuse['prompt_tokens']:,} prompt tokens, {reuse['evaluated_tokens']:,} "
          f"evaluated ({reuse['evaluated_fraction']:.1%})")  # fmt: skip
    print("same prompt and token ids, llama.cpp and Transformers: "
          + ", ".join(f"{mode} {n}/{len(reqs)}" for mode, n in same_tokens.items()))
    rows = []
    for mode in modes:
        for other in ("openai", "hf"):
            row = {"mode": mode, "other": other, **_compare(by[mode, "llamacpp"], by[mode, other])}
            rows.append(row)
            mean = "—" if row["mean_abs_diff"] is None else f"{row['mean_abs_diff']:.2g}"
            big = "—" if row["max_abs_diff"] is None else f"{row['max_abs_diff']:.2g}"
            print(f"[{mode}] llamacpp vs {other}: same decision {row['same_decisions']}/{row['requests']}, "
                  f"|Δ| mean {mean} max {big} over {row['uncensored_scores']} scores, "
                  f"censored {row['censored_scores']}/{row['option_scores']}")  # fmt: skip
            for d in row["differing"]:
                print(f"    {d['request_id']}: margin llama.cpp {d['llamacpp_margin']:.3f}, "
                      f"{other} {d['other_margin']:.3f}")
    end = load_average()
    print(f"load average at end: {end}")
    figures = {"preset": preset, "requests": len(reqs), "texts": args.limit, "prefix_reuse": reuse,
               "same_tokens": same_tokens, "pairs": rows, "seconds": seconds}
    write_results("llamacpp_agreement" + ("" if preset == PRESET else f"-{preset}"), figures, load_average_end=end)


if __name__ == "__main__":
    main()
