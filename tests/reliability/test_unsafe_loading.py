"""Unsafe loading: results are JSON (a planted pickle is never run), remote code runs only
for models the user names, untrusted GGUF files are read in a capped child process, and a
corrupt model folder is a typed error that keeps the work already done."""

from __future__ import annotations

import base64
import json
import os
import pickle
import struct
from pathlib import Path

import pytest

from sago_core.artifacts.layout import RunLayout
from sago_core.config import build_config
from sago_core.errors import ConfigError, ModelLoadError

MARKER_ENV = "SAGO_PICKLE_MARKER"


class Payload:
    """Unpickling this writes a marker file: proof that a pickle was executed."""

    def __reduce__(self) -> tuple:
        return (Path.write_text, (Path(os.environ[MARKER_ENV]), "pickle executed"))


def planted_record(storage_key: str) -> bytes:
    """A Prefect result record that names the pickle serializer and carries a payload."""
    blob = base64.encodebytes(pickle.dumps(Payload())).decode()
    return json.dumps(
        {
            "metadata": {
                "storage_key": storage_key,
                "expiration": None,
                "serializer": {"type": "pickle", "picklelib": "pickle"},
                "prefect_version": "3.9.1",
                "storage_block_id": None,
            },
            "result": blob,
        }
    ).encode()


def test_every_stage_task_stores_json_results() -> None:
    import sago.tasks.metrics
    import sago.tasks.mirroring
    import sago.tasks.models
    import sago.tasks.prepare
    import sago.tasks.report
    import sago.tasks.study

    stages = [
        getattr(module, name)
        for module in (
            sago.tasks.study,
            sago.tasks.metrics,
            sago.tasks.mirroring,
            sago.tasks.models,
            sago.tasks.prepare,
            sago.tasks.report,
        )
        for name in dir(module)
        if name.endswith("_task") and hasattr(getattr(module, name), "result_serializer")
    ]
    assert len(stages) >= 12
    assert {s.result_serializer for s in stages} == {"json"}, [s.name for s in stages]


def _stage_once(run_dir: Path, out: Path) -> tuple[str, bool]:
    from sago.flows.runtime.stage_runner import StageRunner
    from sago.tasks.prepare import load_prompts_task

    config = build_config("demo", {"n": 1, "variants": {"structural": None}})
    stage = StageRunner(RunLayout(run_dir), storage_name=f"sago-results-{run_dir.name}")
    path = stage(load_prompts_task, config=config, prompt_source_digest="x", out_dir=str(out))
    return path, stage.last_cached


def test_a_planted_pickle_in_result_storage_is_never_executed(
    harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "marker"
    monkeypatch.setenv(MARKER_ENV, str(marker))
    run_dir = tmp_path / "run"
    path, cached = _stage_once(run_dir, run_dir)
    assert not cached
    (record,) = [p for p in (run_dir / ".prefect-results").iterdir() if p.is_file()]
    assert json.loads(record.read_bytes())["metadata"]["serializer"]["type"] == "json"

    record.write_bytes(planted_record(record.name))  # someone swaps the cached result
    again, cached = _stage_once(run_dir, run_dir)
    assert not marker.exists()  # the payload never ran
    assert not cached and again == path  # the planted record read as absent: recomputed
    assert json.loads(record.read_bytes())["metadata"]["serializer"]["type"] == "json"


def test_prefect_itself_would_run_the_planted_pickle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: with Prefect's plain local storage, merely checking whether a cached
    result exists unpickles it. This is the hole JsonResultStorage closes."""
    from prefect.filesystems import LocalFileSystem
    from prefect.results import ResultStore

    from sago.flows.runtime.result_storage import JsonResultStorage, UnsafeResultRecord

    marker = tmp_path / "marker"
    monkeypatch.setenv(MARKER_ENV, str(marker))
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "key-1").write_bytes(planted_record("key-1"))

    guarded = ResultStore(result_storage=JsonResultStorage(basepath=str(folder)))
    assert guarded.exists("key-1") is False and not marker.exists()
    with pytest.raises(UnsafeResultRecord, match="pickle"):
        JsonResultStorage(basepath=str(folder)).read_path("key-1", _sync=True)  # type: ignore[call-arg]

    plain = ResultStore(result_storage=LocalFileSystem(basepath=str(folder)))
    plain.exists("key-1")
    assert marker.read_text() == "pickle executed"


def test_remote_code_runs_only_for_models_the_user_names(tmp_path: Path) -> None:
    from sago_core.backends.model_source import LocalModel
    from sago_core.backends.target import model_target

    config = build_config(
        "demo",
        {"models": ["hf:org/a", "hf:org/b"], "trust_remote_code": ["hf:org/b"]},
    )
    hub = LocalModel("hub", "org/x", None, "hub:org/x@unresolved")
    assert model_target(config, "hf:org/a", hub).trust_remote_code is False
    assert model_target(config, "hf:org/b", hub).trust_remote_code is True
    assert build_config("demo", {}).trust_remote_code == ()
    with pytest.raises(ConfigError, match="not in models"):
        build_config("demo", {"trust_remote_code": ["hf:org/c"]})


def test_a_model_folder_that_asks_to_run_its_code_is_refused(tmp_path: Path) -> None:
    """A folder whose config maps the model class to its own Python file: transformers
    would import that file only with trust_remote_code; without it sago refuses."""
    from sago_core.backends.hf import HFBackend
    from sago_core.backends.model_source import resolve_local_model

    folder = tmp_path / "custom"
    folder.mkdir()
    marker = tmp_path / "imported"
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "evil",
                "architectures": ["EvilForCausalLM"],
                "auto_map": {
                    "AutoConfig": "modeling_evil.EvilConfig",
                    "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM",
                },
            }
        )
    )
    with pytest.raises(ModelLoadError, match="could not be loaded"):
        HFBackend(resolve_local_model(str(folder)))
    assert not marker.exists()


def test_a_folder_with_corrupt_weights_is_a_typed_error(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    import shutil

    from sago_core.backends.hf import HFBackend
    from sago_core.backends.model_source import resolve_local_model

    folder = tmp_path / "corrupt-weights"
    shutil.copytree(tiny_model_dir, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # a download cut short
    with pytest.raises(ModelLoadError, match="corrupt-weights"):
        HFBackend(resolve_local_model(str(folder)))


def _gguf_header(n_tensors: int, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(_gguf_header(2**62, 2**62), id="absurd counts"),
        pytest.param(_gguf_header(1, 1) + struct.pack("<Q", 2**40) + b"k", id="huge key"),
        pytest.param(b"GGUF" + os.urandom(4096), id="random body"),
        pytest.param(b"not a gguf at all", id="wrong magic"),
    ],
)
def test_crafted_gguf_files_are_refused_by_the_capped_probe(content: bytes, tmp_path: Path) -> None:
    from sago_core.backends.gguf_probe import probe_gguf

    path = tmp_path / "crafted.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelLoadError, match=r"crafted\.gguf"):
        probe_gguf(path, timeout_s=60)


def test_the_probe_stops_a_reader_that_never_returns(tmp_path: Path) -> None:
    """A FIFO named .gguf: opening it blocks forever, like a reader stuck on a crafted file."""
    from sago_core.backends.gguf_probe import probe_gguf

    path = tmp_path / "stuck.gguf"
    os.mkfifo(path)
    with pytest.raises(ModelLoadError, match="longer than 3 s"):
        probe_gguf(path, timeout_s=3)


def test_the_probe_enforces_its_memory_cap_and_reads_the_real_file() -> None:
    from sago_core.backends.gguf_probe import probe_gguf
    from sago_core.backends.model_source import EMBEDDED_ALIASES, packaged_file

    gguf = packaged_file(*EMBEDDED_ALIASES["smollm2-135m"])
    summary = probe_gguf(gguf)
    assert summary["architecture"] == "llama" and summary["tensors"] > 100
    with pytest.raises(ModelLoadError):
        probe_gguf(gguf, memory_mb=8)  # not even the interpreter fits: the cap is real


@pytest.mark.slow
def test_a_corrupt_model_folder_is_a_typed_error_that_keeps_finished_work(
    harness: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sago_cli.main import main

    folder = tmp_path / "corrupt"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(b"these are not weights")
    runs = tmp_path / "runs"
    config = tmp_path / "c.yaml"
    config.write_text(
        f"models: ['hf:{folder}']\nn: 1\nruns_dir: {runs}\nvariants: {{structural: null}}\n"
    )
    assert main(["run", "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert "could not be loaded" in error and str(folder) in error
    (run_dir,) = [p for p in runs.iterdir() if not p.name.startswith(".")]
    assert (run_dir / "prompts.parquet").is_file() and (run_dir / "variants.parquet").is_file()
