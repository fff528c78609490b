"""Runs on object storage: ``runs_dir`` as a URL, mirrored through a local scratch
folder. Prefect-free: the flows attach a store, the artifact functions use it."""
