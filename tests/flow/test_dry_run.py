"""`sago run --dry-run` against a real run of the same config over the local API server: the
plan loads no model and sends nothing, and its request and token counts are what the run
then sends (bounded counts exceed the sent ones by exactly the variants the run rejected)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
import pytest
import yaml

from sago_core.artifacts.layout import RunLayout
from sago_core.axes.judge import JUDGE_MAX_TOKENS as JUDGE_MAX
from sago_core.backends.target import run_targets
from sago_core.config import build_config
from sago_core.run_plan import plan_run
from sago_core.stages.prompts import prepare_prompts
from tests.grids import tiny_variants
from tests.openai_server import ScriptedServer

MODEL, TOOL = "openai/mock-1", "openai/tool-1"
MAX_NEW = 7


def _values(runs: Path, base_url: str) -> dict:
    return {
        "models": [f"litellm:{MODEL}"],
        "n": 1,
        "runs_dir": str(runs),
        "generation": {"max_new_tokens": MAX_NEW},
        "api": {
            "base_url": base_url,
            "key_env": "SAGO_TEST_API_KEY",
            "backoff_s": 0,
            "prices": {"input_per_million": 1.0, "output_per_million": 2.0},
            "budget": {"max_requests": 10},
        },
        "judge": {"model": f"litellm:{TOOL}"},
        # Every register variant passes (threshold near 0): their count is then exact too.
        "bertscore": {"model": "minilm-l6", "num_layers": 6, "semantic_threshold": 0.01},
        "variants": tiny_variants(
            structural={"lengths": [2.0], "mood": True, "rewriter": f"litellm:{TOOL}"}
        ),
    }


@pytest.mark.slow
def test_the_plan_is_what_the_run_sends(
    harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from sago.flows.evaluate import evaluate
    from sago_cli.main import main
    from sago_core.backends.factory import loaded_engines

    monkeypatch.setenv("SAGO_TEST_API_KEY", "sk-test")
    with ScriptedServer() as server:
        values = _values(tmp_path / "runs", server.base_url)
        file = tmp_path / "small.yaml"
        file.write_text(yaml.safe_dump(values))
        engines = loaded_engines()
        assert main(["run", "--config", str(file), "--dry-run"]) == 0
        printed = capsys.readouterr().out
        assert server.total_calls() == 0 and loaded_engines() == engines
        assert not (tmp_path / "runs").exists()  # nothing written either
        assert "cost ceiling" in printed and "api.spending.max_requests 10" in printed

        config = build_config("demo", values)
        layout = RunLayout.of(config.runs_dir, config.resolved_run_id())
        targets = run_targets(config)
        every = [*targets.models.values(), *targets.tools()]
        prices = {t.spec: (1e-6, 2e-6) for t in every if t.is_api}
        plan = plan_run(config, prepare_prompts(config), targets, layout, prices)

        del values["api"]["budget"]  # the run itself goes to the end
        run_dir = Path(evaluate(build_config("demo", values)))
        received = server.state.received

    for request in received:  # LiteLLM sends the model name without its provider prefix
        request["model"] = f"openai/{request['model']}"
    sent = Counter(r["model"] for r in received)
    traffic = {f"{t.spec}|{t.role}": t for t in plan.api}
    evaluated, rewriter, judge = (
        traffic[f"litellm:{MODEL}|evaluated"],
        traffic[f"litellm:{TOOL}|rewriter"],
        traffic[f"litellm:{TOOL}|judge"],
    )
    prompts = sum(plan.prompts.values())
    variants = pl.read_parquet(run_dir / "variants.parquet")
    rejected = variants.filter(~pl.col("kept"))
    assert set(rejected["family"].to_list()) <= {"structural"}  # the filter passes the rest
    # base + 2 register + 3 noise + replay + 2 structural per prompt; sent: less the rejects
    assert evaluated.requests == 9 * prompts and evaluated.requests_bounded
    assert sent[MODEL] == evaluated.requests - rejected.height
    rewrites = [r for r in received if r["model"] == TOOL and r["max_tokens"] != JUDGE_MAX]
    judged = [r for r in received if r["model"] == TOOL and r["max_tokens"] == JUDGE_MAX]
    assert len(rewrites) == rewriter.requests == 2 * prompts
    assert sum(r["chars"] for r in rewrites) == rewriter.input_chars
    assert sum(r["max_tokens"] for r in rewrites) == rewriter.output_token_ceiling
    assert len(judged) == judge.requests == 2 * prompts
    assert sum(r["max_tokens"] for r in judged) == judge.output_token_ceiling
    asked = [r for r in received if r["model"] == MODEL]
    assert sum(r["max_tokens"] for r in asked) == evaluated.output_token_ceiling - (
        rejected.height * MAX_NEW
    )
    # Characters: exact for every text the plan could see; the structural rewrites it
    # could not are an estimate, replaced here by the kept rewrites' real text.
    kept = variants.filter(pl.col("kept") & (pl.col("family") == "structural"))
    known = evaluated.input_chars - evaluated.estimated_chars
    assert sum(r["chars"] for r in asked) == known + sum(len(t) for t in kept["text"])


def test_the_paper_example_plans_offline(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """examples/paper.yaml validates and plans with no key, no network, no GPU."""
    from sago_cli.main import main
    from sago_core.backends.factory import loaded_engines

    example = Path(__file__).resolve().parents[2] / "examples" / "paper.yaml"
    engines = loaded_engines()
    argv = ["run", "--config", str(example), "--data-dir", str(shared_data), "--dry-run"]
    assert main([*argv, "--runs-dir", str(tmp_path / "runs")]) == 0
    printed = capsys.readouterr().out
    assert loaded_engines() == engines and not (tmp_path / "runs").exists()
    assert "total 96" in printed  # six datasets x N = 16
    # Where each dataset's gold answers come from: Alpaca's `output` is a model's answer.
    assert "alpaca: no reference answers (" in printed
    assert "nq_open: references from column(s) answer" in printed
    for family in ("noise", "register", "replay", "structural"):
        assert family in printed
    assert "litellm:openai/gpt-4o-mini (rewriter): 576 requests" in printed  # 96 x (5 + 1)
    assert "litellm:openai/gpt-4o-mini (judge): up to" in printed
    assert "cost ceiling: $" in printed
