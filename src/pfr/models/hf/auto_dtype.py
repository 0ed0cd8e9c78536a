"""What ``dtype=auto`` means for the hf backend: bfloat16 where the hardware runs it fast, else float32.

On a GPU bfloat16 is always the fast choice. On a CPU it depends on the instruction set: with AMX
(``amx_bf16``) bfloat16 matrix products run several times faster than float32 (the 1.5B Qwen model
scored 8 TREC requests in 5.5 s in bfloat16 against 22.1 s in float32 on a Xeon with AMX), while a
CPU with only AVX2 emulates bfloat16 and runs it about five times *slower*. So on a CPU:

* ``amx_bf16`` among the CPU flags → bfloat16;
* ``avx512_bf16`` without AMX → a short probe (bfloat16 against float32 products of a model-sized
  matrix, well under a second) decides: bfloat16 only if it is at least :data:`PROBE_GAIN` times faster;
* otherwise → float32.

The choice lands in the model identity (its ``dtype`` field holds the resolved type), so stores of
runs in different types never mix. ``PFR_CPU_DTYPE=float32|bfloat16`` fixes what ``auto`` means on a
CPU (the test suite pins float32: it compares hf scores with other backends at 1e-3).
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

#: bfloat16 must beat float32 by this factor in the probe to be chosen
PROBE_GAIN = 1.5
#: environment variable that fixes what ``dtype=auto`` means on a CPU
ENV = "PFR_CPU_DTYPE"


def cpu_flags() -> frozenset[str]:
    """The CPU's instruction-set flags (Linux ``/proc/cpuinfo``; empty elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "flags":
                return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def probe_gain(n: int = 768, reps: int = 4) -> float:
    """How many times faster bfloat16 products of ``n × n`` matrices run than float32 ones, here, now."""
    import torch

    def best(dtype: torch.dtype) -> float:
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        torch.matmul(a, b)
        fastest = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            torch.matmul(a, b)
            fastest = min(fastest, time.perf_counter() - t0)
        return fastest

    return best(torch.float32) / max(best(torch.bfloat16), 1e-9)


def choose(flags: frozenset[str], probe: float | None = None) -> str:
    """The CPU rule: ``amx_bf16`` → bfloat16; ``avx512_bf16`` → bfloat16 if ``probe`` (the measured
    gain) is at least :data:`PROBE_GAIN`; otherwise float32."""
    if "amx_bf16" in flags:
        return "bfloat16"
    if "avx512_bf16" in flags and probe is not None and probe >= PROBE_GAIN:
        return "bfloat16"
    return "float32"


@functools.cache
def _cpu_auto() -> str:
    flags = cpu_flags()
    probe = probe_gain() if "avx512_bf16" in flags and "amx_bf16" not in flags else None
    return choose(flags, probe)


def auto_dtype(device: str) -> str:
    """The dtype ``dtype=auto`` loads on ``device`` (``cpu``, ``cuda``, ``cuda:N``, …)."""
    if device != "cpu":
        return "bfloat16"
    fixed = os.environ.get(ENV, "").strip()
    if fixed in ("float32", "bfloat16"):
        return fixed
    if fixed:
        from pfr.errors import ModelError

        raise ModelError(f"environment variable {ENV}={fixed!r}: use float32 or bfloat16 (or leave it unset)")
    return _cpu_auto()
