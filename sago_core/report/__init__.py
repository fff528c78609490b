"""Human-readable outputs built from artifacts alone."""
