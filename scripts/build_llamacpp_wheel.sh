#!/usr/bin/env bash
# Build the llama-cpp-python wheel once and keep it in the wheel cache (CPU-only; ~10 min on 2 cores).
#
# Portable by default. A native build (-DGGML_NATIVE=ON, llama.cpp's default) compiles for whatever the
# build CPU advertises; on this project's machines that includes AMX, and the AMX kernel faults
# (SIGSEGV in ggml_backend_amx_mul_mat on `ldtilecfg`) on the first eval; and the machines are not all
# one CPU (an AMD EPYC without AVX-512 dies with SIGILL in an AVX-512 build). The default flags below
# turn native detection, AVX-512 and AMX off and target x86-64-v3 (AVX/AVX2/FMA/F16C), which all run.
#
# The cache is keyed by version *and* build flags: each wheel lives in
#   $PFR_WHEEL_CACHE/llama-cpp-python-$VERSION-$KEY/
# where KEY is the first 12 hex digits of sha256(CMAKE_ARGS). A wheel built with other flags (an old
# native wheel, say) sits in another folder and is never picked up. The script prints that folder on
# its last line of stdout so that the caller can `pip install --find-links` exactly it.
#
# Idempotent: when the keyed folder already holds a wheel, it does nothing but print the folder.
#
# Environment: LLAMA_CPP_VERSION (pin, default 0.3.36), PFR_WHEEL_CACHE (default ~/.cache/pfr/wheels),
# PIP (default .venv/bin/pip, else pip), CMAKE_ARGS (replaces the portable default flags).
set -euo pipefail

VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
CACHE="${PFR_WHEEL_CACHE:-$HOME/.cache/pfr/wheels}"
PORTABLE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
export CMAKE_ARGS="${CMAKE_ARGS:-$PORTABLE_ARGS}"
if [[ -z "${PIP:-}" ]]; then
  if [[ -x .venv/bin/pip ]]; then PIP=.venv/bin/pip; else PIP=pip; fi
fi

KEY=$(printf '%s' "$CMAKE_ARGS" | sha256sum | cut -c1-12)
DEST="$CACHE/llama-cpp-python-$VERSION-$KEY"
mkdir -p "$DEST"
shopt -s nullglob
found=("$DEST"/llama_cpp_python-"$VERSION"-*.whl)
if (( ${#found[@]} > 0 )); then
  echo "llama-cpp-python $VERSION: cached wheel ${found[0]} (flags key $KEY)" >&2
  echo "$DEST"
  exit 0
fi

echo "llama-cpp-python $VERSION: building a wheel into $DEST (CMAKE_ARGS=$CMAKE_ARGS)" >&2
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
start=$(date +%s)
# Build into a scratch folder and move the wheel in last: an interrupted build leaves no partial wheel
# in the keyed folder, so the next run builds again instead of trusting a half-written file.
tmp=$(mktemp -d "$CACHE/.build-XXXXXX")
cleanup() { rm -rf -- "$tmp"; }
trap cleanup EXIT
"$PIP" wheel --no-deps --no-cache-dir -w "$tmp" "llama-cpp-python==$VERSION" >&2
built=("$tmp"/llama_cpp_python-"$VERSION"-*.whl)
if (( ${#built[@]} == 0 )); then
  echo "llama-cpp-python $VERSION: pip wheel finished but no wheel is in $tmp" >&2
  exit 1
fi
printf '%s\n' "$CMAKE_ARGS" >"$DEST/CMAKE_ARGS"
mv "${built[0]}" "$DEST/"
echo "llama-cpp-python $VERSION: built $DEST/$(basename "${built[0]}") in $(( $(date +%s) - start )) s" >&2
echo "$DEST"
