"""What several commands share: argument types and the run-folder argument; the finished-run
check, the preflight and Prefect's environment are the API's (``sago.result``,
``sago.environment``), named here for the commands."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from sago.environment import configure_environment, hub_models, preflight, run_model_specs
from sago.result import check_finished_run
from sago.result import run_folder as local_run_folder
from sago_core.errors import SagoError


def csv_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in csv_list(text)]
    except ValueError as exc:
        message = f"{text!r} is not a comma-separated list of integers"
        raise argparse.ArgumentTypeError(message) from exc


def suffixed(*suffixes: str) -> Callable[[str], Path]:
    """An output-file argument whose suffix says what is written: a name that ends otherwise
    (``--out cmp.html`` for a Parquet table) is refused instead of silently mislabelled."""

    def output_file(text: str) -> Path:
        path = Path(text)
        if path.suffix.lower() not in suffixes:
            raise argparse.ArgumentTypeError(
                f"{text!r} must end in {' or '.join(suffixes)} (the format written)"
            )
        return path

    return output_file


def run_folder(text: str) -> Path:
    """A run folder argument, read by the API (``sago.result.run_folder``: a local folder, or
    a run's URL on an object store fetched here); a refusal is the argument's error."""
    try:
        return local_run_folder(text)
    except SagoError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


__all__ = [
    "check_finished_run",
    "configure_environment",
    "csv_list",
    "hub_models",
    "int_list",
    "preflight",
    "run_folder",
    "run_model_specs",
    "suffixed",
]
