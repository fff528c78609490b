"""Which BERTScore encoder made a run's BERT numbers, named wherever they are shown.

The encoder changes the numbers, not only their precision: on the same 74 pairs of different
answers the embedded all-MiniLM-L6-v2 gives a mean F1 of 0.435 and roberta-large 0.860. An
SGS on the ``bert`` axis, the semantic spread and the PSS form on BERTScore are in the
encoder's units, so every page that prints one names the encoder beside it (``label``), and
``sago compare`` refuses runs whose encoders differ unless asked (``differing``).

The run's saved configuration is the one record of its encoder (``bertscore.model``,
``bertscore.num_layers`` and ``bertscore.rescale_with_baseline`` of run_config.json, or of
the manifest's copy for a run folder without it). A saved configuration holds every key but
``rescale_with_baseline``, which it leaves out at its default (off).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sago_core.artifacts.layout import RunLayout

# The embedded encoder's alias and the model it is (sago_core/backends/model_source.py).
EMBEDDED = {"minilm-l6": "all-MiniLM-L6-v2 (embedded)"}
UNKNOWN = "encoder unknown (the run folder has no saved configuration)"
BERT_AXIS = "bert"  # the axis whose numbers are BERTScore F1


class ScorerSettings(Protocol):
    """``config.BertScoreSettings`` as read here (this module is below the config)."""

    @property
    def model(self) -> str: ...
    @property
    def num_layers(self) -> int: ...
    @property
    def rescale_with_baseline(self) -> bool: ...


@dataclass(frozen=True)
class Encoder:
    """A BERTScore encoder as a run used it."""

    model: str  # as configured: the alias, a hub id or a local folder
    num_layers: int
    rescaled: bool = False  # F1 rescaled with the encoder's baseline

    @property
    def label(self) -> str:
        """What a page prints beside a BERT number, e.g. "all-MiniLM-L6-v2 (embedded),
        layer 6"."""
        local = self.model.startswith(("/", ".", "~"))
        name = Path(self.model.rstrip("/")).name if local else self.model
        name = EMBEDDED.get(self.model, name or self.model)
        return f"{name}, layer {self.num_layers}" + (
            ", rescaled with baseline" if self.rescaled else ""
        )


def settings_encoder(settings: ScorerSettings) -> Encoder:
    """The encoder a run configured (``RunConfig.bertscore``)."""
    return Encoder(settings.model, settings.num_layers, settings.rescale_with_baseline)


def encoder_of(config: Mapping[str, Any] | None) -> Encoder | None:
    """The encoder of a saved run configuration (None: none, or one without the
    ``bertscore`` model and layer, which every saved run configuration holds)."""
    saved = config.get("bertscore") if isinstance(config, Mapping) else None
    if not isinstance(saved, Mapping) or "model" not in saved or "num_layers" not in saved:
        return None
    return Encoder(
        model=str(saved["model"]),
        num_layers=int(saved["num_layers"]),
        rescaled=bool(saved.get("rescale_with_baseline", False)),
    )


def saved_config(run_dir: Path) -> dict[str, Any] | None:
    """The run's saved configuration: run_config.json, else the manifest's ``config``."""
    layout = RunLayout(run_dir)
    for path in (layout.run_config, layout.manifest):
        if path.is_file():
            loaded = json.loads(path.read_text(encoding="utf-8"))
            config = loaded if path == layout.run_config else loaded.get("config")
            if isinstance(config, dict):
                return config
    return None


def run_encoder(run_dir: Path) -> Encoder | None:
    """The encoder a finished run's BERT numbers come from (None: nothing saved says)."""
    return encoder_of(saved_config(run_dir))


def provenance_encoder(provenance: Mapping[str, Any] | None) -> str | None:
    """The encoder's label from a report's provenance (its saved ``config``); None when the
    provenance does not say (a page built from frames alone)."""
    encoder = encoder_of((provenance or {}).get("config"))
    return encoder.label if encoder is not None else None


def bert_label(name: str, encoder: str | None) -> str:
    """A BERT number's row or column name with its encoder: ``bert (all-MiniLM-L6-v2
    (embedded), layer 6)``; the name alone when the encoder is not known."""
    return f"{name} ({encoder})" if encoder else name


def axis_label(axis: str, encoder: str | None) -> str:
    """An axis' name in a table: the ``bert`` axis with its encoder, the others as they are."""
    return bert_label(axis, encoder) if axis == BERT_AXIS else axis


def label_of(encoder: Encoder | None) -> str:
    return encoder.label if encoder is not None else UNKNOWN


def differing(encoders: Sequence[tuple[str, Encoder | None]]) -> str | None:
    """One line naming the runs' encoders when they differ (None when all agree): BERT
    numbers from two encoders are on two scales and must not be ranked together."""
    if len({encoder for _, encoder in encoders}) < 2:
        return None
    labels = {name: label_of(encoder) for name, encoder in encoders}
    named = "; ".join(f"{name}: {label}" for name, label in labels.items())
    return f"the runs' BERT numbers come from different BERTScore encoders ({named})"
