"""The hf backend on a GPU against the FLOP bound, with random-weight models of real architectures.

Speed does not depend on weight values, so only a configuration must travel to a lent GPU machine:
Qwen2.5-1.5B and Qwen2.5-7B are built from their published shapes (``CONFIGS``) with random weights,
wrapped in pfr's :class:`~pfr.models.hf.backend.HFBackend` (the same trie, cache and batching as any
``hf:`` run) and timed on the same TREC main requests. The bound is the attention-aware FLOP bound
of ``benchmarks/_bound.py`` (distinct prefixes once, attention over their context, the head at each
prompt's end) at the ``--dtype`` matrix-product rate this GPU sustains, measured in the same run
(``--rate-n``² products). Decisions of random weights mean nothing and are not reported.

The GPU machine has torch and transformers but no hub: the tokenizer travels as a folder. Here::

    .venv/bin/python benchmarks/cuda_hf.py --save-tokenizer .bench/qwen-tokenizer \\
        --save-data .bench/data                       # Qwen's tokenizer (from the offline preset) and TREC
    .venv/bin/python benchmarks/cuda_hf.py --tokenizer .bench/qwen-tokenizer --data-dir .bench/data \\
        --config tiny --device cpu --requests 8       # the whole path on CPU with a tiny model

There (``.bench`` ignored by git and carried, pfr from ``src``)::

    PYTHONPATH=src python3 benchmarks/cuda_hf.py --tokenizer .bench/qwen-tokenizer --data-dir .bench/data \\
        --config qwen2.5-1.5b --config qwen2.5-7b --requests 64 --dtype bfloat16 --out-dir $OUT

``import pfr`` there needs ``orjson`` and ``rich`` besides torch and transformers; where they are
missing, carry their wheels (the device tool's README says how).

Figures go to ``benchmarks/results/cuda_hf-<configs>.json`` (and ``--out-dir``), with the device, load and date.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from _bound import flop_bound, shape_of
from _common import load_average, offline_defaults, write_results

#: the published shapes (config.json of the hub repositories), enough to rebuild each architecture
CONFIGS: dict[str, dict[str, Any]] = {
    "qwen2.5-1.5b": {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
                     "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936,
                     "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                     "tie_word_embeddings": True},
    "qwen2.5-7b": {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                   "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
                   "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                   "tie_word_embeddings": False},
    # a check of the whole path on CPU in seconds, not a benchmark
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
             "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True},
}  # fmt: skip


def save_inputs(tokenizer_dir: Path | None, data_dir: Path | None) -> None:
    """Write what must travel: Qwen's tokenizer (from the offline preset) and the TREC files."""
    if tokenizer_dir is not None:
        from pfr.models.registry import load_model

        backend = load_model("qwen2.5-coder-1.5b", {"dtype": "float32"})
        backend.tokenizer.save_pretrained(tokenizer_dir)  # type: ignore[attr-defined]
        print(f"tokenizer → {tokenizer_dir}")
    if data_dir is not None:
        import os

        src = Path(os.environ["PFR_DATA_DIR"]) / "trec"
        shutil.copytree(src, data_dir / "trec", dirs_exist_ok=True)
        print(f"TREC → {data_dir / 'trec'}")


def gemm_rate(device: str, dtype: str, n: int, seconds: float = 2.0) -> float:
    """The ``n × n`` product rate sustained over ``seconds`` on ``device``, GFLOP/s."""
    import torch

    dt = getattr(torch, dtype)
    a, b = torch.randn(n, n, dtype=dt, device=device), torch.randn(n, n, dtype=dt, device=device)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    torch.matmul(a, b)
    sync()
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            torch.matmul(a, b)
        sync()
        done += 8
    return 2 * n**3 * done / (time.perf_counter() - t0) / 1e9


def build(config: str, tokenizer: Any, device: str, dtype: str) -> Any:
    """An :class:`HFBackend` over a random-weight model of ``config`` on ``device``."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from pfr.models.hf.backend import HFBackend

    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(Qwen2Config(**CONFIGS[config]), dtype=getattr(torch, dtype))
    model.eval()
    return HFBackend(model, tokenizer, name=f"{config} (random weights)", source={"config": config},
                     dtype=dtype, chat_template=True)  # fmt: skip


def time_config(config: str, requests: list[Any], tokenizer: Any, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    def sync() -> None:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    warm = build(config, tokenizer, args.device, args.dtype)
    sync()
    load = time.perf_counter() - t0
    shape = shape_of(warm) or {}
    ids = [warm.encode(warm.prompt(r)) for r in requests]
    bound = flop_bound(shape, ids)
    warm.score(requests[:4])  # kernels chosen and tuned, allocator warm; its prefix cache goes with it
    del warm
    seconds, rates = [], []
    for _ in range(args.repeats):  # each run on a fresh backend: a cold prefix cache
        backend = build(config, tokenizer, args.device, args.dtype)
        rates.append(gemm_rate(args.device, args.dtype, args.rate_n))
        sync()
        t = time.perf_counter()
        for i in range(0, len(requests), backend.batch_size):
            backend.score(requests[i : i + backend.batch_size])
        sync()
        seconds.append(time.perf_counter() - t)
        del backend
    rates.append(gemm_rate(args.device, args.dtype, args.rate_n))
    median = statistics.median(seconds)
    rate = statistics.median(rates)
    fraction = bound["flops"] / (rate * 1e9) / median
    peak = torch.cuda.max_memory_allocated() / 2**20 if args.device.startswith("cuda") else None
    print(f"{config} ({shape['params'] / 1e6:.1f} M parameters, {args.dtype}, {args.device}) on "
          f"{len(requests)} requests: load {load:.1f} s")  # fmt: skip
    floor = bound["flops"] / rate / 1e9
    print(f"  prompt tokens {sum(map(len, ids)):,}; distinct {bound['distinct']:,}; "
          f"bound {bound['flops'] / 1e9:.1f} GFLOP at {rate:,.0f} GFLOP/s = {floor:.3f} s")  # fmt: skip
    print(f"  pfr {' / '.join(f'{s:.3f}' for s in seconds)} s (median {median:.3f}); FLOP fraction {fraction:.2f}")
    return {"config": config, "requests": len(requests), "prompt_tokens": sum(map(len, ids)),
            "distinct_tokens": bound["distinct"], "bound_gflop": bound["flops"] / 1e9, "gemm_gflops": rates,
            "seconds": seconds, "median_seconds": median, "flop_fraction": round(fraction, 3),
            "load_seconds": load, "peak_cuda_mib": peak}  # fmt: skip


def main() -> None:
    offline_defaults()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", action="append", choices=sorted(CONFIGS), help="repeatable (default qwen2.5-1.5b)")
    ap.add_argument("--tokenizer", type=Path, help="a saved Qwen2.5 tokenizer folder (--save-tokenizer)")
    ap.add_argument("--data-dir", type=Path, help="folder with trec/ (default PFR_DATA_DIR)")
    ap.add_argument("--requests", type=int, default=64, help="TREC main requests (4 per text)")
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rate-n", type=int, default=8192, help="size of the products that measure the rate")
    ap.add_argument("--out-dir", type=Path, help="also write the figures here (a lent machine's $OUT)")
    ap.add_argument("--save-tokenizer", type=Path, help="write the tokenizer folder and exit")
    ap.add_argument("--save-data", type=Path, help="copy TREC into this folder and exit")
    args = ap.parse_args()
    if args.save_tokenizer or args.save_data:
        save_inputs(args.save_tokenizer, args.save_data)
        return
    if args.tokenizer is None:
        ap.error("--tokenizer is required (make it here with --save-tokenizer)")
    import torch
    from transformers import AutoTokenizer

    import pfr

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    requests = pfr.build("trec", panel="main", limit=max(1, args.requests // 4), data_dir=args.data_dir)
    requests = requests[: args.requests]
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
    print(f"load average at start: {load_average()}; device {device_name}; torch {torch.__version__}")
    runs = [time_config(c, requests, tokenizer, args) for c in args.config or ["qwen2.5-1.5b"]]
    figures = {"device": device_name, "dtype": args.dtype, "torch": torch.__version__, "runs": runs}
    name = "cuda_hf-" + "+".join(args.config or ["qwen2.5-1.5b"])
    out = write_results(name, figures, load_average_end=load_average())
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / out.name).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
