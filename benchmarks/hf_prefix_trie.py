"""What the hf backend's prefix trie saves on TREC prompts: shared tokens, tokens computed, forward passes.

    PFR_DATA_DIR=../shared/data .venv/bin/python benchmarks/hf_prefix_trie.py [--limit 8]

Scores the first ``--limit`` texts of TREC's main panel (4 requests each, default design) in
batches of the backend's ``batch_size``, as ``pfr run`` sends them, with

* ``smollm2-135m`` (chat template on, its default) on the level-batched trie (``packed=False``) and
  on the packed trie (the default), counting forward passes (``stats["forward_calls"]``) against the
  nodes of the batches' token tries (one pass per node is what a branch-at-a-time forward makes), and
  the prompt tokens all requests share (the instruction and inventory) against the prompt lengths;
* ``gemma3-270m`` (plain prompts; sliding-window layers take the branch-at-a-time path): its prompt
  lengths against its 512-token window.

Figures go to ``benchmarks/results/hf_prefix_trie.json``.
"""

from __future__ import annotations

import argparse
from typing import Any

from _common import load_average, offline_defaults, write_results


def _nodes(level: list[Any]) -> int:
    return sum(1 + _nodes(n.children) for n in level)


def _measure(spec: str, reqs: list[Any], **opts: str) -> dict[str, Any]:
    import pfr
    from pfr.models.hf.trie import build_trie, lcp

    backend: Any = pfr.load_model(spec, opts)
    ids = [p.tokens for p in backend.prepare(reqs)]
    size = backend.batch_size
    batches = [list(range(i, min(i + size, len(reqs)))) for i in range(0, len(reqs), size)]
    trie_nodes = 0
    for b in batches:
        rows = [ids[i] for i in b]
        trie_nodes += 1 + _nodes(build_trie(rows, lcp(rows)))  # the root run, then every node below it
    for b in batches:
        backend.score([reqs[i] for i in b])
    lengths = [len(t) for t in ids]
    row = {
        "model": spec, "options": opts, "requests": len(reqs), "batch_size": size,
        "prompt_tokens_min": min(lengths), "prompt_tokens_max": max(lengths),
        "prompt_tokens_mean": sum(lengths) / len(lengths), "shared_by_all": lcp(ids),
        "prompt_tokens": backend.stats["prompt_tokens"], "computed_tokens": backend.stats["computed_tokens"],
        "forward_calls": backend.stats["forward_calls"], "trie_nodes": trie_nodes,
        "sliding_window": getattr(backend.model.config, "sliding_window", None),
    }  # fmt: skip
    print(f"{spec} {opts}: prompts {row['prompt_tokens_min']}–{row['prompt_tokens_max']} tokens "
          f"(mean {row['prompt_tokens_mean']:.0f}), {row['shared_by_all']} shared by all; computed "
          f"{row['computed_tokens']:,} of {row['prompt_tokens']:,}; {row['forward_calls']} forward passes, "
          f"{trie_nodes} trie nodes")  # fmt: skip
    return row


def main() -> None:
    offline_defaults()
    import pfr

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=int, default=8, help="TREC main-panel texts (4 requests each)")
    args = p.parse_args()
    load = load_average()
    print(f"load average at start: {load}")
    reqs = pfr.build("trec", "main", limit=args.limit)
    rows = [
        _measure("smollm2-135m", reqs, packed="off"),
        _measure("smollm2-135m", reqs),
        _measure("gemma3-270m", reqs),
    ]
    end = load_average()
    print(f"load average at end: {end}")
    write_results("hf_prefix_trie", {"texts": args.limit, "runs": rows}, load_average_end=end)


if __name__ == "__main__":
    main()
