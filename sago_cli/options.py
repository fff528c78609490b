"""The options every command gives the same way: a run it reads, the output it writes, a model,
a budget and how two runs are compared. A command asks these builders instead of spelling the
option itself, so a run is always a positional folder or store URL, an output always ``--out``,
a model always ``--model BACKEND:ID`` (``--models`` for a list), a budget always ``--budget
SHARE_OR_N`` and a comparison's margin and allowed differences the same flags everywhere.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_cli.common import csv_list, run_folder, suffixed


def folder(text: str) -> Path:
    """An output folder's name: one with a file suffix (``ds.parquet``) is refused, since the
    command writes a folder there, not a file of that format."""
    path = Path(text)
    if path.suffix:
        raise argparse.ArgumentTypeError(f"{text!r}: name a folder (no suffix); it writes a folder")
    return path


RUN_HELP = "a finished run: its folder, or its URL on an object store (s3://, gs://, az://)"


def add_run(parser: Any, help: str = RUN_HELP, name: str = "run") -> None:
    """The run a command reads: positional, a local folder or a store URL."""
    parser.add_argument(name, type=run_folder, metavar=name.upper(), help=help)


def add_runs(parser: Any, help: str, count: int | None = None) -> None:
    """Several runs a command reads (``count`` of them, or one or more)."""
    nargs: int | str = count if count is not None else "+"
    parser.add_argument("runs", type=run_folder, nargs=nargs, metavar="RUN", help=help)


def add_output(
    parser: Any,
    what: str,
    *,
    suffixes: tuple[str, ...] = (),
    default: Path | None = None,
    required: bool = False,
    type: Callable[[str], Any] | None = None,
) -> None:
    """``--out``: where the command writes what it makes (a file named by its format's suffix,
    or a folder when ``suffixes`` is empty); the only option that names an output."""
    kind = type or (suffixed(*suffixes) if suffixes else Path)
    metavar = "FILE" + "|".join(suffixes) if suffixes else "FOLDER"
    parser.add_argument(
        "--out",
        type=kind,
        default=default,
        required=required,
        metavar=metavar,
        help=f"where to write {what}",
    )


MODEL_HELP = "BACKEND:ID, e.g. hf:smollm2-135m (the embedded model), hf:ORG/NAME, hf:FOLDER"


def add_model(
    parser: Any, role: str, *, required: bool = False, default: str | None = None
) -> None:
    """``--model BACKEND:ID``: one model, named as ``sago run --models`` names it."""
    parser.add_argument(
        "--model",
        required=required,
        default=default,
        metavar="BACKEND:ID",
        help=f"{role} ({MODEL_HELP})",
    )


def add_models(parser: Any, help: str) -> None:
    """``--models A,B``: the models a run evaluates (``--model`` is the same option, so one
    model is given the way every other command gives it)."""
    parser.add_argument(
        "--models", "--model", dest="models", type=csv_list, metavar="BACKEND:ID,...", help=help
    )


@dataclass(frozen=True)
class Budget:
    """``--budget``: a share of the grid in (0, 1] or a number of generations (> 1)."""

    fraction: float | None = None
    generations: int | None = None


def budget_value(text: str) -> Budget:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a fraction in (0, 1] nor a number of generations"
        ) from exc
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a budget must be above 0")
    if value <= 1:
        return Budget(fraction=value)
    if not value.is_integer():
        raise argparse.ArgumentTypeError(
            f"{text!r}: above 1 a budget is a whole number of generations"
        )
    return Budget(generations=int(value))


BUDGET_HELP = (
    "a share of the grid in (0, 1] (that share of the variant cells plus every prompt's base "
    "and replay) or a whole number of generations"
)


def add_budget(parser: Any, what: str, *, required: bool = False) -> None:
    """``--budget SHARE_OR_N``: parsed the same way wherever a budget is given."""
    parser.add_argument(
        "--budget",
        type=budget_value,
        required=required,
        metavar="SHARE_OR_N",
        help=f"{what}: {BUDGET_HELP}",
    )


def add_run_place(parser: Any, run_id: str) -> None:
    """Where a new run is written: ``--runs-dir`` (a folder or a store URL), ``--run-id``
    (``run_id`` says its default) and ``--prefect-home``."""
    parser.add_argument(
        "--runs-dir", help="where runs/<run_id>/ go: a folder or a store URL (default ./runs)"
    )
    parser.add_argument("--run-id", help=f"run folder name (default: {run_id})")
    parser.add_argument(
        "--prefect-home", type=Path, help="Prefect home (default <runs-dir>/.prefect)"
    )


# What each ``--allow-different-KIND`` lets a comparison accept (refused by default).
DIFFERENCES = {
    "configs": "whose variant grid, decoding, scorer or seed differ (the differences are printed)",
    "sampling": "sampled at different settings (temperature, top_p, top_k, samples per prompt "
    "text; refused by default: at T > 0 s measures excesses over the sampling noise of those "
    "settings)",
    "encoders": "whose BERT numbers come from different BERTScore encoders (refused by default: "
    "each encoder has its own scale; the page names each run's encoder)",
}


def add_margin(parser: Any) -> None:
    """``--margin``: the equivalence margin of a comparison's paired tests."""
    from sago_core.statistics.paired import DEFAULT_MARGIN

    parser.add_argument(
        "--margin", type=float, default=DEFAULT_MARGIN, help="equivalence margin in SGS units"
    )


def add_differences(parser: Any, *kinds: str) -> None:
    """``--allow-different-KIND`` for each of ``kinds`` (``DIFFERENCES``) and
    ``--strict-identity``: what a comparison of runs accepts, refuses or marks."""
    for kind in kinds:
        parser.add_argument(
            f"--allow-different-{kind}",
            action="store_true",
            help=f"compare runs {DIFFERENCES[kind]}",
        )
    parser.add_argument(
        "--strict-identity",
        action="store_true",
        help="refuse runs whose answers for a model come from different served-model "
        "identities (API model name or system_fingerprint; default: compare and mark them)",
    )
