"""Releases of a model family, as the watch sees them: which family a model belongs to,
which release came before it, and its stability card against that one.

A model's family is its architecture as its ``config.json`` states it (model type, depth,
width, vocabulary; the text config of a multimodal checkpoint): a re-release, a fine-tuned
or a quantised copy keeps it, another model does not. A model without a readable
``config.json`` (a ``.gguf`` file, a hub id, an API model, a model known by name only) is its
own family, its spec or name: a
re-release under the same spec with new weights (a new identity) follows its predecessor.
"""

from __future__ import annotations

import json
from pathlib import Path

from sago_core.artifacts.layout import MANIFEST_FILE, REPORT_FILE, SUMMARY_FILE
from sago_core.artifacts.store import write_text
from sago_core.backends.model_source import RecordedModel, resolve_local_model
from sago_core.budget.baseline import check_baseline
from sago_core.config import RunConfig
from sago_core.errors import SagoError
from sago_core.report.card.build import write_card
from sago_core.report.page.html import report_from_run
from sago_core.watch.registry import Entry

ARCHITECTURE_KEYS = ("model_type", "num_hidden_layers", "hidden_size", "vocab_size")


def identity_of(spec: str) -> str:
    """The weights' identity of a local model (digest), the spec itself for an API model or
    one known by name only (generations scored from a file)."""
    local_id = RecordedModel.of(spec).local_id
    return spec if local_id is None else resolve_local_model(local_id).identity


def same_weights(entry: Entry) -> bool:
    """Whether the release's spec still resolves to the weights it was evaluated with (a
    re-release under the same spec has a new identity; a deleted folder has none)."""
    try:
        return identity_of(entry.spec) == entry.identity
    except (SagoError, OSError):
        return False


def model_family(spec: str) -> str:
    local_id = RecordedModel.of(spec).local_id
    config_file = Path(local_id or ".") / "config.json"
    if local_id is None or not config_file.is_file():
        return spec
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except ValueError:
        return spec
    text = config.get("text_config") or config
    values = [text.get(key, config.get(key)) for key in ARCHITECTURE_KEYS]
    if values[0] is None:
        return spec
    return "arch:" + "/".join(f"{k}={v}" for k, v in zip(ARCHITECTURE_KEYS, values, strict=True))


def _finished(entry: Entry) -> bool:
    run = Path(entry.run_dir)
    return (run / SUMMARY_FILE).is_file() and (run / MANIFEST_FILE).is_file()


def _earlier(entries: list[Entry], spec: str, identity: str) -> list[Entry]:
    """The family's finished releases other than this one, the newest first."""
    family = model_family(spec)
    earlier = [
        e
        for e in entries
        if (e.spec, e.identity) != (spec, identity)
        and _finished(e)
        and model_family(e.spec) == family
    ]
    return sorted(earlier, key=lambda e: e.evaluated_at, reverse=True)


def previous_release(entries: list[Entry], spec: str, identity: str) -> Entry | None:
    """The family's release evaluated last before this one (None: the first one seen)."""
    return next(iter(_earlier(entries, spec, identity)), None)


def baseline_run(entries: list[Entry], spec: str, identity: str, config: RunConfig) -> Path | None:
    """The control variate of a budgeted release: the newest earlier release of its family
    whose run is a finished full grid of ``config``'s design (None: there is none)."""
    saved = config.model_dump(mode="json", by_alias=True)
    for entry in _earlier(entries, spec, identity):
        try:
            check_baseline(Path(entry.run_dir), saved)
        except SagoError:
            continue
        return Path(entry.run_dir)
    return None


def write_release_card(run_dir: Path, spec: str, previous: Entry | None) -> list[Path]:
    """The card of a new release against its predecessor, then the run's report again so
    its headline reads the card's verdicts. A pair the paired comparison refuses (other
    prompts, other settings) still gets its card, saying why there is no verdict."""
    if previous is None:
        note = f"first release of family {model_family(spec)} evaluated by this watch"
        paths = write_card(run_dir, against_note=note)
    else:
        try:
            paths = write_card(run_dir, Path(previous.run_dir))
        except SagoError as exc:
            note = f"not compared with {previous.spec} ({previous.run_dir}): {exc}"
            paths = write_card(run_dir, against_note=note)
    write_text(report_from_run(run_dir), run_dir / REPORT_FILE)  # the headline reads card.json
    return paths
