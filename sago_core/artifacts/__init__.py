"""Artifact contract: one declared Parquet schema per stage, atomic writes, content hashes."""
