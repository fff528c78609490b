"""Prefect flows: tables of contents over the stage tasks (evaluate, shard, score, watch,
consistency, locate). Their plumbing is ``flows.runtime``; the ``sago`` command line that
starts them is ``sago_cli``."""
