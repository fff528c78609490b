"""Stage: responses to the base prompt and every kept variant -> generations.parquet; greedy,
or at T > 0 sampled, each row with its own seed (``sample_seeds.sample_seed``, sample 0).

The replay rows (the noise floor: each base prompt asked again) are generated in a backend
call of their own, after the call holding the bases and variants: a replay never shares a
batch with its base, so it gets other batch companions and other padding. The noise floor
therefore includes what batching and padding change by themselves (on a GPU, batched
kernels need not be bitwise equal across batch shapes), not only a rerun's noise. A backend
that says ``repeats_within_call`` (the API backend: no batches or padding, and it tells a
replay from its base only when both arrive in one call, its request key counting repeats
within a call) gets the replay in the call of its base. Rows keep their order whatever the calls.

A prompt text that does not fit the model's context (its tokens plus ``max_new_tokens``
over ``Backend.context_window``) is not asked: its row is a failure whose reason gives its
token count and the window, and so is every row of a prompt whose base does not fit (its
variants have no base answer to compare with). The run goes on; one warning per stage
names the first such rows by file and row, and the setting to change.

``answer_text`` is the response after its reasoning block (axes/reasoning.py), the text the
pair scores and mirroring compare; ``response_text`` stays the raw decoded response.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.row_cache import KEY, RowCache, digest
from sago_core.artifacts.schemas import GENERATIONS, conform
from sago_core.axes.reasoning import answer_text
from sago_core.backends.protocol import Backend, Generation, Sampling
from sago_core.backends.target import ModelTarget
from sago_core.config import GenerationSettings
from sago_core.data.prompt import split_source
from sago_core.sample_seeds import sample_seed
from sago_core.vocabulary import BASE_FAMILY, BASE_VARIANT_ID, REPLAY_FAMILY, VARIANT_COLUMNS

log = logging.getLogger("sago.generation")


def replay_apart(backend: Backend, families: list[str]) -> list[list[int]]:
    """Row indices per backend call: every non-replay row first, then the replay rows in a
    call of their own (one call when there is no replay, or the backend needs one call)."""
    replay = [i for i, family in enumerate(families) if family == REPLAY_FAMILY]
    rest = [i for i, family in enumerate(families) if family != REPLAY_FAMILY]
    if not replay or not rest or getattr(backend, "repeats_within_call", False):
        return [list(range(len(families)))]
    return [rest, replay]


def generation_requests(prompts: pl.DataFrame, variants: pl.DataFrame) -> pl.DataFrame:
    """One row per prompt text to answer: the base (variant_id 'base') plus kept variants."""
    base = prompts.select(
        "dataset",
        "prompt_id",
        pl.lit(BASE_VARIANT_ID).alias("variant_id"),
        pl.lit(BASE_FAMILY).alias("family"),
        pl.lit(BASE_FAMILY).alias("subtype"),
        pl.lit(0.0).alias("strength"),
        pl.lit("global").alias("position"),
        pl.col("prompt").alias("prompt_text"),
    )
    kept = variants.filter(pl.col("kept")).select(
        "dataset", "prompt_id", "variant_id", *VARIANT_COLUMNS, pl.col("text").alias("prompt_text")
    )
    return pl.concat([base, kept]).sort(["dataset", "prompt_id", "variant_id"])


Origin = tuple[str, int | None, str]  # file (or dataset), row, "prompt X, variant Y"

# How many of the texts that do not fit the one warning of a stage names (the rest counted).
NAMED_UNFIT = 5


@dataclass(frozen=True)
class ContextFit:
    """Which texts fit the model's context with ``max_new_tokens`` more: ``over`` holds each
    text's prompt tokens where it does not fit (None where it fits or cannot be counted);
    ``setting``: the setting that sets ``window`` when raising it would help
    (``vllm.max_model_len``), None when the model's own context is the limit."""

    max_new_tokens: int
    window: int | None = None
    setting: str | None = None
    over: tuple[int | None, ...] = ()

    @property
    def context(self) -> str:
        if self.setting:
            return f"the context of {self.window} tokens ({self.setting})"
        return f"the model's context of {self.window} tokens"

    def reason(self, i: int, what: str = "prompt") -> str | None:
        """Why text i is not asked (None: it fits)."""
        if not self.over or self.over[i] is None:
            return None
        return (
            f"{what} takes {self.over[i]} tokens; with max_new_tokens {self.max_new_tokens} "
            f"that exceeds {self.context}"
        )

    def hint(self, tokens_setting: str) -> str:
        """What to change for the texts to fit."""
        if self.setting:
            own = "where the model's own context is longer"
            return f"raise {self.setting} ({own}) or lower {tokens_setting}"
        return f"lower {tokens_setting} or use a model with a longer context"


def check_fit(backend: Backend, texts: list[str], max_new_tokens: int) -> ContextFit:
    """Which of ``texts`` fit the model's context; a backend that cannot tell (no window, or
    no token counts) fits them all. Each distinct text is counted once."""
    window = backend.context_window() if texts else None
    if window is None:
        return ContextFit(max_new_tokens)
    distinct = list(dict.fromkeys(texts))
    lengths = backend.prompt_lengths(distinct)
    if lengths is None:
        return ContextFit(max_new_tokens)
    over = {t: n for t, n in zip(distinct, lengths, strict=True) if n + max_new_tokens > window}
    setting = getattr(backend, "context_setting", None)
    return ContextFit(
        max_new_tokens,
        window,
        setting() if callable(setting) and over else None,
        tuple(over.get(t) for t in texts),
    )


def warn_unfit(
    fit: ContextFit, origins: list[Origin], tokens_setting: str, what: str, more_rows: int = 0
) -> None:
    """One warning for a stage's texts that do not fit: how many, the first few by file,
    row and token count, and the setting to change (``more_rows``: rows not asked only
    because their base does not fit)."""
    unfit: list[tuple[Origin, int]] = [
        (origins[i], n) for i, n in enumerate(fit.over) if n is not None
    ]
    if not unfit:
        return
    # Name as many files and rows as it can: each row's first text before its others.
    firsts: list[tuple[Origin, int]] = []
    others: list[tuple[Origin, int]] = []
    seen: set[tuple[str, int | None]] = set()
    for origin, n in unfit:
        (others if origin[:2] in seen else firsts).append((origin, n))
        seen.add(origin[:2])
    unfit = firsts + others
    named = "; ".join(
        f"{', '.join(_where(file, row))} ({label}): {n} tokens"
        for (file, row, label), n in unfit[:NAMED_UNFIT]
    )
    rest = f"; and {len(unfit) - NAMED_UNFIT} more" if len(unfit) > NAMED_UNFIT else ""
    variants = (
        f" (and {more_rows} row(s) of their prompts, whose base does not fit)" if more_rows else ""
    )
    log.warning(
        "%d %s(s) do not fit %s with max_new_tokens %d: not asked, their rows missing with "
        "the reason%s: %s%s; %s",
        len(unfit),
        what,
        fit.context,
        fit.max_new_tokens,
        variants,
        named,
        rest,
        fit.hint(tokens_setting),
    )


def _where(file: str, row: int | None) -> list[str]:
    return [f"file {file}", *([f"row {row}"] if row is not None else [])]


def unanswerable(requests: pl.DataFrame, fit: ContextFit) -> list[str | None]:
    """Each request's failure reason when it cannot be asked: its own text does not fit,
    or its prompt's base does not (its variants would have no base answer to compare
    with); None for the others."""
    own = [fit.reason(i) for i in range(requests.height)]
    keys = requests.select("dataset", "prompt_id", "variant_id").rows()
    base = {(d, p): r for (d, p, v), r in zip(keys, own, strict=True) if v == BASE_VARIANT_ID and r}
    return [
        r or (f"base {base[(d, p)]}: no base answer to compare with" if (d, p) in base else None)
        for (d, p, _), r in zip(keys, own, strict=True)
    ]


def prompt_origins(requests: pl.DataFrame, prompts: pl.DataFrame) -> list[Origin]:
    """Where each request's prompt came from, for error messages ("file, row N")."""
    joined = requests.join(
        prompts.select("dataset", "prompt_id", "source"), on=["dataset", "prompt_id"], how="left"
    )
    origins: list[Origin] = []
    for source, dataset, pid, vid in joined.select(
        "source", "dataset", "prompt_id", "variant_id"
    ).iter_rows():
        file, row = split_source(source or dataset)
        origins.append((file, row, f"prompt {pid}, variant {vid}"))
    return origins


# What a cached answer row holds (row_cache.py); the request's own columns come from the run.
# The version changes when what an answer row means changes (it is part of every row's scope).
ANSWER_ROW_VERSION = 1
ANSWER_COLUMNS = ["response_text", "answer_text", "response_token_ids", "finish_reason", "engine"]


def model_scope(target: ModelTarget) -> dict[str, Any]:
    """The model a cached row came from: its identity (weights digest, revision or
    endpoint) and every option of its backend, not where its files are on this machine."""
    return target.model_dump(mode="json", exclude={"source", "devices"})


def answer_scope(target: ModelTarget, settings: GenerationSettings) -> dict[str, Any]:
    """What every answer of a stage depends on besides its own row: the model and the
    decoding settings, not the batch sizes."""
    decoding = settings.model_dump(mode="json", exclude={"batch_size", "samples", "temperatures"})
    return {"model": model_scope(target), "decoding": decoding, "version": ANSWER_ROW_VERSION}


def answer_cache(cache_root: Path, target: ModelTarget, settings: GenerationSettings) -> RowCache:
    return RowCache(
        cache_root,
        "generations",
        answer_scope(target, settings),
        {c: GENERATIONS[c] for c in ANSWER_COLUMNS},
    )


def answer_keys(requests: pl.DataFrame, sampling: Sampling | None) -> list[str]:
    """Each request's row key: its prompt text, whether it is a replay (asked apart), and
    its seed when sampled."""
    seeds: list[int | None] = list(sampling.seeds) if sampling else [None] * requests.height
    return [
        digest([text, family == REPLAY_FAMILY, seed])
        for text, family, seed in zip(
            requests["prompt_text"], requests["family"], seeds, strict=True
        )
    ]


def generate_responses(
    backend: Backend,
    model: str,
    prompts: pl.DataFrame,
    variants: pl.DataFrame,
    settings: GenerationSettings,
    reuse: RowCache | None = None,
) -> pl.DataFrame:
    """Every request's answer; with ``reuse``, only the rows no run answered before are
    asked (their answers stored there), the others read back."""
    requests = generation_requests(prompts, variants)
    if reuse is None:
        return conform(answer_requests(backend, model, prompts, requests, settings), GENERATIONS)
    keyed = requests.with_columns(
        pl.Series(KEY, answer_keys(requests, sampling_request(settings, model, requests)))
    )
    cached = reuse.get(keyed[KEY].to_list())
    asked = keyed.filter(~pl.col(KEY).is_in(cached[KEY].implode()))
    answered = answer_requests(backend, model, prompts, asked, settings)
    reuse.put(answered.filter(pl.col("failure_reason").is_null()).select(KEY, *ANSWER_COLUMNS))
    reread = keyed.join(cached, on=KEY, how="inner").with_columns(
        pl.lit(None, pl.String).alias("failure_reason"), pl.lit(model).alias("model")
    )
    frame = pl.concat([answered, reread], how="diagonal_relaxed")
    return conform(frame, GENERATIONS).sort(["dataset", "prompt_id", "variant_id"])


def answer_requests(
    backend: Backend,
    model: str,
    prompts: pl.DataFrame,
    requests: pl.DataFrame,
    settings: GenerationSettings,
) -> pl.DataFrame:
    """``requests`` with their answers, asked of ``backend``; with no request the backend
    is not touched (a shard whose every row was cached loads no model)."""
    texts = requests["prompt_text"].to_list()
    if not texts:
        return requests.with_columns(
            pl.lit(model).alias("model"),
            *(pl.lit(None, GENERATIONS[c]).alias(c) for c in [*ANSWER_COLUMNS, "failure_reason"]),
        )
    fit = check_fit(backend, texts, settings.max_new_tokens)
    failures = unanswerable(requests, fit)
    own = sum(n is not None for n in fit.over)
    more_rows = sum(f is not None for f in failures) - own
    warn_unfit(
        fit,
        prompt_origins(requests, prompts),
        "generation.max_new_tokens",
        "prompt text",
        more_rows,
    )
    sampling = sampling_request(settings, model, requests)
    families = requests["family"].to_list()
    outputs = answer_apart(backend, texts, families, settings, sampling, failures)
    return requests.with_columns(pl.lit(model).alias("model"), *answer_columns(backend, outputs))


def answer_apart(
    backend: Backend,
    texts: list[str],
    families: list[str],
    settings: GenerationSettings,
    sampling: Sampling | None,
    failures: list[str | None] | None = None,
) -> list[Generation]:
    """The answers to ``texts`` in the rows' order, asked in the calls ``replay_apart``
    makes (``sampling``: one seed per text; None: greedy). A text with a reason in
    ``failures`` is not asked: its answer is a failure with that reason; without
    ``failures``, the texts that do not fit the model's context are the failures."""
    if failures is None:
        fit = check_fit(backend, texts, settings.max_new_tokens)
        failures = [fit.reason(i) for i in range(len(texts))]
    slots: list[Generation | None] = [
        None if reason is None else Generation("", (), "failed", reason) for reason in failures
    ]
    asked = [i for i, reason in enumerate(failures) if reason is None]
    for part in replay_apart(backend, [families[i] for i in asked]):
        call = [asked[j] for j in part]
        if not call:
            continue
        batch = [texts[i] for i in call]
        answers = (
            backend.generate(batch, settings.max_new_tokens, settings.batch_size)
            if sampling is None
            else backend.generate(
                batch, settings.max_new_tokens, settings.batch_size, sampling.rows(call)
            )
        )
        if len(answers) != len(call):
            raise RuntimeError(f"backend {backend.name} answered {len(answers)} of {len(call)}")
        for i, answer in zip(call, answers, strict=True):
            slots[i] = answer
    return [o for o in slots if o is not None]


def answer_columns(backend: Backend, outputs: list[Generation]) -> list[pl.Series]:
    """What an answer adds to its request row: the texts, token ids, finish and failure
    reasons and the ``engine`` record."""
    responses = [None if o.failure_reason else o.response_text for o in outputs]
    return [
        pl.Series("response_text", responses, dtype=pl.String),
        pl.Series("answer_text", [answer_text(r) for r in responses], dtype=pl.String),
        pl.Series(
            "response_token_ids",
            [list(o.response_token_ids) for o in outputs],
            dtype=pl.List(pl.Int32),
        ),
        pl.Series("finish_reason", [o.finish_reason for o in outputs], dtype=pl.String),
        pl.Series("failure_reason", [o.failure_reason for o in outputs], dtype=pl.String),
        pl.Series("engine", engine_records(backend.describe(), outputs), dtype=pl.String),
    ]


def sampling_request(
    settings: GenerationSettings, model: str, requests: pl.DataFrame
) -> Sampling | None:
    """The sampling of ``requests`` (one sample each, sample index 0); None when greedy."""
    if not settings.sampled:
        return None
    seeds = tuple(
        sample_seed(settings.seed, model, dataset, prompt_id, variant_id, 0)
        for dataset, prompt_id, variant_id in requests.select(
            "dataset", "prompt_id", "variant_id"
        ).iter_rows()
    )
    return Sampling(settings.temperature, settings.top_p, settings.top_k, seeds)


def engine_records(engine: dict[str, Any], outputs: list[Generation]) -> list[str]:
    """Each row's ``engine`` JSON: the backend's description, plus for an API answer what
    the provider says answered it (``Generation.served``) and for a sampled answer the
    sampling applied (``Generation.sampling``, under "sampling")."""
    plain = json.dumps(engine, sort_keys=True)
    records = []
    for o in outputs:
        extra: dict[str, Any] = dict(o.served or {})
        if o.sampling is not None:
            extra["sampling"] = o.sampling
        records.append(json.dumps({**engine, **extra}, sort_keys=True) if extra else plain)
    return records
