"""The run configuration's ``refusal`` section: a judge model for the refusal verdicts.

A run measures refusal from rules alone (``sago_core/refusal/rules.py``) unless ``judge``
names a model (any backend spec: ``litellm:openai/gpt-4o-mini``, ``hf:smollm2-135m``).
Only then is every answer of a prompt with a kind sent to that model, with the request,
under ``rubric`` (one of ``sago_core/registry/rubrics.py``'s ``RUBRICS``; any other name is
refused here, with the documented ones listed). Nothing goes to a model the user did not
name for this. ``batch_size``: prompts per generate call of a local judge. The section at
its defaults serialises as if it were absent, so a run without it keeps its run id and
cache keys.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from sago_core.config.base import StrictModel, check_model_spec
from sago_core.registry.rubrics import DEFAULT_RUBRIC, rubric_named


class RefusalSettings(StrictModel):
    """A judge model for the refusal verdicts (a run whose prompts carry a kind). ``judge``:
    a model spec (``litellm:openai/gpt-4o-mini``, ``hf:MODEL``); null, the default, gives
    the rules' verdicts alone, and no answer is sent to any judge. ``rubric``: one of the
    documented rubrics (``refused-partial-complied``). ``batch_size``: prompts per generate
    call of a local judge."""

    judge: str | None = None
    rubric: str = DEFAULT_RUBRIC
    batch_size: int = Field(default=16, ge=1)

    @field_validator("judge")
    @classmethod
    def _judge_spec(cls, value: str | None) -> str | None:
        return None if value is None else check_model_spec(value.strip())

    @field_validator("rubric")
    @classmethod
    def _documented_rubric(cls, value: str) -> str:
        return rubric_named(value.strip()).name
