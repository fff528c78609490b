"""A hub model id is checked before any work: the local cache first, then (hub on) one
metadata request; every refusal names the id and the nearest cached ids."""

from __future__ import annotations

import hashlib
import os
import resource
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from sago_core.backends.hub_check import (
    require_bertscore_encoder,
    require_hub_model,
    require_models,
    uncached_warning,
)
from sago_core.errors import ModelNotFoundError

CACHED = "HuggingFaceTB/SmolLM2-135M-Instruct"
TYPO = "HuggingFaceTB/SmolLM2-135M-Instuct"


def cache_model(cache: Path, repo_id: str) -> None:
    """One model in the hub cache's own layout: blob, snapshot link, ref."""
    folder = cache / f"models--{repo_id.replace('/', '--')}"
    content = b'{"model_type": "llama"}'
    blob = hashlib.sha256(content).hexdigest()
    commit = "0" * 40
    (folder / "blobs").mkdir(parents=True)
    (folder / "blobs" / blob).write_bytes(content)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(Path("../../blobs") / blob)


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import huggingface_hub.constants as constants

    cache = tmp_path / "hub"
    cache_model(cache, CACHED)
    cache_model(cache, "Qwen/Qwen3-0.6B")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


@pytest.fixture
def hub_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


class MissingRepo(BaseHTTPRequestHandler):
    """Answers every request as the hub answers for a repository that does not exist."""

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error": "Repository not found"}')

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, hub_on: None) -> Iterator[str]:
    import huggingface_hub.constants as constants

    server = HTTPServer(("127.0.0.1", 0), MissingRepo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    yield endpoint
    server.shutdown()


def test_a_cached_id_passes_with_the_hub_off(hub_cache: Path) -> None:
    require_hub_model(CACHED)
    assert uncached_warning(CACHED) is None


def test_a_typo_with_the_hub_off_is_refused_naming_the_nearest_cached_id(
    hub_cache: Path,
) -> None:
    with pytest.raises(ModelNotFoundError) as refused:
        require_hub_model(TYPO)
    message = str(refused.value)
    assert TYPO in message and "HF_HUB_OFFLINE" in message
    assert f"nearest cached: {CACHED}" in message
    assert "Qwen" not in message  # only ids that look alike


def test_the_plan_warns_without_any_network(hub_cache: Path) -> None:
    warning = uncached_warning(TYPO)
    assert warning is not None and TYPO in warning and CACHED in warning
    assert "no similar id is cached" in (uncached_warning("meta-llama/Llama-3.1-8B") or "")


def test_an_id_the_hub_does_not_know_is_refused(hub_cache: Path, fake_hub: str) -> None:
    with pytest.raises(ModelNotFoundError, match="does not exist on the hub") as refused:
        require_hub_model(TYPO)
    assert f"nearest cached: {CACHED}" in str(refused.value)


def test_an_unreachable_hub_is_named_as_such(
    hub_cache: Path, hub_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants as constants

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(ModelNotFoundError, match="the hub cannot be reached"):
        require_hub_model("someone/some-model")


def test_the_run_preflight_refuses_a_typo_before_any_work(hub_cache: Path, tmp_path: Path) -> None:
    from sago_cli.common import preflight
    from sago_core.config import build_config

    config = build_config("demo", {"models": [f"hf:{TYPO}"], "runs_dir": str(tmp_path / "runs")})
    with pytest.raises(ModelNotFoundError, match=CACHED):
        preflight(config)
    assert not (tmp_path / "runs").exists()


GENERATIONS = Path(__file__).parents[1] / "fixtures" / "external" / "generations.csv"


@pytest.mark.parametrize("command", ["score", "run"])
def test_the_paper_preset_offline_refuses_its_encoder_in_one_line_before_any_work(
    tmp_path: Path, command: str
) -> None:
    """Offline, with an empty hub cache, the paper preset's roberta-large
    is refused at once (exit 2, one line naming the encoder and how to point at a local
    copy), not a minute later inside score-pairs with a transformers traceback. The time
    is the child's CPU seconds (the wall clock of a shared CI machine says little): the
    late failure spent about 30 of them loading Prefect and the flow."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    args = [sys.executable, "-m", "sago_cli", command, "--preset", "paper"]
    args += ["--runs-dir", str(tmp_path / "runs")]
    if command == "score":
        args.append(str(GENERATIONS))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1, done.stderr[-2000:]
    line = lines[0]
    assert line.startswith("sago: error: BERTScore encoder (bertscore.model)")
    assert "'roberta-large'" in line and "HF_HUB_OFFLINE" in line
    assert "point bertscore.model at a local copy" in line and "minilm-l6" in line
    assert cpu_s < 12, f"{cpu_s:.1f} CPU s before the refusal"
    assert not (tmp_path / "runs").exists()


def test_an_encoder_folder_that_does_not_exist_is_named_as_a_folder(tmp_path: Path) -> None:
    missing = str(tmp_path / "encoders" / "roberta-large")
    with pytest.raises(ModelNotFoundError) as refused:
        require_bertscore_encoder(missing)
    assert f"folder {missing!r} does not exist" in str(refused.value)
    assert "point bertscore.model at a local copy" in str(refused.value)


def test_the_embedded_encoder_and_a_local_folder_pass_with_the_hub_off(
    hub_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    require_bertscore_encoder("minilm-l6")
    require_bertscore_encoder(str(tmp_path))
    require_models("minilm-l6", [f"hf:{CACHED}", "hf:smollm2-135m", None])
    with pytest.raises(ModelNotFoundError, match=f"nearest cached: {CACHED}"):
        require_models("minilm-l6", [f"hf:{TYPO}"])
