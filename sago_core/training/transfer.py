"""The transfer report: does a training's gain in stability carry over to what it was not
trained on? Two runs of the same design (before and after training) and the training's split
(``split.json``), recomputed from the runs' own artifacts (``deltas.parquet`` and
``instances.parquet``).

For each cell of {trained, held-out families} x {train, held-out prompts} x {train, held-out
datasets} and each axis: per prompt, s after minus s before (s: the RMS of normalised deltas
over the prompt's variants of the cell's families, ``scoring.prompt_scores``), and on these
differences the paired tests of ``statistics.paired`` (mean, bootstrap interval, paired t,
TOST with the margin), Holm-corrected over the table. Below 0 is a gain (after moved less).
The criterion per cell: the gain *transfers* ``yes`` when the corrected paired t rejects with
a negative mean, ``no`` when the corrected TOST finds no change beyond the margin or the
t-test finds a loss, else ``undecided``. The cell of trained families, train prompts and train
datasets is in-sample: it says whether training worked, not whether it transfers.

Beside it, the capability check: per prompt side x dataset side, the base answers' correctness
(prompts with references) after minus before, with a TOST at ``correctness_margin``
(``kept`` when it rejects, ``lost`` / ``gained`` when the paired t rejects, else
``undecided``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sago_core.artifacts.layout import DELTAS_FILE, INSTANCES_FILE
from sago_core.artifacts.schemas import Schema, conform
from sago_core.config.saved import check_designs, read_run_config
from sago_core.errors import ConfigError, InputError
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.statistics.multiple_testing import holm
from sago_core.statistics.paired import ALPHA, paired_test, verdict
from sago_core.statistics.paired_runs import check_prompt_texts
from sago_core.training.split import HELD_OUT, TRAIN, Split
from sago_core.vocabulary import AXES, REPLAY_FAMILY

TRAINED = "trained"
IN_SAMPLE = "in-sample"
DEFAULT_CORRECTNESS_MARGIN = 0.05  # a share of prompts answered correctly
_KEY = ["dataset", "prompt_id"]
# transfer.parquet (sago compare --transfer): one row per cell and axis.
TRANSFER: Schema = {
    "families": pl.String,  # trained / held_out
    "prompts": pl.String,  # train / held_out
    "datasets": pl.String,  # train / held_out
    "axis": pl.String,
    "n": pl.Int64,  # prompts with s on both sides
    "mean_diff": pl.Float64,  # mean over prompts of s_after - s_before
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p_paired_t": pl.Float64,
    "p_tost": pl.Float64,
    "ci_missing_reason": pl.String,
    "p_holm": pl.Float64,
    "p_tost_holm": pl.Float64,
    "verdict": pl.String,  # statistics.paired.VERDICTS, null without a test
    "transfers": pl.String,  # yes / no / undecided / in-sample
}


def _one_model(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    models = frame["model"].unique().to_list()
    if len(models) != 1:
        raise InputError(
            f"holds {len(models)} models; --transfer compares one each", file=str(path)
        )
    return frame


def _sides(frame: pl.DataFrame, split: Split) -> pl.DataFrame:
    """Each prompt's prompt side and dataset side under the split."""
    held = {(d, p) for d, prompts in split.held_out_prompts.items() for p in prompts}
    known = held | {(d, p) for d, prompts in split.train_prompts.items() for p in prompts}
    keys = frame.select(_KEY).unique()
    unknown = [(d, p) for d, p in keys.iter_rows() if (d, p) not in known]
    if unknown:
        raise ConfigError(
            f"prompt {unknown[0][0]}/{unknown[0][1]} is not in the split: the runs and the "
            "training data come from different prompts"
        )
    sides = keys.with_columns(
        pl.Series("prompt_side", [HELD_OUT if k in held else TRAIN for k in keys.iter_rows()]),
        pl.when(pl.col("dataset").is_in(list(split.held_out_datasets)))
        .then(pl.lit(HELD_OUT))
        .otherwise(pl.lit(TRAIN))
        .alias("dataset_side"),
    )
    return frame.join(sides, on=_KEY)


def check_transfer_design(before: Path, after: Path) -> None:
    """Refuse runs of different designs: sampling, variant grid, decoding, scorer or seed
    (``config.saved.check_designs``), prompt texts, or the variants measured."""
    check_designs(read_run_config(before), read_run_config(after))
    check_prompt_texts(before, after)
    ids = ["dataset", "prompt_id", "variant_id"]
    a = set(pl.read_parquet(before / DELTAS_FILE, columns=ids).unique().iter_rows())
    b = set(pl.read_parquet(after / DELTAS_FILE, columns=ids).unique().iter_rows())
    if a != b:
        only = sorted(a ^ b)[0]
        raise InputError(
            f"the runs measured different variants (e.g. {'/'.join(only)} is in one only)",
            file=f"{before / DELTAS_FILE} and {after / DELTAS_FILE}",
        )


def _prompt_differences(
    before: pl.DataFrame, after: pl.DataFrame, families: Sequence[str]
) -> pl.DataFrame:
    keep = pl.col("family").is_in([*families, REPLAY_FAMILY])
    s_before = score_prompts(before.filter(keep)).select(*_KEY, "axis", "s")
    s_after = score_prompts(after.filter(keep)).select(*_KEY, "axis", "s")
    joined = s_before.join(s_after, on=[*_KEY, "axis"], suffix="_after")
    return joined.with_columns((pl.col("s_after") - pl.col("s")).alias("diff")).drop_nulls("diff")


def _criterion(cell: tuple[str, str, str], test_verdict: str | None) -> str:
    if cell == (TRAINED, TRAIN, TRAIN):
        return IN_SAMPLE
    if test_verdict == "b_better":
        return "yes"
    if test_verdict in ("equivalent", "b_worse"):
        return "no"
    return "undecided"


def _test_row(groups: list[np.ndarray], margin: float, seed: int) -> dict[str, Any]:
    test = asdict(paired_test(groups, margin, seed))
    kept = ("n", "mean_diff", "ci_low", "ci_high", "p_paired_t", "p_tost", "ci_missing_reason")
    return {name: test[name] for name in kept}


def transfer_table(
    before: Path, after: Path, split: Split, margin: float, seed: int = 0
) -> pl.DataFrame:
    """One row per cell and axis: the paired change of s (after - before), its interval,
    Holm-corrected tests, the verdict and whether the gain transfers."""
    if not margin > 0:
        raise ConfigError(f"--margin must be above 0 (SGS units), got {margin}")
    deltas = [
        _sides(_one_model(pl.read_parquet(run / DELTAS_FILE), run / DELTAS_FILE), split)
        for run in (before, after)
    ]
    rows: list[dict[str, Any]] = []
    family_sides = ((TRAINED, split.trained_families), (HELD_OUT, split.held_out_families))
    for family_side, families in family_sides:
        diffs = _prompt_differences(deltas[0], deltas[1], families)
        sides = deltas[0].select(*_KEY, "prompt_side", "dataset_side").unique()
        diffs = diffs.join(sides, on=_KEY)
        for prompt_side in (TRAIN, HELD_OUT):
            for dataset_side in (TRAIN, HELD_OUT):
                for axis in AXES:
                    cell = diffs.filter(
                        (pl.col("prompt_side") == prompt_side)
                        & (pl.col("dataset_side") == dataset_side)
                        & (pl.col("axis") == axis)
                    )
                    groups = [
                        g["diff"].to_numpy()
                        for _, g in cell.group_by("dataset", maintain_order=True)
                    ]
                    rows.append(
                        {
                            "families": family_side,
                            "prompts": prompt_side,
                            "datasets": dataset_side,
                            "axis": axis,
                            **_test_row(groups, margin, seed),
                        }
                    )
    for row, p_t, p_tost in zip(
        rows,
        holm([r["p_paired_t"] for r in rows]),
        holm([r["p_tost"] for r in rows]),
        strict=True,
    ):
        row["p_holm"], row["p_tost_holm"] = p_t, p_tost
        row["verdict"] = verdict(row["mean_diff"], p_t, p_tost)
        where = (row["families"], row["prompts"], row["datasets"])
        row["transfers"] = _criterion(where, row["verdict"])
    return conform(pl.DataFrame(rows, infer_schema_length=None), TRANSFER)


def _base_correct(run: Path) -> pl.DataFrame:
    frame = pl.read_parquet(run / INSTANCES_FILE, columns=[*_KEY, "base_correct"])
    return frame.unique(_KEY).drop_nulls("base_correct")


def correctness_table(
    before: Path, after: Path, split: Split, margin: float = DEFAULT_CORRECTNESS_MARGIN
) -> pl.DataFrame:
    """Per prompt side x dataset side: the base answers' correctness before and after, the
    paired change, its interval and the capability verdict."""
    joined = _sides(
        _base_correct(before).join(_base_correct(after), on=_KEY, suffix="_after"), split
    ).with_columns(
        pl.col("base_correct").cast(pl.Float64).alias("before"),
        pl.col("base_correct_after").cast(pl.Float64).alias("after"),
    )
    rows = []
    for prompt_side in (TRAIN, HELD_OUT):
        for dataset_side in (TRAIN, HELD_OUT):
            cell = joined.filter(
                (pl.col("prompt_side") == prompt_side) & (pl.col("dataset_side") == dataset_side)
            )
            diffs = (cell["after"] - cell["before"]).to_numpy()
            test = _test_row([diffs], margin, 0)
            if test["p_tost"] is not None and test["p_tost"] < ALPHA:
                check = "kept"
            elif test["p_paired_t"] is not None and test["p_paired_t"] < ALPHA:
                check = "lost" if (test["mean_diff"] or 0) < 0 else "gained"
            else:
                check = "undecided"
            rows.append(
                {
                    "prompts": prompt_side,
                    "datasets": dataset_side,
                    "correct_before": _mean(cell["before"]),
                    "correct_after": _mean(cell["after"]),
                    **test,
                    "capability": check,
                }
            )
    return pl.DataFrame(rows, infer_schema_length=None)


def _mean(values: pl.Series) -> float | None:
    return float(values.to_numpy().mean()) if values.len() else None


def _number(value: float | None, reason: str | None = None) -> str:
    if value is None:
        return f"NA ({reason})" if reason else "NA"
    return f"{value:+.4f}"


def render_transfer(
    table: pl.DataFrame, correctness: pl.DataFrame, margin: float, correctness_margin: float
) -> str:
    """The report as Markdown: the matrix per axis, then the capability check."""
    lines = [
        "# Transfer of the training's stability gain",
        "",
        "Change of s (after - before; below 0 = more stable after), 95% bootstrap interval, "
        f"Holm-corrected paired t and TOST (margin {margin} SGS).",
        "",
        "| families | prompts | datasets | axis | n | change | 95% CI | verdict | transfers |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.iter_rows(named=True):
        if r["ci_low"] is None:
            ci = f"NA ({r['ci_missing_reason']})" if r["ci_missing_reason"] else "NA"
        else:
            ci = f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]"
        change = _number(r["mean_diff"], "no prompt in this cell")
        verdict_text = r["verdict"] or "NA (no test)"
        lines.append(
            f"| {r['families']} | {r['prompts']} | {r['datasets']} | {r['axis']} | {r['n']} | "
            f"{change} | {ci} | {verdict_text} | {r['transfers']} |"
        )
    lines += [
        "",
        "## Capability check: the base answers' correctness (prompts with references)",
        "",
        f"TOST margin {correctness_margin} (a share of prompts).",
        "",
        "| prompts | datasets | n | before | after | change | 95% CI | capability |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in correctness.iter_rows(named=True):
        before = "NA" if r["correct_before"] is None else f"{r['correct_before']:.3f}"
        after = "NA" if r["correct_after"] is None else f"{r['correct_after']:.3f}"
        ci = "NA" if r["ci_low"] is None else f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
        lines.append(
            f"| {r['prompts']} | {r['datasets']} | {r['n']} | {before} | {after} | "
            f"{_number(r['mean_diff'], 'no prompt with references')} | {ci} | "
            f"{r['capability']} |"
        )
    return "\n".join(lines) + "\n"
