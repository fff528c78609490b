"""Thin Prefect tasks: read input artifacts, call one sago_core stage, write one artifact.

Tasks return artifact paths (never frames or tensors): paths hash cheaply and cache reliably.
"""
