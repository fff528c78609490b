"""Training data from a finished run: the split (split.py), TRL-format examples (export.py)
and their dataset card (card.py)."""
