"""The A/B comparison of two finished runs on the same prompts (``sago compare A B --paired``,
a card against an earlier release, a watched release's escalation, the results site's trend
lines): one row per dataset (``__pooled__`` included) and axis with the paired tests of
``statistics/paired.py``; ``report/compare/paired.py`` renders it.

Refused before anything is computed: runs whose prompt sets differ (the error names the
missing prompts), runs whose configs differ in what makes s comparable (the variant grid,
decoding, the scorer, the seed), and runs sampled differently (``SAMPLING``: temperature,
top_p, top_k and the samples per prompt text K: at T > 0 s is built from
prompt-induced excesses whose size depends on all four), each unless the caller allows it;
allowed differences are returned to be shown beside the table. The sampling seed is not
compared: two releases are sampled independently whatever their seeds. Holm and BH run
over two families apart: the per-dataset rows, and the pooled rows that are built from them.

Models are paired by spec when both runs hold the same models, or one to one when each run
holds one model (a release against the previous one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sago_core.artifacts.layout import PROMPTS_FILE, SCORES_FILE
from sago_core.artifacts.rows import from_rows
from sago_core.artifacts.schemas import PAIRED
from sago_core.backends.served_identity import IdentityCheck, check_runs
from sago_core.config.saved import (
    SettingDifference,
    check_designs,
    read_run_config,
    sampling_settings,
)
from sago_core.errors import ConfigError, InputError
from sago_core.statistics.intervals import stable_seed
from sago_core.statistics.multiple_testing import benjamini_hochberg, holm
from sago_core.statistics.paired import ALPHA, paired_test, verdict
from sago_core.statistics.paired_design import paired_design, population_keys
from sago_core.vocabulary import AXES, POOLED

SHOWN_MISSING = 10  # prompts named in the error before "... and N more"


@dataclass(frozen=True)
class PairedComparison:
    table: pl.DataFrame  # PAIRED
    differences: list[SettingDifference]  # allowed config differences, shown with the table
    identity: IdentityCheck = field(default_factory=IdentityCheck)  # served models mixed
    # Each run's SAMPLING settings (A, B), shown with the table.
    sampling: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    # Budgeted runs: which cells each side asked and what the tests ran on (paired_design).
    design: str | None = None


def _prompt_keys(scores: pl.DataFrame, model: str) -> set[tuple[str, str]]:
    rows = scores.filter(pl.col("model") == model).select("dataset", "prompt_id").unique()
    return {(d, p) for d, p in rows.iter_rows()}


def _named(keys: set[tuple[str, str]]) -> str:
    names = [f"{d}/{p}" for d, p in sorted(keys)]
    more = len(names) - SHOWN_MISSING
    return ", ".join(names[:SHOWN_MISSING]) + (f" ... and {more} more" if more > 0 else "")


def check_prompt_sets(
    keys_a: set[tuple[str, str]], keys_b: set[tuple[str, str]], run_a: Path, run_b: Path
) -> None:
    """The paired tests need the same prompts on both sides; name what is missing."""
    if keys_a == keys_b:
        return
    parts = []
    if keys_a - keys_b:
        parts.append(f"missing from B ({run_b}): {_named(keys_a - keys_b)}")
    if keys_b - keys_a:
        parts.append(f"missing from A ({run_a}): {_named(keys_b - keys_a)}")
    raise InputError(
        "the two runs were not measured on the same prompts; " + "; ".join(parts),
        file=f"{run_a / SCORES_FILE} and {run_b / SCORES_FILE}",
    )


def check_prompt_texts(run_a: Path, run_b: Path) -> None:
    """Shared prompt ids must hold the same question (a changed data file is not the same
    work)."""
    key = ["dataset", "prompt_id"]
    a = pl.read_parquet(run_a / PROMPTS_FILE).select(*key, "prompt")
    b = pl.read_parquet(run_b / PROMPTS_FILE).select(*key, "prompt")
    changed = a.join(b, on=key, suffix="_b").filter(pl.col("prompt") != pl.col("prompt_b"))
    if changed.height:
        keys = {(d, p) for d, p in changed.select(key).iter_rows()}
        raise InputError(
            f"prompts with the same id hold different text: {_named(keys)}",
            file=f"{run_a / PROMPTS_FILE} and {run_b / PROMPTS_FILE}",
        )


def pair_models(models_a: list[str], models_b: list[str]) -> list[tuple[str, str]]:
    if sorted(models_a) == sorted(models_b):
        return [(m, m) for m in sorted(models_a)]
    if len(models_a) == 1 and len(models_b) == 1:
        return [(models_a[0], models_b[0])]
    raise ConfigError(
        f"cannot pair the models of the two runs ({models_a} vs {models_b}): give runs with "
        "the same models, or one model each"
    )


def _diffs(
    scores_a: pl.DataFrame, scores_b: pl.DataFrame, model_a: str, model_b: str
) -> pl.DataFrame:
    key = ["dataset", "prompt_id", "axis"]
    a = scores_a.filter(pl.col("model") == model_a).select(*key, pl.col("s").alias("s_a"))
    b = scores_b.filter(pl.col("model") == model_b).select(*key, pl.col("s").alias("s_b"))
    joined = a.join(b, on=key, how="inner")
    return joined.with_columns((pl.col("s_b") - pl.col("s_a")).alias("diff")).with_columns(
        pl.col("diff").fill_nan(None)
    )


def _row(
    model_a: str,
    model_b: str,
    dataset: str,
    axis: str,
    groups: list[np.ndarray],
    margin: float,
    shared: list[float] | None = None,
) -> dict[str, Any]:
    test = paired_test(groups, margin, stable_seed(model_a, model_b, dataset, axis), shared)
    return {
        "model_a": model_a,
        "model_b": model_b,
        "dataset": dataset,
        "axis": axis,
        **asdict(test),
        "margin": margin,
        "correction_family": "pooled" if dataset == POOLED else "datasets",
        "missing_reason": None if test.n >= 2 else "fewer than two prompts with s on both sides",
    }


def _correct(rows: list[dict[str, Any]], alpha: float) -> None:
    """Holm/BH within each correction family; then the verdict from the corrected p."""
    for family in ("datasets", "pooled"):
        members = [r for r in rows if r["correction_family"] == family]
        diff_p = [r["p_paired_t"] for r in members]
        tost_holm = holm([r["p_tost"] for r in members])
        for row, p_holm, p_bh, p_tost in zip(
            members, holm(diff_p), benjamini_hochberg(diff_p), tost_holm, strict=True
        ):
            row["p_holm"], row["p_bh"], row["p_tost_holm"] = p_holm, p_bh, p_tost
            row["verdict"] = verdict(row["mean_diff"], p_holm, p_tost, alpha)
            row["alpha"] = alpha


def paired_table(
    scores_a: pl.DataFrame,
    scores_b: pl.DataFrame,
    pairs: list[tuple[str, str]],
    margin: float,
    runs: tuple[str, str] = ("", ""),
    design: str | None = None,
    alpha: float = ALPHA,
    shared: Mapping[tuple[str, str, str, str], float] | None = None,
) -> pl.DataFrame:
    """PAIRED rows for every model pair, dataset (then pooled) and axis; ``design``: the
    line of ``paired_design`` (budgeted runs), in every row; ``alpha``: the level the
    verdicts are read at; ``shared``: per (model A, model B, dataset, axis), the variance of
    the dataset's mean difference its prompts share (budgeted runs of different samples)."""
    rows = []
    for model_a, model_b in pairs:
        diffs = _diffs(scores_a, scores_b, model_a, model_b)
        datasets = sorted(diffs["dataset"].unique().to_list())
        for axis in [a for a in AXES if a in set(diffs["axis"].to_list())]:
            on_axis = diffs.filter(pl.col("axis") == axis)
            groups = [
                on_axis.filter(pl.col("dataset") == d)["diff"].drop_nulls().to_numpy()
                for d in datasets
            ]
            extra = (
                None
                if shared is None
                else [shared.get((model_a, model_b, d, axis), 0.0) for d in datasets]
            )
            for j, (dataset, group) in enumerate(zip(datasets, groups, strict=True)):
                mine = None if extra is None else [extra[j]]
                rows.append(_row(model_a, model_b, dataset, axis, [group], margin, mine))
            rows.append(_row(model_a, model_b, POOLED, axis, groups, margin, extra))
    _correct(rows, alpha)
    for row in rows:
        row["run_a"], row["run_b"] = runs
        row["design"] = design
    return from_rows(rows, PAIRED)


def check_prompts(
    run_a: Path,
    run_b: Path,
    scores_a: pl.DataFrame,
    scores_b: pl.DataFrame,
    pairs: list[tuple[str, str]],
) -> None:
    """Refuse paired models measured on different prompts, or on prompts whose ids match
    and texts do not."""
    for model_a, model_b in pairs:
        check_prompt_sets(
            _prompt_keys(scores_a, model_a), _prompt_keys(scores_b, model_b), run_a, run_b
        )
    check_prompt_texts(run_a, run_b)


def compare_paired(
    run_a: Path,
    run_b: Path,
    margin: float,
    allow_different_configs: bool = False,
    strict_identity: bool = False,
    allow_different_sampling: bool = False,
    alpha: float = ALPHA,
) -> PairedComparison:
    """The paired table of two finished runs, after every check that can refuse them
    (answers from different served-model identities: only under ``strict_identity``);
    ``alpha``: the verdicts' level (the watch's ladder spends its alpha over the budgets it
    compares at, ``watch/escalation.py``)."""
    if not margin > 0:
        raise ConfigError(f"--margin must be above 0 (SGS units), got {margin}")
    config_a, config_b = read_run_config(run_a), read_run_config(run_b)
    differences = check_designs(
        config_a, config_b, allow_different_configs, allow_different_sampling
    )
    scores_a = pl.read_parquet(run_a / SCORES_FILE)
    scores_b = pl.read_parquet(run_b / SCORES_FILE)
    pairs = pair_models(
        sorted(scores_a["model"].unique().to_list()), sorted(scores_b["model"].unique().to_list())
    )
    design = paired_design(run_a, run_b)
    if design.budgeted:  # a budgeted run scores a sample of its prompts: check them all
        check_prompt_sets(population_keys(run_a), population_keys(run_b), run_a, run_b)
        check_prompt_texts(run_a, run_b)
        scores_a, scores_b = design.scores(scores_a, scores_b, pairs)
    else:
        check_prompts(run_a, run_b, scores_a, scores_b, pairs)
    identity = check_runs([(f"A ({run_a})", run_a), (f"B ({run_b})", run_b)], pairs)
    identity.enforce(strict_identity)
    runs = (str(run_a), str(run_b))
    shared = design.shared_variances(pairs)
    table = paired_table(scores_a, scores_b, pairs, margin, runs, design.line, alpha, shared)
    settings = (sampling_settings(config_a), sampling_settings(config_b))
    shown = design.line if design.budgeted else None
    return PairedComparison(table, differences, identity, settings, shown)
