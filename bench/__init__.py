"""Benchmark: the same SAGO work done naively and by sago's own stages, side by side.

Run with ``make bench`` or ``python -m bench``. Each pipeline runs in its own subprocess so
its peak memory is its own; both must produce the same responses and deltas before any
speed is reported.
"""
