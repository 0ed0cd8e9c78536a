"""Prefix reuse on a sliding-window model against full evaluations, in figures (the llamacpp backend
reuses prefixes on such models with a full-size sliding-window cache, ``swa_full=True``).

    PFR_DATA_DIR=../shared/data .venv/bin/python benchmarks/llamacpp_sliding_window.py [--texts 2]

On ``llamacpp:preset:gemma3-270m`` (Gemma 3: sliding-window attention, window 512) and the first
``--texts`` texts of the main panel (4 requests each, plain prompts: ``chat_template=off``) of the demo
dataset at ``n_batch`` 64, 256 and 512 and of CLINC150 (longer prompts) at 512, it measures:

* **prefix reuse** against full evaluation: each batch is scored with the KV cache of the previous
  prompt's common prefix kept (the backend's default), and every option log-prob compared with the
  same request evaluated from an empty cache (``prefix_reuse`` off);
* the same in **raw logits** with ``swa_full=True`` (llama.cpp keeping every cell of the window):
  one request evaluated after its quad partner against the same request alone;
* **full evaluations at ``n_batch`` 64 and 256** against 512;
* **llama.cpp's own server** (``python -m llama_cpp.server`` on 127.0.0.1, started here, its default
  ``n_batch``): two requests of one quad sent one after the other, each against the in-process full
  evaluation (the second one finds the first one's prefix in the server's cache), on demo and CLINC150.

Figures go to ``benchmarks/results/llamacpp_sliding_window.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path
from typing import Any

from _common import load_average, offline_defaults, write_results
from llamacpp_agreement import llama_server

PRESET = "gemma3-270m"


def _max_diff(a: Any, b: Any, censored: Any = None) -> float:
    pairs = zip(a, b, censored or [False] * len(a))
    return max((abs(x - y) for x, y, c in pairs if not c), default=0.0)


def _raw_after_partner(path: Path, n_ctx: int, n_batch: int, first: list[int], second: list[int]) -> float:
    """Largest |Δ| of the raw next-token logits of ``second`` evaluated after ``first`` (common prefix kept)
    against ``second`` alone, with ``swa_full=True``."""
    import numpy as np
    from llama_cpp import Llama

    from pfr.models.llamacpp.backend import ALIGN
    from pfr.models.lm.core import common_prefix

    llm = Llama(model_path=str(path), n_ctx=n_ctx, n_batch=n_batch, swa_full=True, logits_all=False, verbose=False)

    def last() -> Any:
        return np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),)).astype(np.float64).copy()

    llm.reset()
    llm.eval(first)
    keep = min(common_prefix(first, second), len(second) - 1)
    keep -= keep % ALIGN  # as the backend does (its module docstring)
    llm.n_tokens = keep
    llm.eval(second[keep:])
    reused = last()
    llm.reset()
    llm.eval(second)
    full = last()
    llm.close()
    return float(np.abs(reused - full).max())


def _case(dataset: str, texts: int, n_batch: int) -> dict[str, Any]:
    """One dataset at one ``n_batch``: prompt lengths, prefix reuse against full evaluation, raw logits with
    ``swa_full=True``; the in-process full scores and what the server comparison needs."""
    import pfr
    from pfr.run.cost import tokenizer_of

    reqs = pfr.build(dataset, "main", limit=texts)
    backend: Any = pfr.load_model(f"llamacpp:preset:{PRESET}", {"chat_template": "off", "n_batch": str(n_batch)})
    encode = tokenizer_of(backend)
    assert encode is not None
    ids = [encode(backend.prompt(r)) for r in reqs]
    backend.prefix_reuse = False  # full evaluations: each prompt from an empty cache
    full = [s.logits for s in backend.score(reqs)]
    backend.prefix_reuse = True  # the backend's default
    before = (backend.tokens_prompt, backend.tokens_evaluated)
    reused: list[Any] = []
    for i in range(0, len(reqs), 4):
        backend.llm.reset()
        reused.extend(s.logits for s in backend.score(reqs[i : i + 4]))
    row = {
        "dataset": dataset, "n_batch": n_batch, "requests": len(reqs), "window": backend.n_swa,
        "prompt_tokens_min": min(map(len, ids)), "prompt_tokens_max": max(map(len, ids)),
        "reuse_prompt_tokens": backend.tokens_prompt - before[0],
        "reuse_evaluated_tokens": backend.tokens_evaluated - before[1],
        "reuse_forced_max_abs_diff": max(_max_diff(a, b) for a, b in zip(reused, full)),
    }  # fmt: skip
    path, n_ctx = backend.path, backend.n_ctx
    backend.close()
    row["swa_full_raw_logits_max_abs_diff"] = _raw_after_partner(path, n_ctx, n_batch, ids[0], ids[1])
    print(f"{dataset}, n_batch {n_batch}: {len(reqs)} requests of {row['prompt_tokens_min']}–"
          f"{row['prompt_tokens_max']} tokens; prefix reuse (evaluated {row['reuse_evaluated_tokens']:,} "
          f"of {row['reuse_prompt_tokens']:,}) vs full evaluation: max |Δ log-prob| "
          f"{row['reuse_forced_max_abs_diff']:.3g}; swa_full=True raw logits after the quad partner vs alone: "
          f"{row['swa_full_raw_logits_max_abs_diff']:.3g}")  # fmt: skip
    return {"row": row, "reqs": reqs, "full": full, "path": path}


def main() -> None:
    offline_defaults()
    import pfr

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--texts", type=int, default=2, help="main-panel texts per dataset (4 requests each)")
    args = p.parse_args()
    load = load_average()
    print(f"load average at start: {load}")
    cases = [_case(d, args.texts, nb) for d, nb in (("demo", 64), ("demo", 256), ("demo", 512), ("clinc150", 512))]
    demo = {c["row"]["n_batch"]: c["full"] for c in cases if c["row"]["dataset"] == "demo"}
    batch_diff = {str(n): max(_max_diff(a, c) for a, c in zip(demo[n], demo[512])) for n in (64, 256)}
    print("full evaluations on demo, n_batch 64 and 256 vs 512: max |Δ| "
          + ", ".join(f"{n}: {d:.3g}" for n, d in batch_diff.items()))  # fmt: skip
    server: dict[str, dict[str, float]] = {}
    with contextlib.ExitStack() as stack:
        log = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "server.log"
        base = stack.enter_context(llama_server(cases[0]["path"], log))  # llama_cpp.server's default n_batch: 512
        served = pfr.load_model(f"openai:gemma3@{base}", {"endpoint": "completions", "top_k": "20"})
        for c in cases[2:]:
            diffs = []
            for k in range(2):  # one after the other: the second finds the first one's prefix in the server's cache
                s = served.score([c["reqs"][k]])[0]
                diffs.append(_max_diff(c["full"][k], s.logits, s.censored))
            server[c["row"]["dataset"]] = {"first": diffs[0], "second": diffs[1]}
            print(f"llama_cpp.server on {c['row']['dataset']}, two requests of one quad in a row vs the in-process "
                  f"full evaluation: first {diffs[0]:.3g}, second {diffs[1]:.3g} (uncensored options)")  # fmt: skip
    end = load_average()
    print(f"load average at end: {end}")
    figures = {"model": PRESET, "cases": [c["row"] for c in cases], "n_batch_max_abs_diff_vs_512": batch_diff,
               "server_max_abs_diff": server}  # fmt: skip
    write_results("llamacpp_sliding_window", figures, load_average_end=end)


if __name__ == "__main__":
    main()
