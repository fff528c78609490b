"""``sago judge-audit``: a blind, seeded sample of judged register pairs for human labels,
and agreement between human, judge and the offline detector once the labels come back.

Export: a random share (default 10%, at least one) of the pairs the judge decided, as CSV
with the two answers and an empty ``human_label`` column (1 = the variant's answer is
clearly politer/ruder in the asked direction, 0 = not). Verdicts are not in the file, so the
labeller is blind to them. Score: the labelled CSV joined back to the run by ``pair_id``.
"""

from __future__ import annotations

import csv
import hashlib
import random
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import GENERATIONS_FILE, MIRRORING_FILE, RunLayout
from sago_core.axes.mirroring import register_mirroring
from sago_core.axes.reasoning import with_answers
from sago_core.errors import InputError
from sago_core.statistics.agreement import agreement
from sago_core.vocabulary import BASE_VARIANT_ID, ROW_KEY

COLUMNS = ["pair_id", "direction", "question", "response_a_base", "response_b_variant"]


def judged_pairs(run_dir: Path) -> pl.DataFrame:
    """Register pairs the judge decided, with both answers, the judge's and the offline
    detector's verdicts."""
    parts = [pl.read_parquet(p) for p in RunLayout(run_dir).per_model_files(MIRRORING_FILE)]
    if not parts:
        raise InputError("holds no mirroring artifacts (is it a finished run?)", file=str(run_dir))
    mirroring = pl.concat(parts).filter(pl.col("detector").str.starts_with("judge:"))
    # The texts the judge compared: the answers after any reasoning block.
    generations = with_answers(pl.read_parquet(run_dir / GENERATIONS_FILE))
    base = generations.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        "model", "dataset", "prompt_id", pl.col("answer_text").alias("base_response")
    )
    joined = (
        mirroring.join(generations, on=ROW_KEY, how="inner")
        .join(base, on=["model", "dataset", "prompt_id"], how="left")
        .filter(pl.col("m_variant").is_not_null())
    )
    offline = [
        register_mirroring(s, r, b)
        for s, r, b in joined.select("strength", "answer_text", "base_response").iter_rows()
    ]
    pair_ids = [
        hashlib.sha256("\x1f".join(k).encode()).hexdigest()[:12]
        for k in joined.select(ROW_KEY).iter_rows()
    ]
    return joined.with_columns(
        pl.Series("pair_id", pair_ids, dtype=pl.String),
        pl.Series("offline", offline, dtype=pl.Int8),
        pl.when(pl.col("strength") > 0)
        .then(pl.lit("politer"))
        .otherwise(pl.lit("ruder"))
        .alias("direction"),
    ).sort("pair_id")


def export_sample(run_dir: Path, out: Path, share: float = 0.1, seed: int = 0) -> int:
    pairs = judged_pairs(run_dir)
    if not len(pairs):
        raise InputError(
            "has no pairs decided by a judge (register_judge.model was not set)", file=str(run_dir)
        )
    k = max(1, round(share * len(pairs)))
    chosen = sorted(random.Random(seed).sample(range(len(pairs)), k))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*COLUMNS, "human_label"])
        for i in chosen:
            row = pairs.row(i, named=True)
            writer.writerow(
                [
                    row["pair_id"],
                    row["direction"],
                    row["prompt_text"],
                    row["base_response"],
                    row["answer_text"],
                    "",
                ]
            )
    return k


def _labels(path: Path) -> dict[str, int]:
    labels: dict[str, int] = {}
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or not {"pair_id", "human_label"} <= set(reader.fieldnames):
            raise InputError("needs the columns pair_id and human_label", file=str(path))
        for row_number, row in enumerate(reader, start=2):
            value = (row["human_label"] or "").strip().lower()
            if value in ("1", "yes", "y", "true"):
                labels[row["pair_id"]] = 1
            elif value in ("0", "no", "n", "false"):
                labels[row["pair_id"]] = 0
            elif value:
                raise InputError(
                    f"label {value!r} is not 1/0 or yes/no",
                    file=str(path),
                    row=row_number,
                    column="human_label",
                )
    return labels


def score_labels(run_dir: Path, labelled: Path) -> dict[str, Any]:
    labels = _labels(labelled)
    pairs = judged_pairs(run_dir).filter(pl.col("pair_id").is_in(list(labels)))
    unknown = set(labels) - set(pairs["pair_id"].to_list())
    if unknown:
        raise InputError(
            f"{len(unknown)} pair_id(s) are not judged pairs of this run, "
            f"e.g. {sorted(unknown)[0]}",
            file=str(labelled),
            column="pair_id",
        )
    human = [labels[p] for p in pairs["pair_id"].to_list()]
    judge, offline = pairs["m_variant"].to_list(), pairs["offline"].to_list()
    result: dict[str, Any] = {"labelled": len(human)}
    for name, (a, b) in {
        "human_vs_judge": (human, judge),
        "human_vs_offline": (human, offline),
        "judge_vs_offline": (judge, offline),
    }.items():
        measured = agreement(a, b)
        result[name] = {"n": measured.n, "percent": measured.percent, "kappa": measured.kappa}
    return result
