"""Per-pair behavioural measurements: activation geometry, text similarity, mirroring."""
