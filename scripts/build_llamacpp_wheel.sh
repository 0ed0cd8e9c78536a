#!/usr/bin/env bash
# Build the llama-cpp-python wheel once and keep it in the wheel cache (CPU-only; ~10 min on 2 cores).
#
# Idempotent: when a wheel of the pinned version is already in the cache, it does nothing, so CI
# machines that keep $PFR_WHEEL_CACHE (default ~/.cache/pfr/wheels) skip the compile. Install with
#   pip install --find-links "$PFR_WHEEL_CACHE" "llama-cpp-python[server]==$LLAMA_CPP_VERSION"
# which takes the cached wheel and fetches only the server's pure-Python dependencies.
#
# Environment: LLAMA_CPP_VERSION (pin, default 0.3.36), PFR_WHEEL_CACHE, PIP (default .venv/bin/pip,
# else pip), CMAKE_ARGS (passed to the llama.cpp build; the default native CPU build suits a wheel
# that stays on the machine that built it; use -DGGML_NATIVE=OFF for one that moves between CPUs).
set -euo pipefail

VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
CACHE="${PFR_WHEEL_CACHE:-$HOME/.cache/pfr/wheels}"
if [[ -z "${PIP:-}" ]]; then
  if [[ -x .venv/bin/pip ]]; then PIP=.venv/bin/pip; else PIP=pip; fi
fi

mkdir -p "$CACHE"
shopt -s nullglob
found=("$CACHE"/llama_cpp_python-"$VERSION"-*.whl)
if (( ${#found[@]} > 0 )); then
  echo "llama-cpp-python $VERSION: cached wheel ${found[0]}"
  exit 0
fi

echo "llama-cpp-python $VERSION: building a wheel into $CACHE (CMAKE_ARGS=${CMAKE_ARGS:-<default>})"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
start=$(date +%s)
"$PIP" wheel --no-deps --no-cache-dir -w "$CACHE" "llama-cpp-python==$VERSION"
found=("$CACHE"/llama_cpp_python-"$VERSION"-*.whl)
if (( ${#found[@]} == 0 )); then
  echo "llama-cpp-python $VERSION: pip wheel finished but no wheel is in $CACHE" >&2
  exit 1
fi
echo "llama-cpp-python $VERSION: built ${found[0]} in $(( $(date +%s) - start )) s"
