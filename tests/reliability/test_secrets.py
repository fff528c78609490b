"""Secrets: canary keys in the environment and in a Prefect Secret block, runs with debug
logging (Prefect and LiteLLM) and forced error paths (an upstream that echoes the key back
in a 401, server errors, malformed bodies, an exhausted budget), against the test process's
real Prefect server. Then every artifact, log, the client's Prefect home and result storage,
the server's home and database, the report and the temp folder are searched for the
canaries: raw, base64 (every alignment) and URL-encoded. Zero hits."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
import yaml

from tests.openai_server import Rule, ScriptedServer
from tests.prefect_server import run_sago
from tests.reliability.harness import QUESTIONS, ROOT

pytestmark = pytest.mark.slow
CANARY_ENV = "sk-canary+env/7f3a=9c2e5b1d8a"
CANARY_SECRET = "sk-canary+secret/4e8b=2a6c0d9f3"
SECRET_BLOCK = "sago-canary-key"


def encodings(canary: str) -> dict[str, bytes]:
    raw = canary.encode()
    found = {
        "raw": raw,
        "url": quote(canary, safe="").encode(),
        "url-plus": quote_plus(canary).encode(),
    }
    for shift in range(3):
        for name, encode in (("b64", base64.b64encode), ("b64url", base64.urlsafe_b64encode)):
            encoded = encode(b"\0" * shift + raw)
            found[f"{name}+{shift}"] = encoded[4 if shift else 0 : -4]  # canary-only groups
    return found


def hits(roots: list[Path], canaries: list[str]) -> list[str]:
    needles = {f"{c[:14]}..:{k}": v for c in canaries for k, v in encodings(c).items()}
    found = []
    for root in roots:
        for path in [root] if root.is_file() else root.rglob("*"):
            if path.is_file() and not path.is_fifo():
                data = path.read_bytes()
                found += [f"{path}: {label}" for label, n in needles.items() if n in data]
    return found


def _config(tmp: Path, base_url: str, key: dict[str, str], budget: dict[str, int]) -> Path:
    data = tmp / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    path = tmp / f"config-{len(list(tmp.glob('config-*')))}.yaml"
    values = {
        "models": ["litellm:openai/mock-1"],
        "datasets": [str(data)],
        "n": len(QUESTIONS),
        "runs_dir": str(tmp / "runs"),
        "generation": {"max_new_tokens": 12},
        "judge": {"model": "litellm:openai/judge-1"},
        "api": {"base_url": base_url, "max_retries": 1, "backoff_s": 0, **key, "budget": budget},
        "variants": {
            "register": {"strengths": [-2, 2], "positions": ["suffix"]},
            "noise": None,
            "structural": None,
        },
    }
    path.write_text(yaml.safe_dump(values))
    return path


def test_canary_keys_appear_nowhere(server_env: dict[str, str], tmp_path: Path) -> None:
    home, temp, logs = tmp_path / "prefect-home", tmp_path / "tmp", tmp_path / "logs"
    for folder in (home, temp, logs):
        folder.mkdir()
    env = {
        **server_env,
        "PREFECT_HOME": str(home),
        "TMPDIR": str(temp),
        "PREFECT_LOGGING_LEVEL": "DEBUG",
        "LITELLM_LOG": "DEBUG",
        "SAGO_CANARY_KEY": CANARY_ENV,
        "OPENAI_API_KEY": CANARY_ENV,
        "PYTHONPATH": str(ROOT),
    }

    def sago(*args: str, log: str) -> int:
        done = run_sago(env, *args)
        (logs / f"{log}.out").write_text(done.stdout)
        (logs / f"{log}.err").write_text(done.stderr)
        return done.returncode

    save = (
        "from prefect.blocks.system import Secret; "
        f"Secret(value={CANARY_SECRET!r}).save({SECRET_BLOCK!r}, overwrite=True)"
    )
    block = subprocess.run(
        [sys.executable, "-c", save], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert block.returncode == 0, block.stderr[-2000:]

    rules = [
        Rule("401_echo", match="capital"),
        Rule("500", match="legs"),
        Rule("malformed", match="planet"),
    ]
    with ScriptedServer(rules) as server:
        from_env = _config(tmp_path, server.base_url, {"key_env": "SAGO_CANARY_KEY"}, {})
        assert sago("run", "--config", str(from_env), log="env-key") == 0
        from_block = _config(
            tmp_path, server.base_url, {"key_secret": SECRET_BLOCK}, {"max_requests": 6}
        )
        assert sago("run", "--config", str(from_block), log="secret-key") == 2  # budget
        used = dict(server.state.credentials)
    # the canaries were really sent (so a zero below means something)
    assert used.get(f"Bearer {CANARY_ENV}", 0) > 0 and used.get(f"Bearer {CANARY_SECRET}", 0) > 0
    assert "budget" in (logs / "secret-key.err").read_text().lower()
    run_dirs = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    assert any((p / "report.html").is_file() for p in run_dirs)

    server_home = Path(server_env["PREFECT_HOME"])  # the database the logs and the block went to
    assert (server_home / "prefect.db").is_file()
    roots = [tmp_path / "runs", home, server_home, temp, logs]
    leaks = hits(roots, [CANARY_ENV, CANARY_SECRET])
    assert leaks == [], "\n".join(leaks[:20])


@pytest.mark.parametrize(
    "disguise",
    [
        lambda c: f"header Authorization: Bearer {c}".encode(),
        lambda c: base64.b64encode(f"Authorization: Bearer {c}".encode()),
        lambda c: base64.b64encode(f"k={c}".encode()),
        lambda c: base64.urlsafe_b64encode(f"xy{c}".encode()),
        lambda c: f"https://x/?key={quote_plus(c)}&a=1".encode(),
        lambda c: f"path/{quote(c, safe='')}".encode(),
    ],
)
def test_the_search_finds_a_canary_in_any_of_its_disguises(disguise, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The control: the search above can fail."""
    (tmp_path / "leak.bin").write_bytes(b"prefix " + disguise(CANARY_SECRET) + b" suffix")
    assert hits([tmp_path], [CANARY_SECRET])
