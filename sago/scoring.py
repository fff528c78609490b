"""Scoring generations made elsewhere: ``score(file)`` runs the stages after generation (pair
scores, mirroring, deltas, scores, summary, report) on a CSV, JSON, JSONL, Parquet file or an
inspect_ai ``.eval`` log, or on a folder of the SAGO reference code's results; the same
artifacts as ``run``. Without ``model``, Act, Prob and Ent are missing; with a local model
its teacher-forced pass scores each base response under the base and variant prompts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sago.environment import configure_environment
from sago.result import RunResult, load
from sago_core.artifacts.layout import SUMMARY_MD_FILE
from sago_core.config import RunConfig, build_config, read_config_file

if TYPE_CHECKING:
    from sago_core.external.options import ExternalSource, FormatName


def score_inputs(
    generations: Path | str,
    model: str | None = None,
    *,
    format: FormatName | None = None,
    columns: str | None = None,
    family: str | None = None,
    subtype: str | None = None,
    base_where: str | None = None,
    preset: str | None = None,
    config: Path | str | Mapping[str, Any] | None = None,
    **overrides: Any,
) -> tuple[RunConfig, ExternalSource]:
    """The run configuration and the described input of ``score``, checked but not read."""
    from sago_core.external.columns import parse_mapping
    from sago_core.external.dove import parse_base_where
    from sago_core.external.options import ExternalSource

    values: dict[str, Any] = {}
    if isinstance(config, Mapping):
        values = dict(config)
    elif config is not None:
        values = read_config_file(Path(config))
    found = build_config(preset, values, {"models": [model] if model else None, **overrides})
    source = ExternalSource(
        path=Path(generations),
        format=format,
        columns=parse_mapping(columns),
        family=family,
        subtype=subtype,
        base_where=parse_base_where(base_where),
        model=model,
        max_prompt_chars=found.max_prompt_chars,
    )
    return found, source


def pool_reference_folder(
    config: RunConfig, source: ExternalSource, say: Callable[[str], object] = print
) -> ExternalSource:
    """A folder of the SAGO reference code's results, pooled into one CSV (in the runs
    folder's cache) that is then scored as one file; says what it holds and which repeated
    runs are left out, and why."""
    from sago_core.artifacts.layout import CacheLayout
    from sago_core.errors import ConfigError
    from sago_core.external.reference_folder import pool_folder
    from sago_core.external.reference_runs import describe

    if source.format not in (None, "sago-reference"):
        raise ConfigError(
            f"{source.path} is a folder: a folder is read as the SAGO reference "
            f"code's results, not as --format {source.format}"
        )
    if source.family or source.subtype:
        raise ConfigError(
            f"{source.path} is a folder: its run folders name their families "
            "(run_<model>_<dataset>_<family>_<stamp>); --family and --subtype are for one file"
        )
    out_dir = CacheLayout.of(config.runs_dir).materialised / "reference"
    pooled = pool_folder(source.path, out_dir, source)
    say(f"Pooled {source.path}: {pooled.summary()}")
    for duplicate in pooled.duplicates:
        say(describe(duplicate))
    return source.model_copy(update={"path": pooled.path, "format": "sago-reference"})


def score(
    generations: Path | str,
    model: str | None = None,
    *,
    say: Callable[[str], object] = print,
    **settings: Any,
) -> RunResult:
    """Score ``generations`` (a file, or a folder of the reference code's results) and
    return the finished run. ``model``: a local ``BACKEND:ID`` whose teacher-forced pass
    adds Act, Prob and Ent; ``settings``, checked by ``sago.scoring.score_inputs``:
    ``format`` (the file's format; default: from its content), ``columns`` (``schema=file``
    column pairs, ``prompt_text=question,response_text=out``), ``family``/``subtype`` (where
    the file does not carry them), ``base_where`` (which rows are each sample's base: DOVE
    dimensions, or ``task=NAME`` for lm-eval and inspect logs), ``preset``, ``config`` and
    config keys (``runs_dir``, ``run_id``, ``bertscore``, ...)."""
    from sago_core.backends.hub_check import require_models
    from sago_core.backends.model_source import parse_model_spec, resolve_local_model
    from sago_core.errors import InputError
    from sago_core.external.read import read_external
    from sago_core.registry.backends import local_backends

    found, source = score_inputs(generations, model, **settings)
    # before any work
    require_models(found.bertscore.model, [source.model, found.register_judge.model])
    if source.path.is_dir():
        source = pool_reference_folder(found, source, say)
    table = read_external(source)  # every problem of the file, before Prefect starts
    if source.format is not None and table.format != source.format:
        raise InputError(
            f"is not in the {source.format!r} format (it reads as {table.format!r})",
            file=str(source.path),
        )
    if source.model and parse_model_spec(source.model).backend in local_backends():
        resolve_local_model(parse_model_spec(source.model).model_id)
    configure_environment(found)
    from sago.flows.score import score as score_flow

    run_dir = Path(score_flow(source, found))
    say((run_dir / SUMMARY_MD_FILE).read_text(encoding="utf-8"))
    for note, count in table.notes.items():
        say(f"{note}: {count}")
    say(f"Read {len(table.rows)} responses as {table.format!r} from {source.path}")
    return load(run_dir)
