"""vLLM generation with the transformers pass for scoring.

Generation runs in a worker process of the vLLM environment (``vllm_worker.py``): one engine
per backend, built once and reused for every batch; requests and responses travel as Parquet
files. The worker inherits ``CUDA_VISIBLE_DEVICES``, so a process pinned to a device (or a
group of devices: ``devices`` > 1 is vLLM's tensor-parallel size) keeps its engine there.
Act, Prob and Ent come from the transformers backend on the same weights, teacher-forcing
vLLM's own response token ids (never re-tokenised text).

Both backends see the same tokens: the transformers side renders every prompt (chat
template with ``chat_template_kwargs``, or plain text for a model without a template) and
vLLM generates from those token ids, stopping at exactly the transformers side's stop ids.
T = 0 means argmax on both (the checkpoint's ``generation_config`` ignored) unless
``use_model_defaults``. At T > 0 every prompt is a request with its own ``SamplingParams``
and seed. A GGUF model is first materialised to a safetensors folder (keyed
by its sha256).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sago_core.backends.allocator import worker_env
from sago_core.backends.materialise import materialised_folder
from sago_core.backends.model_source import LocalModel
from sago_core.backends.protocol import Generation, Sampling, ScoringRequest, TeacherForced
from sago_core.config import TemplateKwargs, VllmSettings
from sago_core.errors import ConfigError, SagoError
from sago_core.progress import counted

if TYPE_CHECKING:
    from sago_core.backends.factory import BackendPlaces
    from sago_core.backends.target import ModelTarget

WORKER = Path(__file__).with_name("vllm_worker.py")
# How this backend samples, recorded with every sampled answer.
VLLM_SAMPLER = "vLLM SamplingParams per request (its own seeded generator)"
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


class VllmUnsupportedModelError(VllmWorkerError):
    """This vLLM build cannot serve the model's architecture (use ``hf:`` for it)."""


# The last "SomeError: message" logged (a failed architecture inspection logs its cause).
ERROR_LINE = re.compile(r"\b[A-Z]\w*(Error|Exception): .*$")
UNSUPPORTED_MARKERS = ("are not supported", "failed to be inspected", "No model architectures")


def tensor_parallel_size(settings: VllmSettings, devices: int) -> int:
    """``devices`` (the worker's device group) is the tensor-parallel size, unless the user
    set ``vllm.tensor_parallel_size``; two different sizes above one are a conflict."""
    chosen = settings.tensor_parallel_size
    if devices > 1 and chosen > 1 and chosen != devices:
        raise ConfigError(
            f"vllm.tensor_parallel_size ({chosen}) conflicts with the worker's {devices} "
            "devices (orchestration.devices_per_worker); set one of them, or both equal"
        )
    return max(chosen, devices)


ENGINE_ENV = ("CUDA_", "VLLM_", "OMP_", "MKL_", "HF_", "TRANSFORMERS_", "TORCH", "LD_")
Parked = tuple[subprocess.Popen[str], threading.Thread, deque[str]]


class SparePool:
    """Workers without an engine, kept for the next ``reuse_worker`` backend (by interpreter
    and environment); ended when this process exits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spare: dict[str, list[Parked]] = {}
        atexit.register(self.close)

    def park(self, key: str, worker: Parked) -> None:
        with self._lock:
            self._spare.setdefault(key, []).append(worker)

    def take(self, key: str) -> Parked | None:
        with self._lock:
            workers = self._spare.get(key, [])
            while workers:
                worker = workers.pop()
                if worker[0].poll() is None:
                    return worker
        return None

    def close(self) -> None:
        with self._lock:
            parked = [w for workers in self._spare.values() for w in workers]
            self._spare.clear()
        for process, _, _ in parked:
            if process.stdin:
                process.stdin.close()
        for process, _, _ in parked:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


SPARE_WORKERS = SparePool()


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


MAX_MODEL_LEN = "vllm.max_model_len"


def context_limit(own: int | None, max_model_len: int | None) -> tuple[int | None, str | None]:
    """The window a prompt and its answer must fit (the smaller of the model's own context
    and ``max_model_len``; None: neither known) and the setting to raise for a longer one:
    ``vllm.max_model_len`` when it is the limit and the model's own context is longer or
    unknown, else None (raising it would not help)."""
    if not max_model_len:
        return own, None
    if own is not None and own <= max_model_len:
        return own, None
    return max_model_len, MAX_MODEL_LEN


class VllmBackend:
    name = "vllm"

    def __init__(
        self,
        source: LocalModel,
        settings: VllmSettings,
        cache_root: Path,
        trust_remote_code: bool = False,
        chat_template_kwargs: TemplateKwargs | None = None,
        use_model_defaults: bool = False,
        devices: int = 1,
        reuse_worker: bool = False,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        """``chat_template_kwargs`` and ``use_model_defaults`` as in ``GenerationSettings``
        (both go to the transformers scorer, which renders the prompts); ``devices``: how many
        devices this worker owns (vLLM's tensor-parallel size, the scorer's device map).
        ``reuse_worker``: ``close()`` parks the worker without its engine and the next such
        backend of this process loads its model there, skipping vLLM's imports (10-20 s
        here): many models in turn on a CPU (the conformance tests). On a GPU, vLLM may not
        free all memory of a dropped engine, so the default is a process per engine.
        ``engine_options``: worker engine options over those ``settings`` give (the bench's
        ``{"enable_prefix_caching": False}``, vllm_worker.py)."""
        self.source = source
        self.settings = settings
        self.trust_remote_code = trust_remote_code
        self.chat_template_kwargs = chat_template_kwargs
        self.use_model_defaults = use_model_defaults
        self.devices = max(int(devices), 1)
        self.reuse_worker = reuse_worker
        self.engine_options = dict(engine_options or {})
        self._pool_key = ""
        self.tensor_parallel_size = tensor_parallel_size(settings, self.devices)
        self.folder = materialised_folder(source, cache_root)
        self._scorer: Any = None
        self._lock = threading.Lock()
        self._work = Path(tempfile.mkdtemp(prefix="sago-vllm-"))
        self._process: subprocess.Popen[str] | None = None
        self._forwarder: threading.Thread | None = None
        self.engine: dict[str, Any] = {}
        self.decoding: dict[str, Any] = {}  # the last job's effective sampling parameters
        # the last job's prompt tokens and how many of them vLLM's prefix cache served
        self.prefill: dict[str, int | None] = {}
        self.log_tail: deque[str] = deque(maxlen=50)

    def _start(self) -> subprocess.Popen[str]:
        """The worker, started on the first generation or what precedes one (the prompts'
        fit, ``describe``), always before the scorer's weights load; a scoring-only use
        never pays the engine start."""
        if self._process is not None and self._process.poll() is None:
            return self._process
        settings = self.settings
        options: dict[str, Any] = {
            "model": str(self.folder),
            "dtype": settings.dtype,
            "max_model_len": settings.max_model_len,
            "tensor_parallel_size": self.tensor_parallel_size,
            "enforce_eager": settings.enforce_eager,
            "cpu_kv_cache_gib": settings.cpu_kv_cache_gib,
            "trust_remote_code": self.trust_remote_code,
            "use_model_defaults": self.use_model_defaults,
            **self.engine_options,
        }
        if os.environ.get("CUDA_VISIBLE_DEVICES", "") not in ("", "-1"):
            options["gpu_memory_utilization"] = settings.gpu_memory_utilization
        env = worker_env(os.environ)  # glibc's mmap threshold fixed (allocator.py)
        # vLLM's CPU build serves on one thread unless told otherwise: 212 vs 147 tok/s here.
        env.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
        python = vllm_python(settings)
        # A parked worker fits when it runs the same interpreter with the same settings
        # that shape an engine (devices, threads, vLLM's and the hub's variables).
        shaping = {k: v for k, v in env.items() if k.startswith(ENGINE_ENV)}
        self._pool_key = json.dumps([python, sorted(shaping.items())])
        spare = SPARE_WORKERS.take(self._pool_key) if self.reuse_worker else None
        if spare is not None:  # a parked worker: imports paid, no engine held
            self._process, self._forwarder, self.log_tail = spare
            assert self._process.stdin is not None
            self._process.stdin.write(json.dumps({"engine": options}) + "\n")
            self._process.stdin.flush()
        else:
            self._process = subprocess.Popen(
                [python, str(WORKER), json.dumps(options)],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,  # forwarded to the sago.vllm logger
                text=True,
                start_new_session=True,  # a terminal's Ctrl-C is the run's to handle
            )
            self.log_tail = deque(maxlen=50)
            self._forwarder = threading.Thread(
                target=forward_logs, args=(self._process.stderr, self.log_tail), daemon=True
            )
            self._forwarder.start()
        atexit.register(self.close)
        try:
            self.engine = self._read_reply(self._process, settings.startup_timeout_s)
        except VllmWorkerError as exc:
            self._process = None
            if any(marker in str(exc) for marker in UNSUPPORTED_MARKERS):
                raise VllmUnsupportedModelError(
                    f"vllm: {self.folder} cannot be served by this vLLM build ({exc}); "
                    "use hf: for this model"
                ) from exc
            raise
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
            if result.get("kind") == "engine":  # the engine's message, and the root cause
                try:  # the worker exits: let its last log lines arrive
                    if process.stdin:
                        process.stdin.close()
                    process.wait(timeout=15)
                    if self._forwarder is not None:
                        self._forwarder.join(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                causes = [line for line in self.log_tail if ERROR_LINE.search(line)]
                cause = ERROR_LINE.search(causes[-1]) if causes else None
                because = f" (logged before it: {cause.group(0)[:300]})" if cause else ""
                raise VllmWorkerError(f"vLLM engine did not start: {result['error']}{because}")
            last = " | ".join(list(self.log_tail)[-3:])
            raise VllmWorkerError(f"vLLM worker: {result['error']} (last log lines: {last})")
        return result

    def close(self) -> None:
        """End the worker, or, with ``reuse_worker``, drop its engine and park it for the
        next backend of this process (same interpreter and environment)."""
        process = getattr(self, "_process", None)
        self._process = None
        if process is not None and process.poll() is None:
            if self.reuse_worker and self._park(process):
                process = None
            elif process.stdin:
                process.stdin.close()
        if process is not None and process.poll() is None:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(self._work, ignore_errors=True)  # the request/response exchange files

    def _park(self, process: subprocess.Popen[str]) -> bool:
        try:
            assert process.stdin is not None and self._forwarder is not None
            process.stdin.write(json.dumps({"release": True}) + "\n")
            process.stdin.flush()
            released = self._read_reply(process, 120).get("released")
        except (OSError, VllmWorkerError):
            return False
        if released:
            SPARE_WORKERS.park(self._pool_key, (process, self._forwarder, self.log_tail))
        return bool(released)

    # -- generation (vLLM) ------------------------------------------------------------
    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        batch_size: int,
        sampling: Sampling | None = None,
    ) -> list[Generation]:
        """One whole batch: vLLM schedules it (``batch_size`` is for the HF backend)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not prompts:
            return []
        with self._lock:
            process = self._start()  # before the scorer loads: vLLM sizes its GPU memory first
            scorer = self.scorer()
            rendered = [render_prompt_ids(scorer, p) for p in prompts]
            requests, responses = self._work / "requests.parquet", self._work / "responses.parquet"
            columns: dict[str, Any] = {
                "prompt": list(prompts),
                "prompt_token_ids": pa.array(rendered, type=pa.list_(pa.int64())),
            }
            job: dict[str, Any] = {
                "requests": str(requests),
                "responses": str(responses),
                "max_new_tokens": max_new_tokens,
                "stop_token_ids": stop_token_ids(scorer),
            }
            if sampling is not None:
                columns["seed"] = pa.array(sampling.seeds, type=pa.int64())
                job["sampling"] = {
                    "temperature": sampling.temperature,
                    "top_p": sampling.top_p,
                    "top_k": sampling.top_k,
                }
            pq.write_table(pa.table(columns), requests)
            assert process.stdin is not None
            reply: dict[str, Any] = {}
            for _ in counted([prompts], len(prompts)):  # one batch, scheduled by vLLM
                process.stdin.write(json.dumps(job) + "\n")
                process.stdin.flush()
                reply = self._read_reply(process, self.settings.startup_timeout_s)
            self.decoding = dict(reply.get("decoding") or {})
            self.prefill = {k: reply.get(k) for k in ("prompt_tokens", "cached_prompt_tokens")}
            table = pq.read_table(responses).to_pylist()
        # The text is the transformers tokenizer's decoding of vLLM's ids, exactly as the
        # transformers backend decodes its own: same ids, same text.
        return [
            Generation(
                decode_response(scorer, r["response_token_ids"]),
                tuple(r["response_token_ids"]),
                r["finish_reason"],
                sampling=None
                if sampling is None
                else sampling.record(i, sampler=VLLM_SAMPLER, reproducible=True),
            )
            for i, r in enumerate(table)
        ]

    # -- scoring (transformers, same weights) -----------------------------------------
    def scorer(self) -> Any:
        if self._scorer is None:
            from sago_core.backends.hf import HFBackend

            self._scorer = HFBackend(
                self.source,
                trust_remote_code=self.trust_remote_code,
                chat_template_kwargs=self.chat_template_kwargs,
                use_model_defaults=self.use_model_defaults,
                devices=self.devices,
            )
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
        """Asked before a generation (``check_fit``): the engine starts first, so that it
        sizes its GPU memory (``gpu_memory_utilization``) before the scorer's weights load."""
        return context_limit(self._generation_scorer().context_window(), self._max_model_len())[0]

    def context_setting(self) -> str | None:
        """The setting that sets ``context_window`` when raising it would let longer prompts
        in (``vllm.max_model_len`` below the model's own context); None when the model's own
        context is the limit."""
        return context_limit(self._generation_scorer().context_window(), self._max_model_len())[1]

    def _max_model_len(self) -> int | None:
        """The engine's ``max_model_len``: the engine options' own when they set one."""
        chosen = self.engine_options.get("max_model_len", self.settings.max_model_len)
        return int(chosen) if chosen else None

    def _generation_scorer(self) -> Any:
        """The scorer for work that precedes a generation, loaded after the engine started
        (a scoring-only use, ``score``, never starts the engine)."""
        with self._lock:
            self._start()
        return self.scorer()

    def describe(self) -> dict[str, str]:
        scorer = self._generation_scorer()
        scored = scorer.describe()
        scoring = {f"scoring_{k}": v for k, v in scored.items()}
        decoding = self.decoding or dict(self.engine.get("decoding") or {})
        if not self.decoding:  # no job yet: the stops every job gets
            decoding["stop_token_ids"] = sorted(stop_token_ids(scorer))
            decoding["ignore_eos"] = bool(decoding["stop_token_ids"])
        templated = bool(getattr(getattr(scorer, "tokenizer", None), "chat_template", None))
        kwargs = scored.get("chat_template_kwargs")
        if kwargs is None:
            pairs = self.chat_template_kwargs
            kwargs = json.dumps(None if pairs is None else dict(pairs), sort_keys=True)
        return {
            "backend": self.name,
            "vllm": str(self.engine.get("vllm")),
            "device": str(self.engine.get("device")),
            "determinism": str(self.engine.get("determinism")),
            "dtype": self.settings.dtype,
            "weights": str(self.folder),
            "tensor_parallel_size": str(self.tensor_parallel_size),
            "decoding": json.dumps(decoding, sort_keys=True),
            "chat_template_kwargs": str(kwargs),
            # vLLM generates from the transformers side's token ids, never its own template.
            "prompts": (
                "token ids rendered by transformers (chat template)"
                if templated
                else "token ids rendered by transformers (plain text, no chat template)"
            ),
            "stops": "transformers stop ids only (vLLM's own EOS ignored)",
            **scoring,
        }


def render_prompt_ids(scorer: Any, prompt: str) -> list[int]:
    """The prompt's token ids exactly as the transformers side feeds them to its model."""
    return [int(i) for i in scorer.render_prompt_ids(prompt)]


def stop_token_ids(scorer: Any) -> list[int]:
    """The ids that end a transformers generation (its end-of-sequence set)."""
    return sorted({int(i) for i in scorer.stop_token_ids() if i is not None})


def decode_response(scorer: Any, token_ids: Sequence[int]) -> str:
    """vLLM's ids decoded by the transformers tokenizer: same ids, same text."""
    return str(scorer.tokenizer.decode(list(token_ids), skip_special_tokens=True).strip())


def open_target(
    target: ModelTarget, places: BackendPlaces, api_key: str | None, device: str
) -> VllmBackend:
    """The ``vllm`` backend's builder (registry/backends.py): an engine in a worker process."""
    if target.source is None:
        raise ConfigError(f"model {target.spec!r} has no resolved weights")
    if places.cache is None:
        raise ConfigError(f"model {target.spec!r} needs the cache for materialised weights")
    return VllmBackend(
        target.source,
        target.vllm or VllmSettings(),
        places.cache.materialised,
        trust_remote_code=target.trust_remote_code,
        chat_template_kwargs=target.chat_template_kwargs,
        use_model_defaults=target.use_model_defaults,
        devices=target.devices,
    )
