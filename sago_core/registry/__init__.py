"""The declarations sago derives its choices from: backends, variant families, axes and the
refusal judge's rubrics, each declared once, built in or by an installed plug-in's entry
point (``plugins.py``, read on a registry's first use).

Data only: importing a registry imports no other sago room, and no torch, vLLM, LiteLLM or
polars (a declaration names its code as ``"module:function"``, imported on first use).
"""
