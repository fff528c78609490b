"""Prefect flows (tables of contents over the stage tasks) and the ``sago`` command line."""
