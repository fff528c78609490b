"""peer_metrics.parquet: the peers' indices over a run's own artifacts.

Inputs, all already written by the run: ``instances.parquet`` (whether each base and variant
answer is right), ``deltas.parquet`` (the ``bert`` axis) and the models' ``analysis.parquet``
(the teacher-forced pass, for ``posix_base_column``); ``posix`` reads posix_matrix.parquet
(``peer_metrics/full_matrix.py``) and is NA with the reason without it. One row per (model,
dataset, family, index), the replay (sago's noise floor, no prompt variant) left out
everywhere. At K > 1 samples per prompt text a prompt's Y is the share of its K samples
that are right, ``coverage`` giving the same index between the base and the replay (the
sampling noise on the same instances), and ``posix_base_column`` averages psi over the K
base answers of sample_analysis.parquet. docs/peer-metrics.md states each definition, the
scopes, the K > 1 rules and the missing values.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import polars as pl

from sago_core.artifacts.schemas import PEER_METRICS, conform
from sago_core.peer_metrics.full_matrix import posix_full, scoped, with_kept
from sago_core.peer_metrics.multi_prompt import avg_p, cps, max_p
from sago_core.peer_metrics.pdr import pdr
from sago_core.peer_metrics.posix import posix_psi
from sago_core.peer_metrics.pss import pss
from sago_core.peer_metrics.sources import (
    AVG_P,
    COVERAGE,
    CPS,
    MAX_P,
    PDR,
    POSIX,
    POSIX_BASE_COLUMN,
    PSS_BERT_TO_BASE,
    PSS_CORRECT,
    SOURCES,
)
from sago_core.statistics.intervals import MIN_PROMPTS
from sago_core.statistics.tails import ALL_FAMILIES
from sago_core.vocabulary import BASE_FAMILY, BASE_VARIANT_ID, POOLED, REPLAY_FAMILY

BERT_AXIS = "bert"
INSTANCE = ["model", "dataset", "prompt_id"]
ROW = [*INSTANCE, "variant_id"]
NO_ANALYSIS = "no analysis.parquet (the teacher-forced pass did not run)"
NO_LOGPROB = "no teacher-forced log-probability of the base answer"
NO_TOKENS = "the base answer has no tokens (L = 0)"
NO_VARIANT_LOGPROB = "no variant prompt with a teacher-forced log-probability"
FEW_VERDICTS = "fewer than two prompts of one instance with a verdict"
FEW_BERTSCORES = "no variant answer with a BERTScore against its base answer"
NO_PAIRED_VERDICTS = "no variant with verdicts on both its base and its own answer"
BASE_NEVER_RIGHT = "the base answer is never right on these instances (PDR divides by it)"
FEW_TEMPLATES = "fewer than two prompt templates with a verdict"
NO_SHARED_INSTANCE = "no instance answered under every template"


BERT_AT_K = (
    "not defined at K > 1: the bert axis holds the excess E = D - (W_base + W_variant) / 2 "
    "over resampling, not the BERTScore F1 of one answer to one base answer"
)
POSIX_AT_K = (
    "not computed at K > 1: analysis.parquet teacher-forces sample 0's base answer only, one "
    "of the K; POSIX over samples reads sample_analysis.parquet, not given"
)
NO_REPLAY_SHARE = "the replay has no verdicts on these instances: noise not measured"
SAMPLED = "share_right_base"  # instances' column at K > 1 (stages/instances.SAMPLED_COLUMNS)


def few_shared(count: int, needed: int) -> str:
    """The reason when templates share too few instances to be compared."""
    return (
        f"{count} instance(s) answered under every template; at least {needed} needed to "
        "compare templates"
    )


Measure = tuple[float | None, int, str | None]  # value, n, missing_reason


@dataclass(frozen=True)
class Scope:
    model: str
    dataset: str  # or POOLED
    family: str  # or ALL_FAMILIES

    def of(self, frame: pl.DataFrame) -> pl.DataFrame:
        rows = frame.filter(pl.col("model") == self.model)
        if self.dataset != POOLED:
            rows = rows.filter(pl.col("dataset") == self.dataset)
        if self.family != ALL_FAMILIES:
            rows = rows.filter(pl.col("family").is_in([self.family, BASE_FAMILY]))
        return rows


def _most_common(reasons: list[str | None], default: str) -> str:
    counts = Counter(r for r in reasons if r is not None)
    if not counts:
        return default
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[0][0]


def _verdicts(instances: pl.DataFrame) -> pl.DataFrame:
    """One verdict per (instance, prompt): the base prompt's (family ``base``) and each
    variant's, as ``y`` in {0, 1} (null: unknown, ``reason`` says why); at K > 1 ``y`` is
    the prompt's share of right samples."""
    rows = instances.filter(pl.col("family") != REPLAY_FAMILY)
    sampled = SAMPLED in rows.columns
    base_y, variant_y, why = (
        ("share_right_base", "share_right_variant", "flip_missing_reason")
        if sampled
        else ("base_correct", "variant_correct", "correct_missing_reason")
    )
    # at K > 1 a variant without verdicts (a language variant) leaves its row's base share
    # null: the base's share is the first one known
    first = pl.col(base_y).drop_nulls().first() if sampled else pl.col(base_y).first()
    base = (
        rows.sort(ROW)
        .group_by(INSTANCE, maintain_order=True)
        .agg(first.alias("correct"), pl.col(why).first().alias("reason"))
        .with_columns(
            pl.lit(BASE_VARIANT_ID).alias("variant_id"), pl.lit(BASE_FAMILY).alias("family")
        )
    )
    variants = rows.select(
        *ROW,
        "family",
        pl.col(variant_y).alias("correct"),
        pl.col(why).alias("reason"),
    )
    columns = [*ROW, "family", "correct", "reason"]
    both = pl.concat([base.select(columns), variants.select(columns)])
    return both.with_columns(pl.col("correct").cast(pl.Float64).alias("y"))


def _bertscores(deltas: pl.DataFrame) -> pl.DataFrame:
    """Y = BERTScore F1 against the base answer per variant (the bert axis' delta + 1) and
    1 for the base prompt (its answer against itself), per instance."""
    rows = deltas.filter((pl.col("axis") == BERT_AXIS) & (pl.col("family") != REPLAY_FAMILY))
    finite = pl.col("delta").is_not_null() & pl.col("delta").is_finite()
    variants = rows.select(
        *ROW,
        "family",
        pl.when(finite).then(pl.col("delta") + 1.0).alias("y"),
        pl.col("missing_reason").alias("reason"),
    )
    base = (
        variants.select(INSTANCE)
        .unique(maintain_order=True)
        .with_columns(
            pl.lit(BASE_VARIANT_ID).alias("variant_id"),
            pl.lit(BASE_FAMILY).alias("family"),
            pl.lit(1.0).alias("y"),
            pl.lit(None, pl.String).alias("reason"),
        )
    )
    return pl.concat([base, variants])


def _logprobs(analysis: pl.DataFrame, deltas: pl.DataFrame) -> pl.DataFrame:
    """log P(base answer | prompt) per prompt, with the variant's family (from deltas) and
    the base answer's token count."""
    families = deltas.select(*ROW, "family").unique(ROW, keep="first")
    rows = analysis.join(families, on=ROW, how="left").with_columns(
        pl.when(pl.col("variant_id") == BASE_VARIANT_ID)
        .then(pl.lit(BASE_FAMILY))
        .otherwise(pl.col("family"))
        .alias("family")
    )
    finite = pl.col("logprob").is_not_null() & pl.col("logprob").is_finite()
    sample = ["sample"] if "sample" in rows.columns else []  # sample_analysis at K > 1
    return rows.filter(pl.col("family").is_not_null() & (pl.col("family") != REPLAY_FAMILY)).select(
        *ROW,
        *sample,
        "family",
        pl.when(finite).then(pl.col("logprob")).alias("logprob"),
        "n_response_tokens",
        pl.coalesce(pl.col("missing_reason"), pl.lit(NO_LOGPROB)).alias("reason"),
    )


def _pss(scored: pl.DataFrame, default: str) -> Measure:
    known = scored.filter(pl.col("y").is_not_null())
    groups = known.group_by(INSTANCE, maintain_order=True).agg(pl.col("y"))
    values = [v for v in (pss(ys) for ys in groups["y"].to_list()) if v is not None]
    if not values:
        reasons = scored.filter(pl.col("y").is_null())["reason"].to_list()
        return None, 0, _most_common(reasons, default)
    return sum(values) / len(values), len(values), None


def _psi(rows: pl.DataFrame) -> tuple[float | None, str | None]:
    """psi of one instance's base answer (one base sample's at K > 1), or why not."""
    base = rows.filter(pl.col("variant_id") == BASE_VARIANT_ID)
    variants = rows.filter(pl.col("variant_id") != BASE_VARIANT_ID)
    if base.height == 0 or base["logprob"][0] is None:
        return None, base["reason"][0] if base.height else NO_LOGPROB
    under_variants = variants["logprob"].drop_nulls().to_list()
    tokens = int(base["n_response_tokens"][0] or 0)
    psi = posix_psi(under_variants, base["logprob"][0], tokens)
    if psi is None:
        return None, NO_TOKENS if tokens <= 0 else NO_VARIANT_LOGPROB
    return psi, None


def _posix(rows: pl.DataFrame | None) -> Measure:
    """Mean psi over instances; at K > 1 (``rows`` from sample_analysis, with ``sample``) an
    instance's psi is the mean over its base samples' answers of each one's psi."""
    if rows is None or rows.height == 0:
        return None, 0, NO_ANALYSIS
    values: list[float] = []
    reasons: list[str | None] = []
    for instance in rows.partition_by(INSTANCE, maintain_order=True):
        parts = (
            instance.sort("sample").partition_by("sample", maintain_order=True)
            if "sample" in instance.columns
            else [instance]
        )
        measured = [_psi(part) for part in parts]
        psis = [psi for psi, _ in measured if psi is not None]
        if not psis:
            reasons += [why for _, why in measured]
            continue
        values.append(sum(psis) / len(psis))
    if not values:
        return None, 0, _most_common(reasons, NO_VARIANT_LOGPROB)
    return sum(values) / len(values), len(values), None


def _shared(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows of the instances present under every template (variant_id) of ``rows``:
    templates are compared on the same instances ("State of What Art?", PromptBench)."""
    templates = rows["variant_id"].n_unique()
    instances = (
        rows.group_by(INSTANCE)
        .agg(pl.col("variant_id").n_unique().alias("templates"))
        .filter(templates=templates)
        .select(INSTANCE)
    )
    return rows.join(instances, on=INSTANCE, how="semi")


def _instances_in(rows: pl.DataFrame) -> int:
    return rows.select(INSTANCE).unique().height


def _pdr(verdicts: pl.DataFrame, min_shared: int, sampled: bool = False) -> Measure:
    base = verdicts.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        *INSTANCE, pl.col("y").alias("y_base")
    )
    pairs = (
        verdicts.filter(pl.col("variant_id") != BASE_VARIANT_ID)
        .join(base, on=INSTANCE, how="left")
        .filter(pl.col("y").is_not_null() & pl.col("y_base").is_not_null())
    )
    if pairs.height == 0:
        return None, 0, _most_common(verdicts["reason"].to_list(), NO_PAIRED_VERDICTS)
    pairs = _shared(pairs)
    if pairs.height == 0:
        return None, 0, NO_SHARED_INSTANCE
    if _instances_in(pairs) < min_shared:
        return None, 0, few_shared(_instances_in(pairs), min_shared)
    rates = []
    for template in pairs.partition_by("variant_id", maintain_order=True):
        rate = (
            pdr(template["y_base"].to_list(), template["y"].to_list())  # shares of samples
            if sampled
            else pdr(
                [y == 1.0 for y in template["y_base"].to_list()],
                [y == 1.0 for y in template["y"].to_list()],
            )
        )
        if rate is not None:
            rates.append(rate)
    if not rates:
        return None, 0, BASE_NEVER_RIGHT
    return sum(rates) / len(rates), len(rates), None


def _multi_prompt(verdicts: pl.DataFrame, min_shared: int) -> dict[str, Measure]:
    known = verdicts.filter(pl.col("y").is_not_null())
    templates = known["variant_id"].n_unique()
    if templates < 2:
        reason = _most_common(verdicts["reason"].to_list(), FEW_TEMPLATES)
        reason = FEW_TEMPLATES if templates else reason
        return {name: (None, templates, reason) for name in (MAX_P, AVG_P, CPS)}
    shared = _shared(known)
    if shared.height == 0:
        return {name: (None, 0, NO_SHARED_INSTANCE) for name in (MAX_P, AVG_P, CPS)}
    if _instances_in(shared) < min_shared:
        reason = few_shared(_instances_in(shared), min_shared)
        return {name: (None, 0, reason) for name in (MAX_P, AVG_P, CPS)}
    accuracies = shared.group_by("variant_id", maintain_order=True).agg(pl.col("y").mean())
    values = accuracies["y"].to_list()
    best, mean = max_p(values), avg_p(values)
    n = len(values)
    return {MAX_P: (best, n, None), AVG_P: (mean, n, None), CPS: (cps(best, mean), n, None)}


def _measures(
    scope: Scope,
    verdicts: pl.DataFrame,
    bertscores: pl.DataFrame,
    logprobs: pl.DataFrame | None,
    min_shared: int,
    sampled: bool = False,
    posix: Measure = (None, 0, None),
) -> dict[str, Measure]:
    """``posix``: the full matrix's, measured apart (``full_matrix.posix_full``)."""
    scoped = scope.of(verdicts)
    if sampled:  # K > 1: neither has a meaning over samples here (module docstring)
        return {
            PSS_CORRECT: _pss(scoped, FEW_VERDICTS),
            PSS_BERT_TO_BASE: (None, 0, BERT_AT_K),
            POSIX: posix,
            POSIX_BASE_COLUMN: _posix(scope.of(logprobs))
            if logprobs is not None and "sample" in logprobs.columns
            else (None, 0, POSIX_AT_K),
            PDR: _pdr(scoped, min_shared, sampled=True),
            **_multi_prompt(scoped, min_shared),
        }
    return {
        PSS_CORRECT: _pss(scoped, FEW_VERDICTS),
        PSS_BERT_TO_BASE: _pss(scope.of(bertscores), FEW_BERTSCORES),
        POSIX: posix,
        POSIX_BASE_COLUMN: _posix(scope.of(logprobs) if logprobs is not None else None),
        PDR: _pdr(scoped, min_shared),
        **_multi_prompt(scoped, min_shared),
    }


def replay_noise(instances: pl.DataFrame) -> tuple[float | None, float | None]:
    """K > 1: PSS and PDR between the base and the replay (the base asked again, true effect
    0) on the instances with both shares of right samples: the mean |Y_base - Y_replay| and
    1 - sum Y_replay / sum Y_base (None: no such instance, or the base never right)."""
    pairs = (
        instances.group_by(INSTANCE)
        .agg(
            pl.col("share_right_base").drop_nulls().first().alias("b"),
            pl.col("share_right_replay").drop_nulls().first().alias("r"),
        )
        .drop_nulls(["b", "r"])
    )
    if pairs.height == 0:
        return None, None
    gap = float((pairs["b"] - pairs["r"]).abs().mean())  # type: ignore[arg-type]
    return gap, pdr(pairs["b"].to_list(), pairs["r"].to_list())


def _said(value: float | None, what: str) -> str:
    return f"{what} = {value:.3f}" if value is not None else NO_REPLAY_SHARE


def _coverage(instances: pl.DataFrame) -> dict[str, str | None]:
    """K > 1: what each index is over, with the sampling noise on these instances."""
    k = [int(v) for v in instances["k_base"].drop_nulls().unique().sort()]
    over = f"over K = {'/'.join(map(str, k)) or '?'} samples per prompt"
    gap, drop = replay_noise(instances)
    pss_noise, pdr_noise = _said(gap, "mean |Y_base - Y_replay|"), _said(drop, "the replay's PDR")
    if gap is not None and drop is None:
        pdr_noise = "the replay's PDR is undefined (the base is never right)"
    return {
        **COVERAGE,
        PSS_CORRECT: f"{over}: Y = the share of a prompt's samples that are right; sampling "
        f"noise on these instances: {pss_noise}",
        PDR: f"{over}: the templates' shares of right samples; sampling noise on these "
        f"instances: {pdr_noise}",
        POSIX_BASE_COLUMN: f"{over}: an instance's psi is the mean over its K base answers "
        f"of each one's psi (each answer teacher-forced under every prompt: no sampling noise "
        f"to subtract, the answers' spread is part of the index); {COVERAGE[POSIX_BASE_COLUMN]}",
        **{
            name: f"{over}: a template's accuracy is the mean share of its samples that are "
            "right (MaxP, the largest of noisy accuracies, is biased up by sampling noise)"
            for name in (MAX_P, AVG_P, CPS)
        },
    }


def _scopes(deltas: pl.DataFrame) -> list[Scope]:
    variants = deltas.filter(pl.col("family") != REPLAY_FAMILY)
    scopes = []
    for model in sorted(variants["model"].unique().to_list()):
        rows = variants.filter(pl.col("model") == model)
        datasets = [*sorted(rows["dataset"].unique().to_list()), POOLED]
        families = [ALL_FAMILIES, *sorted(rows["family"].unique().to_list())]
        scopes += [Scope(model, d, f) for d in datasets for f in families]
    return scopes


def peer_metrics(
    instances: pl.DataFrame,
    deltas: pl.DataFrame,
    analysis: pl.DataFrame | None,
    min_shared: int = MIN_PROMPTS,
    posix_matrix: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Every index per (model, dataset incl. __pooled__, family incl. __all__).
    ``min_shared``: PDR and MaxP/AvgP/CPS compare templates on the instances every template
    answered; with fewer than this many such instances they are NA with the count (a
    template right on the one instance it shares would otherwise set MaxP = 1).
    ``posix_matrix``: every model's posix_matrix.parquet (None: ``posix`` is NA)."""
    verdicts = _verdicts(instances)
    bertscores = _bertscores(deltas)
    logprobs = _logprobs(analysis, deltas) if analysis is not None else None
    sampled = SAMPLED in instances.columns  # K > 1 (module docstring)
    posix_matrix = with_kept(posix_matrix) if posix_matrix is not None else None
    rows = []
    for scope in _scopes(deltas):
        matrix = (
            None
            if posix_matrix is None
            else scoped(posix_matrix, scope.model, scope.dataset, scope.family)
        )
        value, n, reason, full_coverage = posix_full(matrix, sampled)
        full = (value, n, reason)
        measures = _measures(scope, verdicts, bertscores, logprobs, min_shared, sampled, full)
        coverage = {**(_coverage(scope.of(instances)) if sampled else COVERAGE)}
        coverage[POSIX] = full_coverage
        for index, (value, n, reason) in measures.items():
            rows.append(
                {
                    "model": scope.model,
                    "dataset": scope.dataset,
                    "family": scope.family,
                    "index": index,
                    "value": value,
                    "n": n,
                    "coverage": coverage[index],
                    "source": SOURCES[index],
                    "missing_reason": reason,
                }
            )
    frame = pl.DataFrame(rows, schema=PEER_METRICS) if rows else pl.DataFrame(schema=PEER_METRICS)
    return conform(frame, PEER_METRICS)
