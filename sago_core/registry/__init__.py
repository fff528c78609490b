"""The declarations sago derives its choices from: backends, axes and the refusal judge's
rubrics, each declared once.

Data only: importing a registry imports no other sago room, and no torch, vLLM, LiteLLM or
polars (a declaration names its code as ``"module:function"``, imported on first use).
"""
