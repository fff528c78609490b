#!/usr/bin/env bash
# GPU check for a machine with an NVIDIA GPU and no network: a random-weight 1B Llama (bf16)
# through sago's transformers generation and analysis paths, batch 1 and batched, against
# the memory-bandwidth limit. Needs torch with CUDA, transformers and this repository.
# Finishes in a few minutes (model build ~30 s, then seconds per measurement).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
timeout 480 python3 -m bench.gpu_check --size "${SIZE:-1b}" --device cuda "$@"
