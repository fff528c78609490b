"""Shared fixtures. Prefect settings are set here, before anything imports prefect."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

_PREFECT_HOME = tempfile.mkdtemp(prefix="sago-test-prefect-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "180"
os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs two workers on two cores: one math thread each, here and in every
    # process a test starts (torch's default of one per core would oversubscribe the cores).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from sago_core.storage.location import CACHE_ENV  # noqa: E402
from tests.prefect_server import prefect_server  # noqa: E402
from tests.schedule import FileSeconds, order_heaviest_first  # noqa: E402

# What sago keeps in a user's cache folder (the module facts behind stage code versions):
# one folder for this checkout's tests, shared by the workers, the processes they start and
# later sessions, never the user's own.
_CHECKOUT = hashlib.sha256(str(Path(__file__).resolve().parents[1]).encode()).hexdigest()[:12]
os.environ[CACHE_ENV] = str(Path(tempfile.gettempdir()) / f"sago-test-cache-{_CHECKOUT}")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Heaviest files first (tests/schedule.py)."""
    order_heaviest_first(items)


def pytest_configure(config: pytest.Config) -> None:
    """The slowest test files at the end of the run (tests/schedule.py)."""
    config.pluginmanager.register(FileSeconds(), "sago-file-seconds")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"the shared dataset samples are missing at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight 3-layer Llama with the embedded model's tokenizer and chat template."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from sago_core.backends.model_source import EMBEDDED_ALIASES, packaged_file

    gguf = packaged_file(*EMBEDDED_ALIASES["smollm2-135m"])
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    folder = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def harness() -> Iterator[None]:
    """One temporary Prefect API for the flows a test process runs in-process (each xdist
    worker has its own): a server start costs about 20 CPU seconds, once instead of once per
    module. Tests read back only what carries their own run's id."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture(scope="session")
def server_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One real Prefect server per test process: every ``sago`` subprocess a test starts talks
    to it, so no run pays for starting an ephemeral server of its own. The environment a
    client process needs (its ``PREFECT_HOME`` is the server's unless a test sets its own)."""
    with prefect_server(tmp_path_factory.mktemp("prefect-server")) as env:
        yield {**env, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
