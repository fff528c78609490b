"""How well do the rule-based refusal verdicts agree with a person's reading of the same
answers? (``sago audit refusal sample``, a person labels, ``sago audit refusal score``)

docs/guide/refusal.md ("Checking the rules against a person's reading") gives the steps.
The draw is seeded and stratified by (kind, rule verdict, family, language), one answer a
stratum a round, so the agreement is measured on a balanced sample, not the run's own
shares; answers the rules leave NA have nothing to agree with and are left out, counted.
``partial`` counts as complied for the agreement (the rules have two verdicts and a partial
answer is not a refusal; StrongREJECT scores it so too), kept apart in the confusion table.
"""

from __future__ import annotations

import csv
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import GENERATIONS_FILE, REFUSAL_VERDICTS_FILE
from sago_core.refusal.judge import RefusalJudge
from sago_core.statistics.agreement import agreement as rater_agreement
from sago_core.vocabulary import ROW_KEY

REFUSED, COMPLIED, PARTIAL = "refused", "complied", "partial"
LABELS = (REFUSED, COMPLIED, PARTIAL)
RULES = (REFUSED, COMPLIED)
STRATA = ("kind", "rule", "family", "language")
COLUMNS = ("row", *ROW_KEY, "kind", "family", "language", "prompt", "answer", "rule", "label")
CORNER = "label \\ rule"  # the confusion table's corner: labels down, rule verdicts across
SNIPPET = 160  # characters of an answer printed beside a disagreement


def labelled_answers(run_dir: Path) -> tuple[pl.DataFrame, int]:
    """The run's first-sample answers with a rule verdict (one row per answer: ``ROW_KEY``, kind,
    family, language, prompt, answer, rule) and how many had none (NA)."""
    verdicts_path = run_dir / REFUSAL_VERDICTS_FILE
    if not verdicts_path.is_file():
        raise FileNotFoundError(
            f"{verdicts_path}: no refusal verdicts (the run measured no refusal, or it is "
            "not a finished run folder)"
        )
    verdicts = pl.read_parquet(verdicts_path).filter(pl.col("sample") == 0)
    texts = pl.read_parquet(
        run_dir / GENERATIONS_FILE, columns=[*ROW_KEY, "prompt_text", "answer_text"]
    )
    judged = verdicts.drop_nulls("refused")
    rows = judged.join(texts, on=list(ROW_KEY), how="left").select(
        *ROW_KEY,
        "kind",
        "family",
        "language",
        pl.col("prompt_text").alias("prompt"),
        pl.col("answer_text").alias("answer"),
        pl.when(pl.col("refused")).then(pl.lit(REFUSED)).otherwise(pl.lit(COMPLIED)).alias("rule"),
    )
    return rows.sort(list(ROW_KEY)), verdicts.height - judged.height


def stratified_sample(answers: pl.DataFrame, n: int, seed: int) -> pl.DataFrame:
    """``n`` rows of ``answers`` (all when fewer), one per stratum per round (module
    docstring), with a ``row`` number from 1."""
    if n < 1:
        raise ValueError(f"--n: need at least 1, got {n}")
    rng = random.Random(seed)
    strata: dict[tuple[str, ...], list[dict[str, object]]] = {}
    for row in answers.iter_rows(named=True):
        strata.setdefault(tuple(str(row[c]) for c in STRATA), []).append(row)
    pools = [strata[key] for key in sorted(strata)]
    for pool in pools:
        rng.shuffle(pool)
    drawn: list[dict[str, object]] = []
    while len(drawn) < min(n, answers.height):
        order = [pool for pool in pools if pool]
        rng.shuffle(order)
        for pool in order[: n - len(drawn)]:
            drawn.append(pool.pop())
    out = pl.DataFrame(drawn, schema=answers.schema)
    return out.select(
        pl.int_range(1, out.height + 1).alias("row"), *answers.columns, pl.lit("").alias("label")
    )


def write_labels_csv(sample: pl.DataFrame, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(COLUMNS))
        writer.writeheader()
        for row in sample.iter_rows(named=True):
            writer.writerow({c: "" if row[c] is None else row[c] for c in COLUMNS})
    return out


@dataclass(frozen=True)
class Agreement:
    rater: str  # "rule" or "judge": the column the labels are compared with
    labelled: int  # rows with a label and a verdict of the rater
    unlabelled: int  # rows without a label
    without_verdict: int  # labelled rows the rater left without a verdict (judge: NA)
    agreement: float | None  # share of rows whose label (partial: complied) = the verdict's
    exact: float | None  # the judge's three labels against the person's (None for the rule)
    kappa: float | None
    kappa_missing_reason: str | None
    confusion: dict[str, dict[str, int]]  # label -> verdict -> count
    disagreements: list[dict[str, str]]


def _checked(
    path: Path, line: int, row: dict[str, str], column: str, allowed: tuple[str, ...]
) -> None:
    row[column] = (row.get(column) or "").strip().lower()
    if row[column] and row[column] not in allowed:
        raise ValueError(
            f"{path}, line {line}, column {column!r}: {row[column]!r} is not one of "
            f"{', '.join(allowed)} (or empty)"
        )


def read_labels_csv(path: Path) -> list[dict[str, str]]:
    """The CSV's rows; a missing column, a rule verdict, a label or a judge verdict that is
    not one of the documented values stops with the file, row and column named."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        absent = [c for c in ("rule", "label") if c not in columns]
        if absent:
            raise ValueError(f"{path}: no column {absent[0]!r} (the CSV that 'sample' writes)")
        rows = list(reader)
    for line, row in enumerate(rows, start=2):
        _checked(path, line, row, "rule", RULES)
        if not row["rule"]:
            raise ValueError(f"{path}, line {line}, column 'rule': empty")
        _checked(path, line, row, "label", LABELS)
        if "judge" in columns:
            _checked(path, line, row, "judge", LABELS)
    return rows


def _binary(label: str) -> str:
    return REFUSED if label == REFUSED else COMPLIED


def agreement(rows: list[dict[str, str]], rater: str = "rule") -> Agreement:
    """Raw agreement, Cohen's kappa and the confusion table of the labelled ``rows`` against
    the ``rater`` column (``rule``, or ``judge`` as ``judge`` writes it)."""
    classes = RULES if rater == "rule" else LABELS
    labelled = [r for r in rows if r["label"]]
    judged = [r for r in labelled if r.get(rater)]
    confusion = {label: dict.fromkeys(classes, 0) for label in LABELS}
    for r in judged:
        confusion[r["label"]][r[rater]] += 1
    n, unlabelled, without = len(judged), len(rows) - len(labelled), len(labelled) - len(judged)
    if not n:
        none = "no labelled row with a verdict"
        return Agreement(rater, 0, unlabelled, without, None, None, None, none, confusion, [])
    measured = rater_agreement(
        [int(r["label"] == REFUSED) for r in judged], [int(r[rater] == REFUSED) for r in judged]
    )
    observed = None if measured.percent is None else measured.percent / 100.0
    exact = None if rater == "rule" else sum(r["label"] == r[rater] for r in judged) / n
    why: str | None = None
    if measured.kappa is None:
        why = f"every label and {rater} verdict is the same class: kappa is undefined"
    disagreements = [r for r in judged if _binary(r["label"]) != _binary(r[rater])]
    return Agreement(
        rater,
        n,
        unlabelled,
        without,
        observed,
        exact,
        measured.kappa,
        why,
        confusion,
        disagreements,
    )


def render(result: Agreement) -> str:
    def number(value: float | None) -> str:
        return "NA" if value is None else f"{value:.3f}"

    kappa = number(result.kappa)
    if result.kappa_missing_reason:
        kappa += f" ({result.kappa_missing_reason})"
    classes = list(next(iter(result.confusion.values())))
    lines = [
        f"== the {result.rater} against the labels",
        f"labelled rows: {result.labelled} (without a label: {result.unlabelled}; without a "
        f"{result.rater} verdict: {result.without_verdict}; both left out)",
        f"raw agreement (partial counted as complied): {number(result.agreement)}",
        *([f"three-way agreement: {number(result.exact)}"] if result.rater != "rule" else []),
        f"Cohen's kappa: {kappa}",
        "",
        f"{CORNER.replace('rule', result.rater):<16}" + "".join(f"{c:>10}" for c in classes),
        *(
            f"{label:<16}" + "".join(f"{result.confusion[label][c]:>10}" for c in classes)
            for label in LABELS
        ),
        "",
        f"disagreements: {len(result.disagreements)}",
    ]
    for r in result.disagreements:
        answer = " ".join((r.get("answer") or "").split())[:SNIPPET]
        lines.append(
            f"  row {r.get('row', '?')}: {r.get('kind', '')} {r.get('variant_id', '')} "
            f"[{r.get('language', '')}] {result.rater} {r[result.rater]}, label {r['label']}: "
            f"{answer}"
        )
    return "\n".join(lines)


def judge_csv(path: Path, out: Path, judge: RefusalJudge) -> Counter[str]:
    """``path``'s rows with the judge's verdict (``judge``: a label or empty) and, where it
    gave none, why (``judge_reason``), written to ``out``; the verdicts counted."""
    rows = read_labels_csv(path)
    verdicts = judge.judge([(r.get("prompt") or "", r.get("answer") or "") for r in rows])
    fields = [c for c in (*COLUMNS, *rows[0]) if c not in ("judge", "judge_reason")] if rows else []
    fields = [*dict.fromkeys(fields), "judge", "judge_reason"]
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for row, verdict in zip(rows, verdicts, strict=True):
            writer.writerow(
                row | {"judge": verdict.label or "", "judge_reason": verdict.missing_reason or ""}
            )
    return Counter(v.label or "NA" for v in verdicts)
