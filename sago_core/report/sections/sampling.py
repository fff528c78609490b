"""The report's "stability under sampling" section, for a run at K > 1 samples per
prompt text, from sampling_tests.parquet and variance_components.parquet alone: the pooled
excess per axis with its one-sided t-test, the variance components with their intervals,
the replay calibration (the false-positive check), and flips and semantic spread beyond
resampling. A run at K = 1 has neither file and no section."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import SAMPLING_TESTS_FILE, VARIANCE_COMPONENTS_FILE
from sago_core.report.markup import Section, na, p_value
from sago_core.report.markup import table as _table
from sago_core.sampling.pooled import ALPHA, excess_table, replay_calibration
from sago_core.vocabulary import MAIN_EPSILON, REPLAY_FAMILY, ROW_KEY

SECTION_KEY = "sampling"


def sampling_from_run(run_dir: Path) -> dict[str, Any]:
    """``render``'s keyword arguments from a finished run folder (none at K = 1)."""
    found = {}
    for name, file in (
        ("sampling_tests", SAMPLING_TESTS_FILE),
        ("variance_components", VARIANCE_COMPONENTS_FILE),
    ):
        if (run_dir / file).is_file():
            found[name] = pl.read_parquet(run_dir / file)
    return found


def _p(value: Any, reason: str | None) -> str:
    return na(reason) if value is None else p_value(value)


def _num(value: Any, digits: int = 4, reason: str | None = None) -> str:
    if value is None:
        return na(reason)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def _band(low: Any, high: Any, reason: str | None) -> str:
    if low is None or high is None:
        return na(reason)
    return f"[{low:.4f}, {high:.4f}]"


def _excess(tests: pl.DataFrame) -> str:
    rows = [
        [
            html.escape(r["model"]),
            html.escape(r["axis"]),
            str(r["n_prompts"]),
            _num(r["mean_excess"]),
            _p(r["p_zero"], r["missing_reason"]),
            _p(r["p_eps"], r["missing_reason"]),
            _num(r["share_p_below"], 3, "no pair could be tested"),
            str(r["n_tested"]),
        ]
        for r in excess_table(tests)
    ]
    headers = [
        "model",
        "axis",
        "prompts",
        "mean excess",
        "p (E > 0)",
        f"p (E > {MAIN_EPSILON})",
        f"pairs p < {ALPHA}",
        "pairs tested",
    ]
    return (
        "<p>Each delta of this run is an <em>excess</em>: for BLEU and BERTScore E = D - "
        "(W<sub>base</sub> + W<sub>variant</sub>) / 2, the mean distance between the "
        "variant's and the base's K samples minus the distances that resampling one prompt "
        "already gives (0 in expectation when the wording changes nothing); for mirroring "
        "the flagged share of variant samples minus that of base samples; Prob and Ent are "
        "teacher-forced on every base sample and averaged. SGS above is computed from these "
        "excesses exactly as at T = 0 from the deltas. Here: the mean excess over prompts "
        "(each prompt's mean over its variants, the replay left out) with the one-sided "
        "t-test over prompts, and the share of (prompt, variant) pairs whose permutation "
        "test rejects one distribution. Prob and Ent shift either way: no one-sided test.</p>"
        + _table(headers, rows, left=2)
    )


def _components(variance: pl.DataFrame) -> str:
    shown = variance.filter(pl.col("share").is_not_null() | pl.col("s2_sample").is_not_null())
    rows = []
    for r in shown.iter_rows(named=True):
        ci = r["ci_missing_reason"]
        rows.append(
            [
                html.escape(r["model"]),
                html.escape(r["dataset"]),
                html.escape(r["axis"]),
                str(r["n_prompts"]),
                _num(r["share"], reason=r["missing_reason"]),
                _band(r["share_ci_low"], r["share_ci_high"], ci),
                *(
                    cell
                    for name in ("prompt", "variant", "sample")
                    for cell in (
                        _num(r[f"s2_{name}"], 5, r["missing_reason"]),
                        _band(r[f"s2_{name}_ci_low"], r[f"s2_{name}_ci_high"], ci),
                    )
                ),
                html.escape(r["truncated"] or ""),
            ]
        )
    absent = (
        variance.filter(pl.col("share").is_null() & pl.col("s2_sample").is_null())
        .select("axis", "missing_reason")
        .unique()
        .sort("axis")
    )
    notes = "".join(
        f"<li>{html.escape(r['axis'])}: {html.escape(r['missing_reason'] or '')}</li>"
        for r in absent.iter_rows(named=True)
    )
    headers = ["model", "dataset", "axis", "prompts", "prompt-induced share", "95% CI"]
    for name in ("prompt", "variant", "sample"):
        headers += [f"σ² {name}", "95% CI"]
    return (
        "<p>Each sample's score (its mean distance to the base samples; for mirroring, the "
        "share of base samples against which it is flagged) split into a prompt, a "
        "variant-within-prompt and a sample-within-variant component (nested method of "
        "moments; negative estimates set to 0, listed as truncated). The prompt-induced "
        "share σ²<sub>variant</sub> / (σ²<sub>variant</sub> + σ²<sub>sample</sub>) is how "
        "much of the answers' variability within a prompt the wording causes beyond "
        "resampling; intervals are bootstraps over prompts.</p>"
        + _table(headers, rows, left=3)
        + (f"<p>Not decomposed:</p><ul>{notes}</ul>" if notes else "")
    )


def _replay(tests: pl.DataFrame) -> str:
    found = replay_calibration(tests)
    if not found:
        return "<p>This run has no replay rows: no false-positive check.</p>"
    rows = [
        [
            html.escape(r["model"]),
            html.escape(r["axis"]),
            str(r["n_tested"]),
            _num(r["share_p_below"], 3, "no replay row could be tested"),
            _num(r["bound"], 3, "no replay row could be tested"),
            _num(r["holds"]),
            _num(r["mean_excess"]),
            _p(r["p_excess"], "fewer than two replay excesses"),
        ]
        for r in found
    ]
    headers = [
        "model",
        "axis",
        "replay rows tested",
        f"share p < {ALPHA}",
        "at most",
        "holds",
        "pooled replay excess",
        "p (E > 0)",
    ]
    return (
        "<p>The replay asks the base prompt again: its true excess is 0, so its permutation "
        f"tests should reject at most {ALPHA} of the time, plus the binomial 95% margin "
        "1.96 √(0.05 × 0.95 / n), and its pooled excess should not be significant. A "
        "failure here means the tests above over-report.</p>" + _table(headers, rows, left=2)
    )


def _flips_and_spread(tests: pl.DataFrame) -> str:
    pairs = (
        tests.filter(pl.col("family") != REPLAY_FAMILY)
        .unique(ROW_KEY)
        .group_by("model")
        .agg(
            pl.col("flip_right_to_wrong_excess").drop_nulls().len().alias("judged"),
            pl.col("flip_right_to_wrong_excess").mean().alias("to_wrong"),
            pl.col("flip_wrong_to_right_excess").mean().alias("to_right"),
            pl.col("clusters_base").mean().alias("clusters_base"),
            pl.col("clusters_variant").mean().alias("clusters_variant"),
            (pl.col("entropy_variant") - pl.col("entropy_base")).mean().alias("entropy"),
        )
        .sort("model")
    )
    no_flips = "no pair with references and every sample answered"
    no_spread = "no pair with every sample answered"
    rows = [
        [
            html.escape(r["model"]),
            str(r["judged"]),
            _num(r["to_wrong"], reason=no_flips),
            _num(r["to_right"], reason=no_flips),
            _num(r["clusters_base"], 2, no_spread),
            _num(r["clusters_variant"], 2, no_spread),
            _num(r["entropy"], reason=no_spread),
        ]
        for r in pairs.iter_rows(named=True)
    ]
    headers = [
        "model",
        "pairs judged",
        "right→wrong beyond self-flip",
        "wrong→right beyond self-flip",
        "meanings (base)",
        "meanings (variant)",
        "entropy variant − base (nats)",
    ]
    return (
        "<p>Flips are counted beyond the base's own self-flip rate (base sample against base "
        "sample), from each sample's verdict against the reference answers. Meanings: "
        "distinct meanings among the K samples (greedy clustering at the semantic filter's "
        "BERTScore threshold) and the entropy of their sizes, variant minus base.</p>"
        + _table(headers, rows, left=1)
    )


def sampling_sections(
    sampling_tests: pl.DataFrame | None = None, variance_components: pl.DataFrame | None = None
) -> list[Section]:
    """The section's parts (none without sampling_tests: a run at K = 1)."""
    if sampling_tests is None or sampling_tests.is_empty():
        return []
    body = _excess(sampling_tests)
    if variance_components is not None:
        body += "<h3>Variance components</h3>" + _components(variance_components)
    body += "<h3>Replay calibration</h3>" + _replay(sampling_tests)
    body += "<h3>Flips and semantic spread</h3>" + _flips_and_spread(sampling_tests)
    return [Section(SECTION_KEY, "Stability under sampling", body)]
