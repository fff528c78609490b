"""vLLM generation with the transformers pass for scoring.

Generation runs in a worker process of the vLLM environment (``vllm_worker.py``): one engine
per backend, built once and reused for every batch; requests and responses travel as Parquet
files. The worker inherits ``CUDA_VISIBLE_DEVICES``, so a process pinned to a device keeps
its engine there. Act, Prob and Ent come from the transformers backend on the same weights,
teacher-forcing vLLM's own response token ids (never re-tokenised text).
A GGUF model is first materialised to a safetensors folder (keyed by its sha256).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sago_core.backends.materialise import materialised_folder
from sago_core.backends.model_source import LocalModel
from sago_core.backends.protocol import Generation, ScoringRequest, TeacherForced
from sago_core.config import VllmSettings
from sago_core.errors import ConfigError, SagoError

WORKER = Path(__file__).with_name("vllm_worker.py")
LOG = logging.getLogger("sago.vllm")


def forward_logs(stream: Any, tail: deque[str]) -> None:
    """The worker's log lines into the ``sago.vllm`` logger (which a flow shows in the
    Prefect UI): warnings and errors at their level, vLLM's chatty INFO lines at DEBUG. The
    last lines are kept for the error message if the worker dies."""
    for raw in stream:
        line = raw.rstrip()
        if not line:
            continue
        tail.append(line)
        if " ERROR " in line or line.startswith(("ERROR", "Traceback")):
            LOG.error("vllm: %s", line)
        elif " WARNING " in line or line.startswith("WARNING"):
            LOG.warning("vllm: %s", line)
        else:
            LOG.debug("vllm: %s", line)


REPO_ROOT = Path(__file__).resolve().parents[2]


class VllmWorkerError(SagoError):
    """The vLLM worker failed to start or to answer."""


def vllm_python(settings: VllmSettings) -> str:
    chosen = (
        settings.python
        or os.environ.get("SAGO_VLLM_PYTHON")
        or str(REPO_ROOT / ".venv-vllm" / "bin" / "python")
    )
    if not Path(chosen).is_file():
        raise ConfigError(
            f"vllm: no vLLM environment at {chosen}; run `make setup-vllm` or set "
            "vllm.python / SAGO_VLLM_PYTHON to the interpreter of an environment with vllm"
        )
    return chosen


class VllmBackend:
    name = "vllm"

    def __init__(
        self,
        source: LocalModel,
        settings: VllmSettings,
        cache_root: Path,
        trust_remote_code: bool = False,
    ) -> None:
        self.source = source
        self.settings = settings
        self.trust_remote_code = trust_remote_code
        self.folder = materialised_folder(source, cache_root)
        self._scorer: Any = None
        self._lock = threading.Lock()
        self._work = Path(tempfile.mkdtemp(prefix="sago-vllm-"))
        self._process: subprocess.Popen[str] | None = None
        self.engine: dict[str, Any] = {}
        self.log_tail: deque[str] = deque(maxlen=50)

    def _start(self) -> subprocess.Popen[str]:
        """The worker, started on the first generation (a scoring-only use never pays the
        engine start)."""
        if self._process is not None and self._process.poll() is None:
            return self._process
        settings = self.settings
        options: dict[str, Any] = {
            "model": str(self.folder),
            "dtype": settings.dtype,
            "max_model_len": settings.max_model_len,
            "tensor_parallel_size": settings.tensor_parallel_size,
            "enforce_eager": settings.enforce_eager,
            "cpu_kv_cache_gib": settings.cpu_kv_cache_gib,
            "trust_remote_code": self.trust_remote_code,
        }
        if os.environ.get("CUDA_VISIBLE_DEVICES", "") not in ("", "-1"):
            options["gpu_memory_utilization"] = settings.gpu_memory_utilization
        env = dict(os.environ)
        # vLLM's CPU build serves on one thread unless told otherwise: 212 vs 147 tok/s here.
        env.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
        self._process = subprocess.Popen(
            [vllm_python(settings), str(WORKER), json.dumps(options)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,  # forwarded to the sago.vllm logger
            text=True,
        )
        threading.Thread(
            target=forward_logs, args=(self._process.stderr, self.log_tail), daemon=True
        ).start()
        atexit.register(self.close)
        self.engine = self._read_reply(self._process, settings.startup_timeout_s)
        if not self.engine.get("ready"):
            raise VllmWorkerError(f"vLLM worker did not start: {self.engine}")
        LOG.info("vLLM engine ready: %s", json.dumps(self.engine, sort_keys=True))
        return self._process

    def _read_reply(self, process: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
        result: dict[str, Any] = {}

        def read() -> None:
            assert process.stdout is not None
            line = process.stdout.readline()
            result.update(json.loads(line) if line.strip() else {"error": "worker exited"})

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            self.close()
            raise VllmWorkerError(f"vLLM worker gave no answer within {timeout:.0f} s")
        if "error" in result:
            last = " | ".join(list(self.log_tail)[-3:])
            raise VllmWorkerError(f"vLLM worker: {result['error']} (last log lines: {last})")
        return result

    def close(self) -> None:
        process = getattr(self, "_process", None)
        if process is not None and process.poll() is None:
            if process.stdin:
                process.stdin.close()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(self._work, ignore_errors=True)  # the request/response exchange files

    # -- generation (vLLM) ------------------------------------------------------------
    def generate(
        self, prompts: Sequence[str], max_new_tokens: int, batch_size: int
    ) -> list[Generation]:
        """One whole batch: vLLM schedules it (``batch_size`` is for the HF backend)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not prompts:
            return []
        with self._lock:
            process = self._start()
            requests, responses = self._work / "requests.parquet", self._work / "responses.parquet"
            pq.write_table(pa.table({"prompt": list(prompts)}), requests)
            job = {
                "requests": str(requests),
                "responses": str(responses),
                "max_new_tokens": max_new_tokens,
            }
            assert process.stdin is not None
            process.stdin.write(json.dumps(job) + "\n")
            process.stdin.flush()
            self._read_reply(process, self.settings.startup_timeout_s)
            table = pq.read_table(responses).to_pylist()
        return [
            Generation(r["response_text"], tuple(r["response_token_ids"]), r["finish_reason"])
            for r in table
        ]

    # -- scoring (transformers, same weights) -----------------------------------------
    def scorer(self) -> Any:
        if self._scorer is None:
            from sago_core.backends.hf import HFBackend

            self._scorer = HFBackend(self.source)
        return self._scorer

    def score(
        self,
        requests: Sequence[ScoringRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[TeacherForced]:
        return list(self.scorer().score(requests, batch_size, max_batch_tokens))

    def encode_response(self, text: str) -> tuple[int, ...] | None:
        return self.scorer().encode_response(text)

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int] | None:
        return self.scorer().prompt_lengths(prompts)

    def context_window(self) -> int | None:
        window = self.scorer().context_window()
        limit = self.settings.max_model_len
        return min(w for w in (window, limit) if w) if (window or limit) else None

    def describe(self) -> dict[str, str]:
        self._start()
        scoring = {f"scoring_{k}": v for k, v in self.scorer().describe().items()}
        return {
            "backend": self.name,
            "vllm": str(self.engine.get("vllm")),
            "device": str(self.engine.get("device")),
            "determinism": str(self.engine.get("determinism")),
            "dtype": self.settings.dtype,
            "weights": str(self.folder),
            **scoring,
        }
