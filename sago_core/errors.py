"""Typed errors: each names what is wrong and where, so a user can fix the input."""

from __future__ import annotations


class SagoError(Exception):
    """Base of every error sago raises on purpose (the CLI prints these without a traceback)."""


class ConfigError(SagoError):
    """A configuration value or command-line option is invalid."""


class ModelNotFoundError(SagoError):
    """A model spec points at nothing that can be loaded."""


class ModelLoadError(SagoError):
    """Model files exist but cannot be loaded safely (corrupt, crafted or incomplete)."""


class InputError(SagoError):
    """Bad input data, located by file, row and column where known."""

    def __init__(
        self, message: str, *, file: str, row: int | None = None, column: str | None = None
    ) -> None:
        where = [f"file {file}"]
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        super().__init__(f"{', '.join(where)}: {message}")
        self.file = file
        self.row = row
        self.column = column
