"""Prompt sources: the built-in set, the six paper datasets, and a user's own files."""

from sago_core.data.loading import load_prompts
from sago_core.data.prompt import Prompt

__all__ = ["Prompt", "load_prompts"]
