"""sago_core: the SAGO method as a library, importable without Prefect.

Math modules (variants, scoring) import neither torch nor Prefect; model code lives in
``sago_core.backends`` and metric adapters in ``sago_core.axes``, both importing heavy
libraries lazily.
"""

__version__ = "0.1.0"
