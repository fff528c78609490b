"""A saved run's configuration, and what two of them differ in that changes what s measures.

Read by every comparison of finished runs (``sago compare paired``, the transfer table, the
results site's trend lines) and by a budgeted run's baseline, which must be a run of the
same design: the variant grid, decoding, the scorer and the seed (``COMPARABILITY``) and
the sampling settings (``SAMPLING``: at T > 0 s is built from prompt-induced excesses whose
size depends on all four).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_core.artifacts.layout import RunLayout
from sago_core.config.generation import GenerationSettings
from sago_core.config.run import current_names
from sago_core.errors import ConfigError, InputError

# Run-config settings that change what s measures, by the name a refused comparison gives.
COMPARABILITY: dict[str, tuple[str, ...]] = {
    "variant grid": ("variants",),
    "decoding": (
        "generation.max_new_tokens",
        "generation.use_model_defaults",
        "generation.chat_template_kwargs",
    ),
    "scorer": (
        "bertscore.model",
        "bertscore.num_layers",
        "bertscore.semantic_threshold",
        "register_judge.model",
        "refusal.judge",  # where the refusal verdicts come from (null: the rules)
        "refusal.rubric",
    ),
    "seed": ("seed",),
}
# The decoding settings two runs must share to be compared (read with their defaults: a
# greedy run's saved config leaves them out).
SAMPLING = ("temperature", "top_p", "top_k", "samples")
SAMPLING_KIND = "sampling"


@dataclass(frozen=True)
class SettingDifference:
    kind: str  # a key of COMPARABILITY
    setting: str  # dotted path in run_config.json
    value_a: Any
    value_b: Any

    def describe(self) -> str:
        return f"{self.setting} ({self.kind}): {self.value_a!r} vs {self.value_b!r}"


def _leaves(value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key in sorted(value):
            out.update(_leaves(value[key], f"{path}.{key}"))
        return out or {path: {}}
    return {path: value}


def _lookup(config: dict[str, Any], dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def config_differences(
    config_a: dict[str, Any], config_b: dict[str, Any]
) -> list[SettingDifference]:
    """Every comparability setting whose value differs, leaf by leaf."""
    found = []
    # Saved configurations name renamed keys as they were written then.
    config_a, config_b = current_names(config_a), current_names(config_b)
    for kind, settings in COMPARABILITY.items():
        for setting in settings:
            a = _leaves(_lookup(config_a, setting), setting)
            b = _leaves(_lookup(config_b, setting), setting)
            for leaf in sorted(set(a) | set(b)):
                if a.get(leaf) != b.get(leaf):
                    found.append(SettingDifference(kind, leaf, a.get(leaf), b.get(leaf)))
    return found


def sampling_settings(config: dict[str, Any]) -> dict[str, Any]:
    """A saved config's sampling settings, each key absent from it at its default (a
    greedy configuration serialises without them: ``GenerationSettings``)."""
    generation = config.get("generation") or {}
    fields = GenerationSettings.model_fields
    return {key: generation.get(key, fields[key].default) for key in SAMPLING}


def sampling_differences(
    config_a: dict[str, Any], config_b: dict[str, Any]
) -> list[SettingDifference]:
    a, b = sampling_settings(config_a), sampling_settings(config_b)
    return [
        SettingDifference(SAMPLING_KIND, f"generation.{key}", a[key], b[key])
        for key in SAMPLING
        if a[key] != b[key]
    ]


def describe_sampling(settings: dict[str, Any]) -> str:
    """One line for a run's ``sampling_settings``: greedy, or how it sampled."""
    if not settings:
        return "unknown"
    if not settings["temperature"]:
        return "greedy (T 0, one answer per prompt text)"
    top_k = settings["top_k"] or "0 (off)"
    return (
        f"sampled at T {settings['temperature']:g}, top_p {settings['top_p']:g}, top_k "
        f"{top_k}, K {settings['samples']} answers per prompt text"
    )


def read_run_config(run_dir: Path) -> dict[str, Any]:
    """The run's saved configuration (run_config.json, else the manifest's copy)."""
    layout = RunLayout(run_dir)
    for path in (layout.run_config, layout.manifest):
        if path.is_file():
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise InputError(f"is not valid JSON: {exc}", file=str(path)) from exc
            config = loaded if path == layout.run_config else loaded.get("config")
            if isinstance(config, dict):
                return config
    raise InputError("has no run_config.json or manifest config to compare", file=str(run_dir))


def check_designs(
    config_a: dict[str, Any],
    config_b: dict[str, Any],
    allow_different_configs: bool = False,
    allow_different_sampling: bool = False,
) -> list[SettingDifference]:
    """Refuse two runs' configs that differ in sampling or in what makes s comparable,
    each unless allowed; the allowed differences are returned (the results site's rule
    for one trend line too)."""
    sampling = sampling_differences(config_a, config_b)
    if sampling and not allow_different_sampling:
        raise ConfigError(
            "the runs were sampled differently: "
            + ", ".join(f"{d.setting} {d.value_a!r} vs {d.value_b!r}" for d in sampling)
            + " (pass --allow-different-sampling to compare anyway)"
        )
    differences = config_differences(config_a, config_b)
    if differences and not allow_different_configs:
        raise ConfigError(
            "the runs' configs differ in what makes them comparable: "
            + "; ".join(d.describe() for d in differences)
            + " (pass --allow-different-configs to compare anyway)"
        )
    return [*sampling, *differences]
