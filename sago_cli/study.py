"""``sago study``: do results on one OOD dataset predict another? (partial correlations
across a model series, controlling for the ID dataset). The study's word is "study", not
"consistency", which names the training objective of ``sago train``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from sago_cli.common import configure_environment, preflight
from sago_core.config import read_config_file


def add_parser(commands: Any) -> None:
    consistency = commands.add_parser(
        "study",
        help="do results on one OOD dataset predict another? (partial correlations across a "
        "model series, controlling for the ID dataset)",
    )
    consistency.add_argument("--config", type=Path, required=True, help="YAML study file")
    consistency.add_argument(
        "--data-dir",
        type=Path,
        help="folder holding the named datasets' files, one subfolder per dataset name "
        "(overrides the study file's evaluation.data_dir)",
    )
    consistency.add_argument(
        "--dry-run",
        action="store_true",
        help="print the design check (can a pair reach significance?) and where each "
        "dataset's reference answers come from; build, load and ask nothing",
    )


def command(args: argparse.Namespace) -> int:
    return consistency_command(args.config, dry_run=args.dry_run, data_dir=args.data_dir)


def study_values(path: Path, data_dir: Path | None = None) -> dict[str, Any]:
    """The study file's values, ``data_dir`` (the command line's) in place of the file's
    ``evaluation.data_dir`` when given."""
    values = read_config_file(path)
    evaluation = values.get("evaluation") or {}
    if data_dir is not None and isinstance(evaluation, dict):  # else the parser says why
        values["evaluation"] = {**evaluation, "data_dir": str(data_dir)}
    return values


def consistency_command(path: Path, dry_run: bool = False, data_dir: Path | None = None) -> int:
    from sago_core.study.config import build_study_config
    from sago_core.study.design import design_lines

    source = f"{path} and command line" if data_dir is not None else str(path)
    study = build_study_config(study_values(path, data_dir), source=source)
    design = design_lines(study.design_check())
    if dry_run:
        from sago_core.data.references import reference_lines

        evaluation = study.evaluation
        references = reference_lines(
            evaluation.datasets, evaluation.data_dir, evaluation.question_column
        )
        print("\n".join([*design, *references]))
        return 0
    preflight(study.preflight_config())  # series checkpoints are built by the flow
    configure_environment(study.evaluation)
    from sago.flows.study import study as study_flow

    started = time.monotonic()
    run_dir = Path(study_flow(study))
    import polars as pl

    from sago_core.artifacts.layout import CONSISTENCY_REPORT_FILE, PARTIAL_CORRELATIONS_FILE
    from sago_core.study.summary import pair_markdown

    table = pl.read_parquet(run_dir / PARTIAL_CORRELATIONS_FILE)
    stats = study.statistics
    print(pair_markdown(table, stats.report_metric, stats.adjustment, design))
    print(f"Consistency: {run_dir / CONSISTENCY_REPORT_FILE} ({time.monotonic() - started:.0f} s)")
    return 0
