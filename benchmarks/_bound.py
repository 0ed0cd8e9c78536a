"""The attention-aware FLOP bound of scoring prompts, shared by throughput.py and bench_study.py.

* the distinct token prefixes of all prompts (the nodes of their token trie) must each be run once;
* a token at position ``t`` costs ``2·P`` FLOPs in the weight matrices (``P`` = parameters outside the
  input embedding and the vocabulary head) plus ``4·L·d·t`` in attention over its cached context
  (``QKᵀ`` and ``AV``, ``L`` layers, ``d`` = heads × head size), capped at the sliding window;
* the vocabulary projection is needed only at each prompt's last position: ``2·V·h`` FLOPs per request.

The rate is the float32 (or bfloat16) 1024² matrix-product rate of torch on this machine, measured in
the same run: bound = FLOPs / rate. For llama.cpp's quantised kernels the float32 rate is only a
yardstick (they are not bound by it); what matters there is the tokens computed against the distinct.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

#: seconds of back-to-back products in each sustained-rate measurement
SUSTAINED_SECONDS = 3.0


def trie_positions(seqs: Sequence[Sequence[int]]) -> list[int]:
    """The position (0-based) of every distinct prefix: one entry per trie node."""
    root: dict[int, Any] = {}
    positions: list[int] = []
    for s in seqs:
        node = root
        for depth, tok in enumerate(s):
            if tok not in node:
                node[tok] = {}
                positions.append(depth)
            node = node[tok]
    return positions


def matmul_gflops(dtype: str = "float32", n: int = 1024, reps: int = 30) -> float:
    """The fastest short burst of ``n × n`` products (best of 3 × ``reps``), GFLOP/s."""
    import torch

    dt = getattr(torch, dtype)
    a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
    for _ in range(3):
        torch.matmul(a, b)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.matmul(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 * reps / best / 1e9


def sustained_gflops(dtype: str = "float32", n: int = 1024, seconds: float = SUSTAINED_SECONDS) -> float:
    """The 1024² product rate over ``seconds`` of back-to-back products: what the machine sustains
    (short bursts run up to a fifth faster than the seconds around them on these shared hosts)."""
    import torch

    dt = getattr(torch, dtype)
    a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
    torch.matmul(a, b)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.matmul(a, b)
        done += 1
    return 2 * n**3 * done / (time.perf_counter() - t0) / 1e9


def shape_of(backend: Any) -> dict[str, Any] | None:
    """Layer sizes of a loaded hf or llama.cpp backend (None for anything else)."""
    model = getattr(backend, "model", None)
    if model is not None and hasattr(model, "config"):
        cfg = model.config
        cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        total = embed = 0
        for name, p in model.named_parameters():  # tied weights appear once
            total += p.numel()
            if "embed_tokens" in name:
                embed += p.numel()
        heads = int(cfg.num_attention_heads)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
        kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
        window = getattr(cfg, "sliding_window", None)
        return {"params": total, "matrix_params": total - embed, "layers": int(cfg.num_hidden_layers),
                "attn_width": heads * head_dim, "kv_width": kv_heads * head_dim, "hidden": int(cfg.hidden_size),
                "vocab": int(cfg.vocab_size), "window": int(window) if window else None,
                "tied": bool(getattr(cfg, "tie_word_embeddings", False))}  # fmt: skip
    llm = getattr(backend, "llm", None)
    if llm is not None:
        meta = llm.metadata
        arch = meta["general.architecture"]
        heads = int(meta[f"{arch}.attention.head_count"])
        hidden = int(meta[f"{arch}.embedding_length"])
        head_dim = int(meta.get(f"{arch}.attention.key_length", hidden // heads))
        kv_heads = int(meta.get(f"{arch}.attention.head_count_kv", heads))
        window = meta.get(f"{arch}.attention.sliding_window")
        vocab = int(llm.n_vocab())
        total = int(llm._model.n_params())
        layers = int(meta[f"{arch}.block_count"])
        ff = int(meta[f"{arch}.feed_forward_length"])
        # the weight matrices of each block (Q, K, V, O and a gated MLP) from the sizes, since the file
        # may or may not hold a separate output head; the head is counted apart (at the last tokens)
        per_block = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2 + 3 * hidden * ff
        return {"params": total, "matrix_params": layers * per_block, "layers": layers,
                "attn_width": heads * head_dim, "kv_width": kv_heads * head_dim, "hidden": hidden, "vocab": vocab,
                "window": int(window) if window else None, "tied": True}  # fmt: skip
    return None


def flop_bound(shape: dict[str, Any], ids: Sequence[Sequence[int]]) -> dict[str, float]:
    """FLOPs of the work that cannot be skipped for prompts ``ids`` (see the module docstring)."""
    positions = trie_positions(ids)
    w = shape["window"]
    ctx = sum(min(t + 1, w) if w else t + 1 for t in positions)  # keys each new token attends to
    per_token = shape["matrix_params"] - (0 if shape["tied"] else shape["vocab"] * shape["hidden"])
    matmul = 2 * per_token * len(positions)
    attention = 4 * shape["layers"] * shape["attn_width"] * ctx
    head = 2 * shape["vocab"] * shape["hidden"] * len(ids)
    # the last layer's query, attention and MLP are needed only at each prompt's final token
    layers, finals = shape["layers"], len(ids)
    unread = 2 * (per_token / layers - shape["hidden"] * 2 * shape["kv_width"]) * (len(positions) - finals)
    unread += 4 * shape["attn_width"] * (ctx - sum(len(x) for x in ids))
    return {"flops": matmul + attention + head, "matmul": matmul, "attention": attention, "head": head,
            "distinct": len(positions), "last_unread": unread}  # fmt: skip
