"""report.html: self-contained, four real figures, tables equal to values from the deltas."""

from __future__ import annotations

import base64
import re

import numpy as np
import polars as pl

from sago_core.report.html import render_report
from sago_core.scoring.axes import AXES, SCALES
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _deltas() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for dataset in ("d1", "d2"):
        for p in range(4):
            for strength, position in ((2.0, "prefix"), (-2.0, "suffix"), (4.0, "global")):
                for axis in AXES:
                    missing = axis == "act"  # as for an API model: no hidden states
                    delta = None if missing else float(-abs(rng.normal(0.1, 0.05)) * SCALES[axis])
                    rows.append(
                        {
                            "model": "hf:m",
                            "dataset": dataset,
                            "prompt_id": f"{dataset}-{p}",
                            "variant_id": f"register:{strength:+.0f}:{position}",
                            "family": "register",
                            "subtype": "politeness",
                            "strength": strength,
                            "position": position,
                            "axis": axis,
                            "delta": delta,
                            "delta_norm": None if delta is None else delta / SCALES[axis],
                            "missing_reason": "backend exposes no hidden states"
                            if missing
                            else None,
                        }
                    )
    return pl.DataFrame(rows)


def test_report_tables_equal_values_recomputed_from_deltas() -> None:
    deltas = _deltas()
    scores = score_prompts(deltas)
    summary = summarize(scores)
    variants = pl.DataFrame({"family": ["register", "register"], "kept": [True, False]})
    page = render_report(summary, scores, deltas, variants, {"run_id": "r", "config": {}})

    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 4
    assert all(base64.b64decode(i).startswith(PNG_SIGNATURE) for i in images)
    assert "http://" not in page and "https://" not in page  # opens offline

    for axis in ("bleu", "bert", "prob", "ent", "mr"):
        per_prompt = (
            deltas.filter(pl.col("axis") == axis)
            .group_by("dataset", "prompt_id")
            .agg((pl.col("delta_norm") ** 2).mean().sqrt().alias("s"))
        )
        pooled = per_prompt.group_by("dataset").agg(pl.col("s").mean())["s"].mean()
        cell = re.search(rf"<td class=\"l\">{axis}</td><td>([0-9.]+)", page)
        assert cell is not None and float(cell.group(1)) == round(pooled, 4)
    assert re.search(r'<td class="l">act</td><td>NA</td>', page)
    assert "backend exposes no hidden states" in page
