"""What ``sago design`` reads: its budget argument and the pilot run (a finished run's
deltas.parquet and generation settings)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_cli.options import Budget

__all__ = ["Budget", "PilotRun", "read_pilot"]

COLUMNS = ("model", "dataset", "prompt_id", "family", "subtype", "strength", "position", "axis")


@dataclass(frozen=True)
class PilotRun:
    folder: Path
    model: str
    samples: int
    temperature: float
    grid: Any  # sago_core.budget.cells.GridValues
    variance_components: Any  # polars frame or None
    baseline: Any = None  # the last release's values of the grid's cells (numpy), or None


def read_pilot(folder: Path, model: str | None, baseline: Path | None = None) -> PilotRun:
    """The pilot run; ``baseline``: a full run of the same cells, the planned control variate."""
    import polars as pl

    from sago_core.artifacts.layout import DELTAS_FILE, VARIANCE_COMPONENTS_FILE
    from sago_core.budget.cells import grid_from_deltas
    from sago_core.errors import InputError

    path = folder / DELTAS_FILE
    if not path.is_file():
        raise InputError("does not exist (a finished run folder holds it)", file=str(path))
    try:
        deltas = pl.read_parquet(path)
    except Exception as exc:  # polars raises several kinds for a file that is not Parquet
        raise InputError(f"is not a readable Parquet file ({exc})", file=str(path)) from exc
    for column in (*COLUMNS, "delta_norm"):
        if column not in deltas.columns:
            raise InputError("is not a run's deltas table", file=str(path), column=column)
    if deltas.is_empty():
        raise InputError("holds no rows", file=str(path))
    try:
        grid = grid_from_deltas(deltas, model)
    except ValueError as exc:
        raise InputError(f"{exc} (--model)", file=str(path), column="model") from exc
    name = model or str(deltas["model"][0])
    generation = _generation(folder)
    samples = int(generation.get("samples") or 1)
    components = folder / VARIANCE_COMPONENTS_FILE
    table = pl.read_parquet(components) if components.is_file() else None
    last = None if baseline is None else read_pilot(baseline, None).grid
    if last is not None and (last.grid != grid.grid or last.axes != grid.axes):
        raise InputError("--baseline: not a full run of the pilot's cells", file=str(baseline))
    temperature = float(generation.get("temperature") or 0.0)
    values = None if last is None else last.values
    return PilotRun(folder, name, samples, temperature, grid, table, values)


def _generation(folder: Path) -> dict[str, Any]:
    """The run's generation settings (run_config.json); none recorded: greedy, K = 1."""
    from sago_core.artifacts.layout import RUN_CONFIG
    from sago_core.errors import InputError

    path = folder / RUN_CONFIG
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(f"is not valid JSON: {exc}", file=str(path)) from exc
    generation = config.get("generation") if isinstance(config, dict) else None
    return generation if isinstance(generation, dict) else {}
