"""Checks of the instruments on a finished run (``sago audit``) that need both the axes'
scorers and the scoring arithmetic, so they sit above both."""
