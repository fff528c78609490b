"""A watch under a budget (sago_core/watch/escalation.py): a release climbs the budget ladder
only while its pooled verdict against the last release is undecided, both releases run at
each budget, every step is recorded in the registry and shown on the leaderboard; the
ladder is refused in one line when it is wrong. The evaluations are hand-built run folders
handed out by a fake ``run_at`` (what the flow passes is ``evaluate`` at that budget)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.config import BudgetSettings
from sago_core.errors import ConfigError
from sago_core.watch.escalation import escalate, parse_escalation, rungs
from sago_core.watch.leaderboard import leaderboard_rows, releases_section
from sago_core.watch.registry import Entry, Registry
from tests.unit.test_compare_budget import CONFIG, PROMPTS, TWO, _asked, _run, per_prompt

OLD, NEW = "hf:/models/old", "hf:/models/new"
OLD_S = np.array([0.20, 0.25, 0.30, 0.22])
UNDECIDED = np.array([0.03, -0.02, 0.04, -0.01])  # mean 0.01: neither test rejects
WORSE = np.array([0.10, 0.11, 0.12, 0.10])  # B clearly less stable: b_worse


class Releases:
    """A fake ``run_at``: one run folder per (spec, budget), made on first call."""

    def __init__(self, root: Path, diffs: dict[str, np.ndarray]) -> None:
        self.root, self.diffs = root, diffs
        self.calls: list[tuple[str, str]] = []

    def __call__(self, spec: str, budget: BudgetSettings | None) -> Path:
        label = "full" if budget is None else f"{budget.fraction:g}"
        self.calls.append((spec, label))
        folder = self.root / f"{spec.rsplit('/', 1)[1]}-{label}"
        if folder.exists():
            return folder
        s = OLD_S + (self.diffs[label] if spec == NEW else 0.0)
        counts = {"0.2": TWO, "0.5": [[3, 3]] * 4}
        asked = None if budget is None else _asked(0, counts[label])
        scores = dict(zip(PROMPTS, s.tolist(), strict=True))
        return _run(folder, spec, per_prompt(scores), asked, scores)


BUDGET = BudgetSettings(fraction=0.2, target=(("bleu", 0.05),), seed=7)
DEFAULT = parse_escalation(None)


def _old(releases: Releases) -> Entry:
    return Entry(OLD, "i-old", str(releases(OLD, BUDGET)), 1.0)


def test_an_undecided_verdict_climbs_one_budget_and_stops_once_decided(tmp_path: Path) -> None:
    releases = Releases(tmp_path, {"0.2": UNDECIDED, "0.5": WORSE, "full": WORSE})
    old = _old(releases)
    releases.calls.clear()
    run_dir, against, steps = escalate(NEW, old, BUDGET, DEFAULT, releases)
    # both releases at 20%, then both at 50%; the full grid never asked
    assert releases.calls == [(NEW, "0.2"), (OLD, "0.2"), (NEW, "0.5"), (OLD, "0.5")]
    assert run_dir == tmp_path / "new-0.5"
    assert against is not None and against.run_dir == str(tmp_path / "old-0.5")
    assert [s.budget for s in steps] == ["20%", "50%"]
    assert steps[0].verdicts == {"bleu": "inconclusive"} and steps[0].undecided == ("bleu",)
    assert steps[1].verdicts == {"bleu": "b_worse"} and steps[1].undecided == ()
    assert (steps[0].cells, steps[1].cells, steps[1].full_cells) == (16, 24, 32)
    assert steps[1].design is not None and "the same cells in B" in steps[1].design
    assert steps[0].describe() == "20% (16 of 32 cells): undecided at 0.00135 on bleu"
    assert steps[1].describe() == "50% (24 of 32 cells): decided at 0.00135 (b_worse)"


def test_a_verdict_undecided_at_every_budget_ends_at_the_full_grid(tmp_path: Path) -> None:
    releases = Releases(tmp_path, dict.fromkeys(("0.2", "0.5", "full"), UNDECIDED))
    run_dir, _, steps = escalate(NEW, _old(releases), BUDGET, DEFAULT, releases)
    assert [s.budget for s in steps] == ["20%", "50%", "full grid"]
    assert run_dir == tmp_path / "new-full" and (NEW, "full") in releases.calls
    assert steps[-1].undecided == ("bleu",) and steps[-1].design is None
    assert steps[-1].cells == steps[-1].full_cells == 32


def test_the_ladder_spends_its_alpha_so_a_modest_regression_waits_for_the_full_grid(
    tmp_path: Path,
) -> None:
    """A difference the paired t-test finds at 0.05 (two-sided p = 0.022 on these four
    prompts) is not a verdict at a budgeted rung's 0.00135: read at 0.05 on every rung, the
    ladder would give a release three chances at a false verdict. It is decided on the full
    grid, at 0.05 less what the two budgeted rungs spent."""
    modest = np.array([0.05, 0.02, 0.06, 0.03])
    releases = Releases(tmp_path, dict.fromkeys(("0.2", "0.5", "full"), modest))
    _, _, steps = escalate(NEW, _old(releases), BUDGET, DEFAULT, releases)
    assert [s.budget for s in steps] == ["20%", "50%", "full grid"]
    assert [s.verdicts for s in steps] == [{"bleu": "inconclusive"}] * 2 + [{"bleu": "b_worse"}]
    assert [s.alpha for s in steps] == pytest.approx([0.0013499, 0.0013499, 0.0473002], abs=1e-6)
    assert sum(s.alpha or 0 for s in steps) == pytest.approx(0.05)


def test_a_first_release_and_a_refused_comparison_do_not_climb(tmp_path: Path) -> None:
    releases = Releases(tmp_path, {"0.2": UNDECIDED, "full": UNDECIDED})
    run_dir, against, steps = escalate(NEW, None, BUDGET, DEFAULT, releases)
    # the full grid: the control variate of the family's later releases
    assert run_dir == tmp_path / "new-full" and against is None and len(steps) == 1
    assert releases.calls == [(NEW, "full")] and steps[0].budget == "full grid"
    assert steps[0].note is not None and "first release" in steps[0].note

    old = _old(releases)  # another seed: the paired comparison refuses the pair
    config = json.loads((Path(old.run_dir) / "run_config.json").read_text())
    (Path(old.run_dir) / "run_config.json").write_text(json.dumps({**config, "seed": 5}))
    releases.calls.clear()
    _, _, steps = escalate(NEW, old, BUDGET, DEFAULT, releases, rerun_previous=False)
    assert releases.calls == [(NEW, "0.2")] and len(steps) == 1
    assert steps[0].note is not None and steps[0].note.startswith("not compared: ")
    assert "seed (seed): 5 vs 0" in steps[0].note  # A (the last release) first


def test_a_later_release_runs_with_the_newest_full_run_of_its_design_as_baseline(
    tmp_path: Path,
) -> None:
    from sago_core.config import build_config
    from sago_core.watch.releases import baseline_run

    seen: list[BudgetSettings | None] = []
    releases = Releases(tmp_path, {"0.2": UNDECIDED, "0.5": WORSE, "full": WORSE})

    def run_at(spec: str, budget: BudgetSettings | None) -> Path:
        seen.append(budget)
        return releases(spec, budget)

    full = releases(OLD, None)
    run_dir, _, steps = escalate(NEW, _old(releases), BUDGET, DEFAULT, run_at, baseline=full)
    # the new release's runs carry the baseline, the last release's reruns do not
    assert [b and b.baseline for b in seen] == [str(full), None, str(full), None]
    assert [s.baseline for s in steps] == [str(full)] * 2 and run_dir == tmp_path / "new-0.5"

    config = build_config("demo", {**CONFIG, "models": [NEW]})
    saved = config.model_dump(mode="json", by_alias=True)
    (full / "run_config.json").write_text(json.dumps({**saved, "models": [OLD]}))
    entries = [  # earlier releases under the same spec: the same family
        Entry(NEW, "i-full", str(full), 1.0),
        Entry(NEW, "i-budgeted", str(tmp_path / "old-0.2"), 2.0),  # newer, but budgeted
        Entry(NEW, "i-new", str(run_dir), 3.0),  # the release itself
    ]
    assert baseline_run(entries, NEW, "i-new", config) == full
    other = build_config("demo", {**CONFIG, "models": [NEW], "seed": 5})  # another design
    assert baseline_run(entries, NEW, "i-new", other) is None


def test_the_ladder_keeps_the_budget_settings_and_skips_budgets_below_the_first() -> None:
    settings = parse_escalation({"ladder": [0.1, 0.4, 1.0]})
    ladder = rungs(BUDGET, settings)
    assert [r.fraction if r else None for r in ladder] == [0.2, 0.4, None]
    assert (
        ladder[1] is not None and ladder[1].seed == 7 and dict(ladder[1].target) == {"bleu": 0.05}
    )
    by_cells = BudgetSettings(generations=500)
    assert [r.fraction if r else None for r in rungs(by_cells, settings)] == [None, 0.1, 0.4, None]
    assert rungs(BUDGET, parse_escalation({"ladder": [0.5]}))[-1] is not None  # stops at 50%


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"ladder": [0.5, 0.2]}, "ladder: Value error, must increase, got [0.5, 0.2]"),
        ({"ladder": [0.0, 1.0]}, "ladder: Value error, every budget must be in (0, 1], got 0.0"),
        ({"axes": ["blue"]}, "axes: Value error, unknown axis 'blue'"),
        ({"margin": -1}, "margin: Input should be greater than 0"),
        ({"ladders": [0.5]}, "ladders: unknown key"),
    ],
)
def test_a_wrong_ladder_is_refused_in_one_line_naming_the_key(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as error:
        parse_escalation(values)
    assert "\n" not in str(error.value) and message in str(error.value)


def test_the_steps_are_recorded_and_shown_where_the_watch_reports_a_release(
    tmp_path: Path,
) -> None:
    releases = Releases(tmp_path / "runs", {"0.2": UNDECIDED, "0.5": WORSE})
    old = _old(releases)
    run_dir, _, steps = escalate(NEW, old, BUDGET, DEFAULT, releases)
    for spec, folder in ((OLD, Path(old.run_dir)), (NEW, run_dir)):
        pl.DataFrame(
            {"model": spec, "dataset": "__pooled__", "axis": "bleu", "sgs": 0.2, "p_eps_0_05": 0.5}
        ).write_parquet(folder / "summary.parquet")
    registry = Registry(tmp_path / "runs")
    registry.record(OLD, "i-old", Path(old.run_dir))
    registry.record(NEW, "i-new", run_dir, [s.record() for s in steps])
    line = (
        "20% (16 of 32 cells): undecided at 0.00135 on bleu -> "
        "50% (24 of 32 cells): decided at 0.00135 (b_worse)"
    )
    entry = next(e for e in registry.entries() if e.spec == NEW)
    assert entry.budget_steps[1]["against"] == str(tmp_path / "runs" / "old-0.5")
    table = pl.read_parquet(registry.write_table())
    assert dict(zip(table["spec"], table["budget_steps"], strict=True)) == {OLD: None, NEW: line}
    board = pl.DataFrame(leaderboard_rows(registry.entries()))
    page = releases_section(board, registry.root)
    assert f"<td>{html.escape(line)}</td>" in page and "<td>full grid</td>" in page


def test_a_release_runs_at_each_budget_with_the_watch_config_otherwise_unchanged() -> None:
    from sago_core.watch.escalation import release_config

    overrides = {"n": 2, "budget": {"fraction": 0.2, "target": {"bleu": 0.05}, "seed": 7}}
    first = release_config("demo", overrides, "runs", NEW, BUDGET, "watch")
    higher = rungs(first.budget or BUDGET, DEFAULT)[1]
    at_half = release_config("demo", overrides, "runs", NEW, higher, "watch")
    full = release_config("demo", overrides, "runs", NEW, None, "watch")
    assert first.budget == BUDGET and first.models == (NEW,) and first.n == 2
    assert at_half.budget is not None and at_half.budget.fraction == 0.5
    assert (at_half.budget.seed, dict(at_half.budget.target)) == (7, {"bleu": 0.05})
    assert full.budget is None and full.n == 2
    plain = release_config("demo", {"n": 2}, "runs", NEW, None, "watch")
    assert full.model_dump() == plain.model_dump()  # the full grid: an unbudgeted run's config


@pytest.mark.slow
def test_a_budgeted_watch_runs_a_first_release_on_the_full_grid_and_records_its_step(
    harness: None, tmp_path: Path
) -> None:
    """The whole flow on the mock backend: a first release, so one step on the full grid (a
    mock model is its own family: nothing to compare with, nothing to climb)."""
    from sago.flows.watch import watch

    data = tmp_path / "questions.jsonl"
    questions = ["What is the capital of France?", "Name a prime number.", "Why is the sky blue?"]
    data.write_text("".join(json.dumps({"question": q}) + "\n" for q in questions))
    source = tmp_path / "models.txt"
    source.write_text("mock:watched\n")
    overrides = {
        "datasets": [str(data)],
        "n": 3,
        "generation": {"max_new_tokens": 8},
        "variants": {
            "register": None,
            "structural": None,
            "noise": {
                "spacing": [1, 5, 20, 50],
                "punctuation": [],
                "capitalization": [10, 25, 50, 75],
                "positions": ["global"],
            },
        },
        "budget": {"fraction": 0.6, "rounds": 1},
    }
    runs = tmp_path / "runs"
    assert watch(str(source), runs_dir=str(runs), overrides=overrides) == ["mock:watched"]
    (entry,) = Registry(runs).entries()
    assert not (Path(entry.run_dir) / "budget.json").exists()  # the family's full reference
    (step,) = entry.budget_steps
    assert step["budget"] == "full grid" and step["cells"] == step["full_cells"] > 0
    assert step["note"].startswith("first release") and step["baseline"] is None
    table = pl.read_parquet(runs / "registry.parquet")
    assert table["budget_steps"].to_list()[0].startswith(f"full grid ({step['cells']} of ")
    assert "first release of its family" in (runs / "leaderboard.html").read_text()
