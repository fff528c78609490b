"""Finished runs side by side: ``compare(runs, mode)``.

``page``: one HTML report across several runs (rankings, reversals); ``paired``: the paired
tests of two runs over the same prompts (paired t-test, Wilcoxon, bootstrap CI and an
equivalence test per dataset and axis: is B less stable than A?); ``transfer``: two runs of
the same design before and after ``sago train``, and whether the stability gain carried over
to the families, prompts and datasets the training held out (the split is the training's
own, read from the trained model's folder, or given as ``split``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sago.result import check_finished_run, run_folder
from sago_core.errors import ConfigError

Mode = Literal["page", "paired", "transfer"]
MODES: tuple[Mode, ...] = ("page", "paired", "transfer")
COMPARISON_PAGE = Path("comparison.html")  # the page's default (written where sago runs)
TRANSFER_TABLE = Path("transfer.parquet")
SUFFIX = {"page": ".html", "paired": ".parquet", "transfer": ".parquet"}


@dataclass(frozen=True)
class Comparison:
    """What ``compare`` wrote: its main file (the page or the table), the Markdown text of a
    table (None for a page), and the warnings it printed."""

    mode: Mode
    path: Path
    text: str | None
    warnings: tuple[str, ...]


def compare(
    runs: Sequence[Path | str],
    mode: Mode = "page",
    out: Path | str | None = None,
    *,
    margin: float | None = None,
    allow_different_configs: bool = False,
    allow_different_sampling: bool = False,
    allow_different_encoders: bool = False,
    strict_identity: bool = False,
    split: Path | str | None = None,
    correctness_margin: float | None = None,
    say: Callable[[str], object] = print,
) -> Comparison:
    """Compare finished runs (folders or store URLs) as ``mode`` says and write the result to
    ``out`` (default ``comparison.html``, ``paired.parquet`` or ``transfer.parquet``; its
    suffix must match what the mode writes). ``say`` hears what the command line prints."""
    from sago_core.artifacts.layout import PAIRED_FILE

    if mode not in MODES:
        raise ConfigError(f"compare: mode {mode!r}; choose from {', '.join(MODES)}")
    folders = [run_folder(run) for run in runs]
    default = {"page": COMPARISON_PAGE, "paired": Path(PAIRED_FILE), "transfer": TRANSFER_TABLE}
    path = Path(out) if out is not None else default[mode]
    if path.suffix.lower() != SUFFIX[mode]:
        raise ConfigError(f"--out {path}: compare {mode} writes a {SUFFIX[mode]} file")
    if mode != "page" and len(folders) != 2:
        raise ConfigError(f"compare {mode} compares exactly two runs, got {len(folders)}")
    for folder in folders:
        check_finished_run(folder)
    if mode == "transfer":
        return _transfer(folders, path, margin, split, correctness_margin, say)
    warnings = check_encoders(folders, allow_different_encoders, say)
    if mode == "paired":
        settings = (margin, allow_different_configs, strict_identity, allow_different_sampling)
        return _paired(folders, path, settings, warnings, say)
    return _page(folders, path, strict_identity, warnings, say)


def check_encoders(
    run_dirs: list[Path], allow: bool, say: Callable[[str], object] = print
) -> list[str]:
    """Refuse runs scored by different BERTScore encoders unless ``allow``; one line why."""
    from sago_core.scoring.encoder import differing, run_encoder

    found = differing([(run.name, run_encoder(run)) for run in run_dirs])
    if found is None:
        return []
    if not allow:
        raise ConfigError(
            f"{found}: their BERT numbers are on different scales "
            "(pass --allow-different-encoders to compare anyway)"
        )
    say(f"WARNING: {found}")
    return [found]


def _page(
    run_dirs: list[Path],
    out: Path,
    strict_identity: bool,
    warnings: list[str],
    say: Callable[[str], object],
) -> Comparison:
    from sago_core.artifacts.store import write_text
    from sago_core.report.compare.page import compare_runs, identity_check

    identity = identity_check(run_dirs)
    identity.enforce(strict_identity)
    for warning in identity.warnings:
        say(f"WARNING: {warning}")
    path = write_text(compare_runs(run_dirs, identity=identity), out)
    say(f"Comparison: {path}")
    return Comparison("page", path, None, (*warnings, *identity.warnings))


def _paired(
    run_dirs: list[Path],
    out: Path,
    settings: tuple[float | None, bool, bool, bool],
    warnings: list[str],
    say: Callable[[str], object],
) -> Comparison:
    from sago_core.artifacts.layout import PAIRED_MD_FILE, REFUSAL_PAIRED_FILE
    from sago_core.artifacts.schemas import PAIRED
    from sago_core.artifacts.store import write_parquet, write_text
    from sago_core.refusal.paired import (
        REFUSAL_PAIRED_SCHEMA,
        refusal_paired_runs,
        render_refusal_paired,
    )
    from sago_core.report.compare.paired import render_paired
    from sago_core.statistics.paired import DEFAULT_MARGIN
    from sago_core.statistics.paired_runs import compare_paired

    margin, allow_configs, strict_identity, allow_sampling = settings
    run_a, run_b = run_dirs
    chosen = DEFAULT_MARGIN if margin is None else margin
    comparison = compare_paired(
        run_a, run_b, chosen, allow_configs, strict_identity, allow_sampling
    )
    text = render_paired(comparison)
    write_parquet(comparison.table, out, PAIRED)
    pairs = comparison.table.select("model_a", "model_b").unique(maintain_order=True).rows()
    refusal = refusal_paired_runs(run_a, run_b, pairs)  # runs whose prompts carry a kind
    if refusal is not None:
        write_parquet(refusal, out.with_name(REFUSAL_PAIRED_FILE), REFUSAL_PAIRED_SCHEMA)
        text += "\n" + render_refusal_paired(refusal)
    write_text(text, out.with_name(PAIRED_MD_FILE))
    say(text)
    say(f"Paired table: {out}")
    return Comparison("paired", out, text, tuple(warnings))


def _split_path(split: Path | str | None, after: Path) -> tuple[Path, Path | None]:
    """The split file, and the trained model's folder when AFTER evaluated one."""
    from sago_core.config.saved import read_run_config
    from sago_core.training.result import training_data, training_folder
    from sago_core.training.split import SPLIT_FILE

    models = read_run_config(after).get("models") or []
    folder = training_folder(models[0]) if len(models) == 1 else None
    if split is not None:
        return Path(split), folder
    if folder is None:
        raise ConfigError(
            f"compare transfer: the second run ({after}) does not evaluate a `sago train` "
            "result (hf:OUT/model): name the training's split with --split DATA/split.json"
        )
    return training_data(folder) / SPLIT_FILE, folder


def _transfer(
    run_dirs: list[Path],
    out: Path,
    margin: float | None,
    split: Path | str | None,
    correctness_margin: float | None,
    say: Callable[[str], object],
) -> Comparison:
    from sago_core.artifacts.store import write_parquet, write_text
    from sago_core.statistics.paired import DEFAULT_MARGIN
    from sago_core.training.result import add_transfer_to_card
    from sago_core.training.split import read_split
    from sago_core.training.transfer import (
        DEFAULT_CORRECTNESS_MARGIN,
        TRANSFER,
        check_transfer_design,
        correctness_table,
        render_transfer,
        transfer_table,
    )

    before, after = run_dirs
    split_path, folder = _split_path(split, after)
    check_transfer_design(before, after)
    chosen = DEFAULT_MARGIN if margin is None else margin
    capability = DEFAULT_CORRECTNESS_MARGIN if correctness_margin is None else correctness_margin
    found = read_split(split_path)
    table = transfer_table(before, after, found, chosen)
    correctness = correctness_table(before, after, found, capability)
    text = render_transfer(table, correctness, chosen, capability)
    write_parquet(table, out, TRANSFER)
    write_text(text, out.with_suffix(".md"))
    say(text)
    say(f"Transfer table: {out}")
    if folder is not None:
        say(f"Added to the checkpoint's card: {add_transfer_to_card(folder, text)}")
    return Comparison("transfer", out, text, ())
