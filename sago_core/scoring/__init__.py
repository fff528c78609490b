"""Deltas, normalisation, per-prompt RMS scores, SGS and one-sided t-tests (no torch here)."""
