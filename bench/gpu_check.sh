#!/usr/bin/env bash
# GPU check for a machine with an NVIDIA GPU and no network: a random-weight 1B Llama (bf16)
# through sago's transformers generation and analysis paths, batch 1 and batched, against
# the memory-bandwidth limit, with two of `make bench-paper`'s ratios (scoring pass over a
# raw batched forward, BERTScore over bert_score's own scorer). Needs torch with CUDA,
# transformers and this repository. Finishes in a few minutes (model build ~30 s, then
# seconds per measurement).
#
# With DATA_DIR (the paper datasets) and a vLLM environment (`make setup-vllm
# VLLM_PACKAGE=vllm==<version>`, or SAGO_VLLM_PYTHON), it then runs `python -m bench.paper`
# on the GPU: all four ratios, per stage, at PAPER_PROMPTS prompts per dataset (default 2)
# and PAPER_TOKENS new tokens (default 100), the engine in bf16 with room for the scorer.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
timeout 480 python3 -m bench.gpu_check --size "${SIZE:-1b}" --device cuda "$@"

VLLM_PY="${SAGO_VLLM_PYTHON:-.venv-vllm/bin/python}"
if [[ -z "${DATA_DIR:-}" || ! -x "$VLLM_PY" ]]; then
    echo "bench-paper ratios on the GPU: skipped (set DATA_DIR and build the vLLM environment)"
    exit 0
fi
GPU_CONFIG="$(mktemp --suffix=.yaml)"
printf 'vllm: {dtype: bfloat16, gpu_memory_utilization: 0.6}\n' > "$GPU_CONFIG"
timeout 1800 python3 -m bench.paper --data-dir "$DATA_DIR" --prompts "${PAPER_PROMPTS:-2}" \
    --max-new-tokens "${PAPER_TOKENS:-100}" --config "$GPU_CONFIG"
