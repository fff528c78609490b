"""What a tracker step may never do to a finished run, without a tracker's server: hang on
W&B's login prompt, fail the run when its card or record cannot be built, copy a
credential or this machine's paths into a parameter or a warning line; and what MLflow's
client needs to keep working: a changed parameter gets a new MLflow run (MLflow refuses to
change a logged one), and a server behind a login (401 on ``/health``) is up, not down."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sago_core.artifacts.schemas import SUMMARY
from sago_core.artifacts.store import write_parquet
from sago_core.config.tracking import TrackingSettings
from sago_core.tracking import track_run
from sago_core.tracking.record import read_run
from tests.prefect_server import free_port

SECRET = "SECRET"
BASE_URL = f"https://u:{SECRET}@h/v1?key={SECRET}"


def _run(root: Path, config: dict[str, Any], version: str = "0.1.0") -> Path:
    folder = root / "runs" / "demo-abc"
    row: dict[str, Any] = {c: None for c in SUMMARY}
    row.update(model="mock:m", dataset="__pooled__", axis="bleu", sgs=0.5, n=3)
    write_parquet(pl.DataFrame([row], schema=SUMMARY), folder / "summary.parquet", SUMMARY)
    manifest = {
        "config": config,
        "config_hash": "abc",
        "packages": {"sago": version},
        "models": {"mock:m": {"identity": "sha256:feed"}},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def _settings(section: dict[str, Any]) -> TrackingSettings:
    return TrackingSettings.model_validate(section)


def test_wandb_online_without_a_login_is_one_warning_not_a_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    run_dir = _run(tmp_path, {"seed": 0})
    settings = _settings({"wandb": {"mode": "online", "dir": str(tmp_path / "wandb")}})
    with caplog.at_level(logging.WARNING, logger="sago.tracking"):
        (outcome,) = track_run(run_dir, settings)
    assert outcome.tracker == "wandb" and outcome.logged == ()
    assert outcome.warning is not None and "no W&B login" in outcome.warning
    assert not (tmp_path / "wandb").exists()  # W&B was never started


def test_a_run_whose_card_or_record_cannot_be_built_is_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A summary without the card's columns: the card fails with a plain polars error (no
    SagoError); a manifest that is no JSON: the record fails. Neither raises."""
    run_dir = _run(tmp_path, {"seed": 0})
    pl.DataFrame({"model": ["mock:m"]}).write_parquet(run_dir / "summary.parquet")
    down = {"mlflow": {"tracking_uri": f"http://127.0.0.1:{free_port()}", "timeout_s": 2}}
    with caplog.at_level(logging.WARNING, logger="sago.tracking"):
        (outcome,) = track_run(run_dir, _settings(down))
    assert outcome.tracker == "mlflow" and "did not answer" in str(outcome.warning)
    assert any("no stability card" in r.getMessage() for r in caplog.records)
    (run_dir / "manifest.json").write_text("{not json", encoding="utf-8")
    (outcome,) = track_run(run_dir, _settings(down))
    assert outcome.tracker == "tracking" and outcome.logged == ()
    assert "demo-abc not logged to any tracker" in str(outcome.warning)


def test_no_credential_or_path_reaches_a_parameter_or_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = {
        "seed": 0,
        "api": {"base_url": BASE_URL},
        "models": [f"hf:{tmp_path / 'models' / 'm1'}"],
        "datasets": [f"{tmp_path / 'private' / 'q.csv'}#answer=gold"],
        "data_dir": str(tmp_path / "data"),
        "bertscore": {"model": str(tmp_path / "encoders" / "minilm")},
        "runs_dir": str(tmp_path / "runs"),
    }
    run_dir = _run(tmp_path, config)
    (record,) = read_run(run_dir).models
    shown = json.dumps([record.params, record.tags])
    assert SECRET not in shown and str(tmp_path) not in shown
    assert record.params["config.api.base_url"] == "https://h/v1"
    assert json.loads(record.params["config.models"]) == ["hf:m1"]
    assert record.params["model_identity"] == "sha256:feed"
    uri = f"http://u:{SECRET}@127.0.0.1:{free_port()}/?token={SECRET}"
    with caplog.at_level(logging.WARNING, logger="sago.tracking"):
        (outcome,) = track_run(run_dir, _settings({"mlflow": {"tracking_uri": uri}}))
    assert outcome.warning is not None and "did not answer" in outcome.warning
    assert all(SECRET not in r.getMessage() for r in caplog.records)


class _Login(BaseHTTPRequestHandler):
    """A server behind a login: every request answered 401."""

    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def login_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Login)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_server_behind_a_login_is_up_and_the_clients_limits_are_put_back(
    tmp_path: Path, login_server: str
) -> None:
    pytest.importorskip("mlflow")
    before = os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT")
    run_dir = _run(tmp_path, {"seed": 0})
    settings = _settings({"mlflow": {"tracking_uri": login_server, "timeout_s": 3}})
    (outcome,) = track_run(run_dir, settings)
    # reachable: the client itself was refused, not the health check
    assert outcome.warning is not None and "answered 401" not in outcome.warning
    assert "did not answer" not in outcome.warning and "401" in outcome.warning
    assert os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT") == before


def test_a_changed_parameter_gets_a_new_mlflow_run_with_the_same_tags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    settings = _settings({"mlflow": {"tracking_uri": uri, "experiment": "sago/test"}})
    run_dir = _run(tmp_path, {"seed": 0})
    (first,) = track_run(run_dir, settings)
    (again,) = track_run(run_dir, settings)  # nothing changed: the same MLflow run
    assert first.warning is None and again.logged == first.logged
    _run(tmp_path / "later", {"seed": 0}, version="0.2.0")  # a new sago version's record
    (run_dir / "manifest.json").write_bytes(
        (tmp_path / "later" / "runs" / "demo-abc" / "manifest.json").read_bytes()
    )
    (changed,) = track_run(run_dir, settings)
    assert changed.warning is None and changed.logged != first.logged
    client = mlflow.MlflowClient(tracking_uri=uri)
    versions = {
        client.get_run(i).data.params["sago_version"]: client.get_run(i).data.tags["sago.run_id"]
        for i in (*first.logged, *changed.logged)
    }
    assert versions == {"0.1.0": "demo-abc", "0.2.0": "demo-abc"}


def test_the_track_command_logs_a_finished_run_later(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sago track RUN --track URI``: one line per tracker; exit 1 when one did not log."""
    from sago_cli.main import main

    run_dir = _run(tmp_path, {"seed": 0})
    down = f"http://127.0.0.1:{free_port()}"
    assert main(["track", str(run_dir), "--track", down]) == 1
    assert "run demo-abc not logged to mlflow" in capsys.readouterr().out
    assert main(["track", str(run_dir), "--track", "tensorboard"]) == 2
    assert "--track 'tensorboard'" in capsys.readouterr().err
