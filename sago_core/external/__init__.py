"""Generations made elsewhere: the input schema of ``sago score``, its strict validation,
column mapping, the readers of the public formats (``generations``, ``sago-reference``,
``dove``) and ``export`` of a finished run back to the input schema."""
