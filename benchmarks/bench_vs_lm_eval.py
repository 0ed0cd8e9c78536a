"""pfr's transformers scoring against lm-evaluation-harness on the same requests and model, and
against the FLOP bound of the tokens that actually have to be computed (DESIGN §10).

Both score the same prompts (`backend.prompt(request)`) with the same model (SmolLM2-135M-Instruct,
dequantised from the packaged GGUF, fp32, CPU): lm-eval as `loglikelihood(prompt, symbol)` requests,
one per option (its logits cache runs each context once), pfr with its prefix-trie key/value cache.
It needs lm-eval, which is not a pfr dependency; run it from a separate venv:

    python3 -m venv .venv-bench && .venv-bench/bin/pip install torch==2.13.0 && \\
      .venv-bench/bin/pip install "lm-eval[hf]" gguf accelerate && .venv-bench/bin/pip install -e .
    PFR_DATA_DIR=../shared/data .venv-bench/bin/python benchmarks/bench_vs_lm_eval.py --texts 32

The FLOP bound counts 2 × parameters FLOPs per computed token (matrix products only) over the
distinct token prefixes of all prompts (a token shared by several prompts needs computing once),
at the fp32 matrix-multiply rate this machine measures for a square 1024 × 1024 product.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

import pfr
from pfr.models.gguf_cache import PRESETS, ensure_converted


def _trie_tokens(seqs: list[list[int]]) -> int:
    """Distinct prefixes = nodes of the token trie: the least number of token positions to compute."""
    root: dict[int, dict] = {}
    nodes = 0
    for s in seqs:
        node = root
        for t in s:
            if t not in node:
                node[t] = {}
                nodes += 1
            node = node[t]
    return nodes


def _matmul_gflops(n: int = 1024, reps: int = 20) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.matmul(a, b)
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=32, help="TREC main texts (4 requests each)")
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args()

    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    reqs = pfr.build("trec", "main", data_dir=os.environ.get("PFR_DATA_DIR"), limit=args.texts)
    backend = pfr.load_model("smollm2-135m", {"batch_size": str(args.batch_size)})
    prompts = [backend.prompt(r) for r in reqs]  # type: ignore[attr-defined]
    ids = [backend.encode(p) for p in prompts]  # type: ignore[attr-defined]

    t0 = time.perf_counter()
    ours = []
    for i in range(0, len(reqs), args.batch_size):
        ours.extend(backend.score(reqs[i : i + args.batch_size]))
    t_pfr = time.perf_counter() - t0
    computed = backend.stats["computed_tokens"]  # type: ignore[attr-defined]

    folder = ensure_converted(PRESETS["smollm2-135m"]())
    lm = HFLM(pretrained=str(folder), device="cpu", dtype="float32", batch_size=args.batch_size)
    instances = []
    for j, (r, p) in enumerate(zip(reqs, prompts)):
        for o in r.options:
            form = o.symbol if p[-1].isspace() else " " + o.symbol
            instances.append(Instance("loglikelihood", doc={}, arguments=(p, form), idx=j))
    t0 = time.perf_counter()
    theirs = lm.loglikelihood(instances, disable_tqdm=True)
    t_lm = time.perf_counter() - t0

    k = len(reqs[0].options)
    diffs, agree = [], 0
    for j, s in enumerate(ours):
        ref = [ll for ll, _ in theirs[j * k : (j + 1) * k]]
        diffs.append(max(abs(a - b) for a, b in zip(s.logits, ref)))
        agree += max(range(k), key=lambda i: s.logits[i]) == max(range(k), key=lambda i: ref[i])

    params = sum(p.numel() for p in backend.model.parameters())  # type: ignore[attr-defined]
    prompt_tokens = sum(len(x) for x in ids)
    needed = _trie_tokens(ids)
    gflops = _matmul_gflops()
    bound = 2 * params * needed / (gflops * 1e9)
    n = len(reqs)
    print(f"model: smollm2-135m ({params / 1e6:.0f}M parameters, fp32, CPU, {torch.get_num_threads()} threads)")
    print(f"requests: {n} ({args.texts} TREC main texts × 4), {k} options each; prompt tokens {prompt_tokens:,}")
    print(f"lm-evaluation-harness {t_lm:8.2f} s  {n / t_lm:6.2f} req/s  (one forward per context)")
    print(f"pfr (prefix trie)     {t_pfr:8.2f} s  {n / t_pfr:6.2f} req/s  computed tokens {computed:,}")
    print(f"speed-up              {t_lm / t_pfr:8.2f} ×")
    print(f"FLOP bound            {bound:8.2f} s  ({needed:,} distinct prefix tokens, {gflops:.0f} GFLOP/s matmul)")
    print(f"pfr / bound           {t_pfr / bound:8.2f} ×")
    print(f"agreement: {agree}/{n} decisions; max |Δ log-prob| {max(diffs):.2e}")


if __name__ == "__main__":
    main()
