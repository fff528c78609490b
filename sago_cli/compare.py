"""``sago compare``: one report across several finished runs, or with ``--paired`` the
paired tests of two runs over the same prompts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago_cli import train_transfer
from sago_cli.common import check_finished_run, run_folder, suffixed
from sago_core.errors import ConfigError

COMPARISON_PAGE = Path("comparison.html")  # --out's default (written where sago runs)


def add_parser(commands: Any) -> None:
    compare = commands.add_parser(
        "compare", help="one report across several finished runs (rankings, reversals)"
    )
    from sago_core.statistics.paired import DEFAULT_MARGIN

    compare.add_argument("runs", type=run_folder, nargs="+", help="run folders (or URLs)")
    compare.add_argument(
        "--out",
        type=suffixed(".html", ".parquet"),
        help="where to write the page (.html; default comparison.html), or with --paired the "
        "table (.parquet; default paired.parquet; paired.md beside it)",
    )
    compare.add_argument(
        "--paired",
        action="store_true",
        help="two runs, the same prompts: paired t-test, Wilcoxon, bootstrap CI and an "
        "equivalence test per dataset and axis (is B less stable than A?); budgeted runs: "
        "says which cells each asked and pairs them on the cells both asked where honest",
    )
    compare.add_argument(
        "--margin",
        type=float,
        default=DEFAULT_MARGIN,
        help=f"--paired: equivalence margin in SGS units (default {DEFAULT_MARGIN})",
    )
    compare.add_argument(
        "--allow-different-configs",
        action="store_true",
        help="--paired: compare runs whose variant grid, decoding, scorer or seed differ "
        "(the differences are printed)",
    )
    compare.add_argument(
        "--allow-different-sampling",
        action="store_true",
        help="--paired: compare runs sampled at different settings (temperature, top_p, "
        "top_k, samples per prompt text; refused by default: at T > 0 s measures excesses "
        "over the sampling noise of those settings)",
    )
    compare.add_argument(
        "--allow-different-encoders",
        action="store_true",
        help="compare runs whose BERT numbers come from different BERTScore encoders (refused "
        "by default: each encoder has its own scale; the page names each run's encoder)",
    )
    compare.add_argument(
        "--strict-identity",
        action="store_true",
        help="refuse runs whose answers for a model come from different served-model "
        "identities (API model name or system_fingerprint; default: compare and mark them)",
    )
    train_transfer.add_arguments(compare)


def command(args: argparse.Namespace) -> int:
    if args.transfer:
        return train_transfer.transfer_command(args)
    if args.out is not None:  # the format follows the mode: refuse a name that says otherwise
        wanted = ".parquet" if args.paired else ".html"
        if args.out.suffix.lower() != wanted:
            mode = "--paired writes a Parquet table" if args.paired else "compare writes a page"
            raise ConfigError(f"--out {args.out}: {mode}; give a {wanted} file name")
    for run_dir in args.runs:
        check_finished_run(run_dir)
    check_encoders(args.runs, args.allow_different_encoders)
    if args.paired:
        return paired_command(args)
    return compare_command(args.runs, args.out or COMPARISON_PAGE, args.strict_identity)


def check_encoders(run_dirs: list[Path], allow: bool) -> None:
    """Refuse runs scored by different BERTScore encoders unless ``allow``; one line why."""
    from sago_core.scoring.encoder import differing, run_encoder

    found = differing([(run.name, run_encoder(run)) for run in run_dirs])
    if found is None:
        return
    if not allow:
        raise ConfigError(
            f"{found}: their BERT numbers are on different scales "
            "(pass --allow-different-encoders to compare anyway)"
        )
    print(f"WARNING: {found}")


def compare_command(run_dirs: list[Path], out: Path, strict_identity: bool = False) -> int:
    from sago_core.artifacts.store import write_text
    from sago_core.report.compare import compare_runs, identity_check

    for run_dir in run_dirs:
        check_finished_run(run_dir)
    identity = identity_check(run_dirs)
    identity.enforce(strict_identity)
    for warning in identity.warnings:
        print(f"WARNING: {warning}")
    path = write_text(compare_runs(run_dirs, identity=identity), out)
    print(f"Comparison: {path}")
    return 0


def paired_command(args: argparse.Namespace) -> int:
    from sago_core.artifacts.layout import PAIRED_FILE, PAIRED_MD_FILE, REFUSAL_PAIRED_FILE
    from sago_core.artifacts.schemas import PAIRED
    from sago_core.artifacts.store import write_parquet, write_text
    from sago_core.refusal.paired import (
        REFUSAL_PAIRED_SCHEMA,
        refusal_paired_runs,
        render_refusal_paired,
    )
    from sago_core.report.paired_runs import compare_paired, render_paired

    if len(args.runs) != 2:
        raise ConfigError(f"--paired compares exactly two runs (A B), got {len(args.runs)}")
    for run_dir in args.runs:
        check_finished_run(run_dir)
    run_a, run_b = args.runs
    comparison = compare_paired(
        run_a,
        run_b,
        args.margin,
        args.allow_different_configs,
        args.strict_identity,
        args.allow_different_sampling,
    )
    out = args.out or Path(PAIRED_FILE)
    text = render_paired(comparison)
    write_parquet(comparison.table, out, PAIRED)
    pairs = comparison.table.select("model_a", "model_b").unique(maintain_order=True).rows()
    refusal = refusal_paired_runs(run_a, run_b, pairs)  # runs whose prompts carry a kind
    if refusal is not None:
        write_parquet(refusal, out.with_name(REFUSAL_PAIRED_FILE), REFUSAL_PAIRED_SCHEMA)
        text += "\n" + render_refusal_paired(refusal)
    write_text(text, out.with_name(PAIRED_MD_FILE))
    print(text)
    print(f"Paired table: {out}")
    return 0
