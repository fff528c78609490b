"""Where a run's files and the shared caches live: one owner for every path.

```
<runs_dir>/
  .cache/api/            validated API answers, shared by every run
  .cache/rewrites/       structural rewrites (rewriter identity, instruction version, prompt)
  .cache/semantic/       BERTScore F1 per (scorer, candidate, reference): filter and pairs
  .cache/judge/          register-judge verdicts
  .cache/materialised/   GGUF weights materialised for vLLM (keyed by sha256)
  .cache/rows/           answers and teacher-forced rows, one key per row (row_cache.py)
  .prefect/              Prefect home when none is given
  <run_id>/
    run_config.json      what `sago resume` reads back
    api_ledger.jsonl     the run's API spending
    stages/              intermediate candidates (variant candidates, rewrites)
    shards/              the shard plan and each shard's inputs
    models/<slug>/       per-model artifacts; shards/<label>/ per shard
    prompts.parquet, variants.parquet, ... summary.parquet, report.html, manifest.json
```
A module that needs a path asks a ``RunLayout``; none builds one itself.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

RUN_CONFIG = "run_config.json"
MANIFEST = "manifest.json"
API_LEDGER = "api_ledger.jsonl"
INTEGRITY_LOG = "integrity.jsonl"
# Folders: below the runs folder, and below each run folder.
CACHE_DIR = ".cache"
PREFECT_HOME_DIR = ".prefect"
RESULTS_DIR = ".prefect-results"
CHECKSUMS_DIR = ".checksums"
LOCKS_DIR = ".locks"  # stage locks beside the result records (a local runs folder)
LEASES_DIR = ".leases"  # stage locks on an object store: lease objects below the run's key
# The consistency study: the training split and its check against the evaluation.
TRAINING_SPLIT_FILE = "training_split.json"

# Artifact file names, inside the folder a flow gives a stage (the run folder, a model's
# folder or a shard's folder). A new artifact declares its name here: ``<NAME>_FILE``.
PROMPTS_FILE = "prompts.parquet"
VARIANT_CANDIDATES_FILE = "variant_candidates.parquet"
STRUCTURAL_CANDIDATES_FILE = "structural_candidates.parquet"
VARIANTS_FILE = "variants.parquet"
SHARD_PLAN_FILE = "shards.json"
SHARD_WORKER_FILE = "worker.json"
GENERATIONS_FILE = "generations.parquet"
ANALYSIS_FILE = "analysis.parquet"
SAMPLES_FILE = "samples.parquet"  # K > 1 answers per prompt text
SAMPLE_ANALYSIS_FILE = "sample_analysis.parquet"  # K > 1: each base sample teacher-forced
POSIX_MATRIX_FILE = "posix_matrix.parquet"  # POSIX's full matrix (RunConfig.posix_matrix)
SAMPLING_TESTS_FILE = "sampling_tests.parquet"  # K > 1: excess and tests per variant, axis
EXCESS_DELTAS_FILE = "excess_deltas.parquet"  # K > 1: a model's deltas built from excesses
VARIANCE_COMPONENTS_FILE = "variance_components.parquet"  # K > 1: prompt / variant / sample
TRANSLATED_CANDIDATES_FILE = "translated_candidates.parquet"  # machine translation
PAIRS_FILE = "pairs.parquet"
MIRRORING_FILE = "mirroring.parquet"
DELTAS_FILE = "deltas.parquet"
# A budgeted run: its record (rounds, stop), its cells with their inclusion probabilities,
# the design-based per-prompt scores and the estimates with their design intervals.
BUDGET_FILE = "budget.json"
BUDGET_CELLS_FILE = "budget_cells.parquet"
BUDGET_PROMPTS_FILE = "budget_prompts.parquet"
BUDGET_ESTIMATES_FILE = "budget_estimates.parquet"
SCORES_FILE = "scores.parquet"
SUMMARY_FILE = "summary.parquet"
SUMMARY_MD_FILE = "summary.md"
REPORT_FILE = "report.html"
INSTANCES_FILE = "instances.parquet"  # beyond the mean: one row per variant
TAILS_FILE = "tails.parquet"
AXIS_STRUCTURE_FILE = "axis_structure.parquet"
AXIS_PCA_FILE = "axis_pca.parquet"
LAYER_PROFILES_FILE = "layer_profiles.parquet"  # per-layer (1 - cos) profiles
PATCHING_FILE = "patching.parquet"  # activation patching: recovery per (variant, layer)
PEER_METRICS_FILE = "peer_metrics.parquet"  # peers' indices: PSS, POSIX, PDR, MaxP
SWEEP_FILE = "sweep.parquet"  # a temperature sweep's folder: per arm, axis, family
SWEEP_HTML_FILE = "sweep.html"
PAIRED_FILE = "paired.parquet"  # sago compare A B --paired
PAIRED_MD_FILE = "paired.md"
CARD_MD_FILE = "card.md"  # sago card <run>: the stability card
CARD_HTML_FILE = "card.html"
CARD_JSON_FILE = "card.json"
MANIFEST_FILE = MANIFEST
EXTERNAL_ROWS_FILE = "external_rows.parquet"  # sago score: the validated input rows
# Refusal consistency (prompts with a kind, data/safety.py): what was written, or why nothing
REFUSAL_FILE = "refusal.json"
REFUSAL_VERDICTS_FILE = "refusal_verdicts.parquet"  # one refusal verdict per answer
REFUSAL_FLIPS_FILE = "refusal_flips.parquet"  # breach / over-refusal per prompt and variant
REFUSAL_RATES_FILE = "refusal_rates.parquet"  # per model, kind, family (and subtype, strength)
BEST_OF_N_FILE = "best_of_n.parquet"  # per model, family and N: P(some variant breaches)
BEST_OF_N_SUMMARY_FILE = "best_of_n_summary.parquet"  # its power-law fit, half-breached N
REFUSAL_PAIRED_FILE = "refusal_paired.parquet"  # sago compare --paired: beside paired.parquet

# The companion study's artifacts (``sago consistency``).
REFERENCE_LIKELIHOOD_FILE = "reference_likelihood.parquet"
CHECKPOINT_SCORES_FILE = "checkpoint_scores.parquet"
PARTIAL_CORRELATIONS_FILE = "partial_correlations.parquet"
SIGN_AGREEMENT_FILE = "sign_agreement.parquet"
CONSISTENCY_REPORT_FILE = "consistency.html"

# What a finished run folder holds at its root (``sago report`` / ``compare`` check these).
FINISHED_RUN_FILES = (
    SUMMARY_FILE,
    SCORES_FILE,
    DELTAS_FILE,
    VARIANTS_FILE,
    PROMPTS_FILE,
    GENERATIONS_FILE,
    MANIFEST_FILE,
)


def model_slug(model: str) -> str:
    """A readable folder name per model spec; the hash keeps "a/b" and "a_b" apart."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")[:60]
    return f"{readable}-{hashlib.sha256(model.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class CacheLayout:
    """The caches every run under one runs folder shares."""

    root: Path  # <runs_dir>/.cache

    @classmethod
    def of(cls, runs_dir: Path) -> CacheLayout:
        return cls(runs_dir / CACHE_DIR)

    @property
    def api(self) -> Path:
        return self.root / "api"

    @property
    def rewrites(self) -> Path:
        return self.root / "rewrites"

    @property
    def judge(self) -> Path:
        return self.root / "judge"

    @property
    def semantic(self) -> Path:
        return self.root / "semantic"

    @property
    def materialised(self) -> Path:
        return self.root / "materialised"

    @property
    def rows(self) -> Path:
        return self.root / "rows"


@dataclass(frozen=True)
class RunLayout:
    run_dir: Path  # absolute: <runs_dir>/<run_id>

    @classmethod
    def of(cls, runs_dir: Path, run_id: str) -> RunLayout:
        return cls((runs_dir / run_id).resolve())

    @property
    def runs_dir(self) -> Path:
        return self.run_dir.parent

    @property
    def cache(self) -> CacheLayout:
        return CacheLayout.of(self.runs_dir)

    @property
    def run_config(self) -> Path:
        return self.run_dir / RUN_CONFIG

    @property
    def manifest(self) -> Path:
        return self.run_dir / MANIFEST

    @property
    def results(self) -> Path:
        """Prefect's result records (JSON), and the stage locks beside them."""
        return self.run_dir / RESULTS_DIR

    @property
    def locks(self) -> Path:
        """The stage locks of a run on a local folder (one lock file per cache key)."""
        return self.results / LOCKS_DIR

    @property
    def leases_key(self) -> str:
        """The object-store key, below the runs folder's, of the run's stage leases."""
        return f"{self.run_dir.name}/{LEASES_DIR}"

    @property
    def ledger(self) -> Path:
        return self.run_dir / API_LEDGER

    @property
    def checksums(self) -> Path:
        """Each committed stage result's artifact sha256 (``<cache key>.json``)."""
        return self.results / CHECKSUMS_DIR

    def checksum_record(self, cache_key: str) -> Path:
        """The recorded artifact sha256 of one committed stage result."""
        return self.checksums / f"{cache_key}.json"

    @property
    def integrity_log(self) -> Path:
        """Cache hits whose artifact failed its recorded sha256 and were recomputed."""
        return self.run_dir / INTEGRITY_LOG

    @property
    def stages(self) -> Path:
        return self.run_dir / "stages"

    @property
    def shards(self) -> Path:
        return self.run_dir / "shards"

    @property
    def models(self) -> Path:
        return self.run_dir / "models"

    def model_dir(self, model: str) -> Path:
        return self.models / model_slug(model)

    def shard_dir(self, model: str, shard_label: str) -> Path:
        return self.model_dir(model) / "shards" / shard_label

    def shard_artifact(self, model: str, shard_label: str, name: str) -> Path:
        """A shard's artifact by its stem (``"generations"`` -> its generations.parquet)."""
        return self.shard_dir(model, shard_label) / artifact_file(name)

    def per_model_files(self, name: str) -> list[Path]:
        """``models/*/<name>`` of every model of the run, in a stable order."""
        return sorted(self.models.glob(f"*/{name}"))

    def localise(self, path: str | Path) -> Path:
        """``path`` as this machine has it: a path another machine's scratch folder gave
        (a cached result, a worker's answer) is moved below this run folder by its run id."""
        where = Path(path)
        if where.is_relative_to(self.run_dir):
            return where
        parts = where.parts
        if self.run_dir.name in parts:
            last = len(parts) - 1 - parts[::-1].index(self.run_dir.name)
            return self.run_dir.joinpath(*parts[last + 1 :])
        return where

    def device_payload(self, queue: str, model: str) -> Path:
        """The parameters a local device worker reads for its group of shards."""
        return self.shards / f"device-{queue}-{model_slug(model)}.json"


def default_prefect_home(runs_dir: Path) -> Path:
    """Prefect's home when neither PREFECT_HOME nor the config names one."""
    return runs_dir / PREFECT_HOME_DIR


def local_only(runs_dir: Path) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """What a runs folder mirrored to an object store keeps on this machine: the folders
    (Prefect's home with its database, weights materialised from their sha256) and the
    folder names anywhere below (lock files: locks on a store are leases)."""
    folders = (default_prefect_home(runs_dir), CacheLayout.of(runs_dir).materialised)
    return folders, (LOCKS_DIR, LEASES_DIR)


def artifact_file(name: str) -> str:
    """The file name of an artifact by its stem (``"generations"`` -> GENERATIONS_FILE)."""
    value = globals().get(f"{name.upper()}_FILE")
    if not isinstance(value, str):
        raise KeyError(f"no artifact named {name!r} in the run layout")
    return value
