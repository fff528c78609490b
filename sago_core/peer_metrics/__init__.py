"""Peers' prompt-sensitivity indices from a sago run's own artifacts.

One small module per index, each a pure function over plain numbers (``pss``, ``posix``,
``pdr``, ``multi_prompt``), and ``table`` that reads the run's frames (instances, deltas,
analysis) and writes one row per (model, dataset, family, index) of ``peer_metrics.parquet``.
docs/peer-metrics.md states each definition, its source and what sago's variants are in the
peer's terms. Polars and the standard library only: no torch, no Prefect.
"""
