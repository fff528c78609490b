"""``sago export <run> --format hf-dataset --out FOLDER``: a run's per-instance results as a
Hugging Face ``datasets``-loadable folder, so a team can publish a stability result as a
dataset.

The folder: ``data/instances-00000-of-00001.parquet`` (``instances.parquet`` of the run, one
row per variant: texts, each axis' ``d_<axis>`` with its ``reason_<axis>``, graded mirroring,
correctness) and ``README.md``, the dataset card: YAML front matter as the Hub reads it
(``configs: [{config_name: default, data_files: [{split: train, path: data/*.parquet}]}]``,
``license``, ``tags``, ``task_categories``, ``pretty_name``, ``size_categories``) and a body
that says what sago measured (models, datasets, axes, the pooled SGS per axis with its
missing reasons, what each column means) and how to cite it. A missing value stays null
with its reason column, as in the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from sago_core.artifacts.layout import INSTANCES_FILE, MANIFEST, SUMMARY_FILE
from sago_core.artifacts.schemas import SUMMARY
from sago_core.artifacts.store import read_parquet, write_parquet, write_text
from sago_core.errors import ConfigError, InputError
from sago_core.markdown import plain, table
from sago_core.vocabulary import POOLED

HF_DATASET = "hf-dataset"  # the export format's name
CARD_FILE = "README.md"
DATA_GLOB = "data/*.parquet"
DATA_FILE = "data/instances-00000-of-00001.parquet"
SPLIT = "train"
DEFAULT_LICENSE = "unknown"  # the Hub's value for "not stated": the publisher must choose
TAGS = ("sago", "prompt-sensitivity", "prompt-stability", "llm-evaluation", "robustness")
TASK_CATEGORIES = ("text-generation",)
PAPER = (
    '"Generalization Is Stability, Not Accuracy: Multi-Axis Evaluation of LLMs" (arXiv 2610.01428)'
)
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


def check_folder(out: Path) -> None:
    """The output must be a folder: a name with a file suffix, or an existing file, or a
    non-empty folder is refused (nothing is overwritten)."""
    if out.suffix:
        raise ConfigError(
            f"--out {out}: --format {HF_DATASET} writes a folder; give a name without a "
            f"suffix (not {out.suffix!r})"
        )
    empty_folder(out)


def empty_folder(out: Path) -> None:
    """Every export's ``--out``: new, or an empty folder (nothing is overwritten)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out}: exists and is not an empty folder")


def instances_frame(run_dir: Path, name: str = INSTANCES_FILE) -> pl.DataFrame:
    """A finished run's instances.parquet (or its artifact ``name``), an error naming the run
    when it is missing."""
    path = run_dir / name
    if not path.is_file():
        raise InputError(f"is not a finished run (no {name})", file=str(run_dir))
    return read_parquet(path)


def run_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's manifest.json ({} without one)."""
    path = run_dir / MANIFEST
    value = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return value if isinstance(value, dict) else {}


def _size_category(n: int) -> str:
    return next((label for bound, label in _SIZES if n < bound), "n>1M")


def front_matter(run_id: str, n_rows: int, license: str) -> dict[str, Any]:
    return {
        "configs": [
            {"config_name": "default", "data_files": [{"split": SPLIT, "path": DATA_GLOB}]}
        ],
        "license": license,
        "tags": list(TAGS),
        "task_categories": list(TASK_CATEGORIES),
        "pretty_name": f"sago prompt-stability results: {run_id}",
        "size_categories": [_size_category(n_rows)],
    }


def _sgs_table(summary: pl.DataFrame) -> list[str]:
    pooled = summary.filter(pl.col("dataset") == POOLED)
    if pooled.is_empty():
        return ["No pooled SGS in this run's summary."]
    rows = []
    for r in pooled.iter_rows(named=True):
        ci = (
            f"[{plain(r['ci_low'])}, {plain(r['ci_high'])}]"
            if r.get("ci_low") is not None
            else "NA"
        )
        reason = (r.get("missing_reason") or "").replace("|", "/")
        rows.append(
            [r["model"], r["axis"], plain(r["sgs"]), ci, r["n"], plain(r.get("p_holm")), reason]
        )
    return table(["model", "axis", "SGS", "95% CI", "n", "p (Holm)", "missing reason"], rows)


def card_body(
    run_id: str, frame: pl.DataFrame, summary: pl.DataFrame, manifest: dict[str, Any]
) -> str:
    axes = [c.removeprefix("d_") for c in frame.columns if c.startswith("d_")]
    models = sorted(frame["model"].unique().drop_nulls().to_list())
    datasets = sorted(frame["dataset"].unique().drop_nulls().to_list())
    families = sorted(frame["family"].unique().drop_nulls().to_list())
    config = manifest.get("config") or {}
    version = (manifest.get("packages") or {}).get("sago")
    lines = [
        f"# sago prompt-stability results: {run_id}",
        "",
        "Per-instance results of a sago run: how much a model's answer "
        "moves when its prompt is rewritten without changing what it asks (the SAGO method of "
        f"{PAPER}). One row per prompt variant: the base and the variant prompt and answer, "
        "the normalised change on each axis and whether each answer is right.",
        "",
        "## What was measured",
        "",
        f"- run: `{run_id}`" + (f" (preset `{config['preset']}`)" if config.get("preset") else ""),
        f"- models: {', '.join(f'`{m}`' for m in models) or 'none'}",
        f"- datasets: {', '.join(f'`{d}`' for d in datasets) or 'none'}",
        f"- variant families: {', '.join(f'`{f}`' for f in families) or 'none'}",
        f"- axes: {', '.join(f'`{a}`' for a in axes)}",
        f"- rows: {frame.height}",
        "",
        "## SGS (pooled over datasets)",
        "",
        "SGS per axis: the mean over prompts of the root mean square of the prompt's "
        "variants' normalised deltas (0: no variant moved the answer on that axis); pooled, "
        "every dataset weighs the same. NA: not measured, with the reason.",
        "",
        *_sgs_table(summary),
        "",
        "## Columns",
        "",
        "- `model`, `dataset`, `prompt_id`, `variant_id`: which answer; `family`, `subtype`, "
        "`strength`, `position`: the variant",
        "- `base_prompt`, `variant_prompt`, `base_answer`, `variant_answer`: the texts",
        "- `d_<axis>`: the variant's normalised delta on that axis; null where not measured, "
        "`reason_<axis>` says why",
        "- `mr_intensity` (`mr_intensity_reason`): graded mirroring of the variant's register",
        "- `base_correct`, `variant_correct` (`correct_missing_reason`): each answer against "
        "the reference answers",
        "",
        "## Use",
        "",
        "```python",
        "from datasets import load_dataset",
        f'ds = load_dataset("parquet", data_files="{DATA_GLOB}", split="{SPLIT}")',
        "```",
        "",
        "## Citation",
        "",
        f"The method: {PAPER}. The measurements: sago"
        + (f" {version}" if version else "")
        + f", run `{run_id}`. The prompts come from the datasets named above and the answers "
        "from the models named above: their own licences and terms apply.",
        "",
    ]
    return "\n".join(lines)


def card_text(
    run_id: str,
    frame: pl.DataFrame,
    summary: pl.DataFrame,
    manifest: dict[str, Any],
    license: str,
) -> str:
    head = yaml.safe_dump(
        front_matter(run_id, frame.height, license), sort_keys=False, allow_unicode=True
    )
    return f"---\n{head}---\n\n{card_body(run_id, frame, summary, manifest)}"


def export_hf_dataset(run_dir: Path, out: Path, license: str | None = None) -> Path:
    """Write the folder; returns it."""
    check_folder(out)
    frame = instances_frame(run_dir)
    summary = instances_frame(run_dir, SUMMARY_FILE)
    summary = summary.select([c for c in SUMMARY if c in summary.columns])
    manifest = run_manifest(run_dir)
    run_id = str(manifest.get("run_id") or run_dir.name)
    write_parquet(frame, out / DATA_FILE, dict(frame.schema))  # as the run wrote it
    write_text(
        card_text(run_id, frame, summary, manifest, license or DEFAULT_LICENSE), out / CARD_FILE
    )
    return out
