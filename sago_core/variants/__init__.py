"""Meaning-preserving prompt variants: register ladders, surface noise, and the grid."""

from sago_core.variants.grid import Variant, build_variants

__all__ = ["Variant", "build_variants"]
