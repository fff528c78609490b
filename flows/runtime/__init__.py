"""Prefect plumbing the flows stand on: the stage runner (one cached stage, its record), the
JSON-only result storage, the cross-process stage locks, and the UI monitor. Flows import
from here; nothing here knows a stage."""
