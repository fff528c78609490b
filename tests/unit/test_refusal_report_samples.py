"""The report's refusal section at K > 1 samples (sago_core/report/sections/refusal_sampled.py,
refusal_tables.py): it shows the refusal stage's tables, which judge every sample, not
sample 0 alone, and beside each family rate the flip rate over the sample pairs and the
base's own rate between its samples.

The hand-built samples are test_refusal_samples' (K = 3). By hand:
- harmful h1, register: base [refused, refused, complied], variant [complied, complied,
  refused]: breach 2 x 2 / 9 = 0.44, the base's own 2 x 1 / 6 = 0.33, excess 0.11;
  over-refusal 1 x 1 / 9 = 0.11 against the base's own 0.33, excess -0.22;
- harmless s1, language: base answered 3 times, the French variant refused once of three:
  over-refusal 3 x 1 / 9 = 0.33, the base's own 0.00, excess 0.33; breach 0.00;
- base prompts: h1 refused by 2 of its 3 samples (a majority: refused), s1 by none.
Sample 0 alone would show a whole breach (1.00) and a whole over-refusal (1.00).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from sago_core.artifacts.layout import REFUSAL_FILE, REFUSAL_FLIPS_FILE
from sago_core.report.sections.refusal import refusal_sections
from sago_core.report.sections.refusal_tables import read_refusal, refusal_from_run
from sago_core.stages.refusal import RefusalTables, refusal_tables, write_refusal
from tests.unit.test_refusal_samples import _samples
from tests.unit.test_refusal_stage import prompts_with_kinds


def _run() -> tuple[pl.DataFrame, pl.DataFrame, RefusalTables]:
    prompts = prompts_with_kinds({"h1": "harmful", "s1": "harmless"})
    samples = _samples()
    generations = samples.filter(pl.col("sample") == 0).drop("sample")
    tables = refusal_tables(prompts, generations, samples)
    assert tables is not None
    return prompts, generations, tables


def _cells(body: str, family: str) -> list[str]:
    """The cells of the beyond-the-base table's row for ``family``."""
    table = body.split("Beyond the base's own flips", 1)[1].split("</table>", 1)[0]
    row = re.search(rf"<tr><td[^>]*>m</td>.*?>{family}</td>(.*?)</tr>", table)
    assert row is not None, family
    return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))


def test_the_section_reads_every_sample_and_the_base_s_own_rate() -> None:
    prompts, generations, tables = _run()
    (section,) = refusal_sections(prompts, generations, None, tables)
    body = section.body
    assert "m K = 3 samples per prompt text" in body
    assert _cells(body, "register") == [
        "1",
        "<b>0.44 − 0.33 = 0.11</b>",
        "0.11 − 0.33 = -0.22",
    ]
    assert _cells(body, "language") == ["1", "0.00 − 0.00 = 0.00", "<b>0.33 − 0.00 = 0.33</b>"]
    # the family table shows the excess over every sample, not sample 0's whole flips
    assert re.search(r">register</td><td>breach</td><td>1</td><td><b>0\.11 ", body)
    # a harmless row has no breach column value: its refused -> complied is its own column
    na = '<span class="na">NA</span>'
    assert re.search(rf">language</td><td>over-refusal</td><td>1</td><td>{na}.*?<b>0\.33 ", body)
    # base prompts: h1 refused by a majority of its samples (2 of 3 samples: 0.67)
    assert re.search(
        r"<td[^>]*>m</td><td[^>]*>harmful</td><td>1</td><td>1</td><td>1</td><td>1\.00</td>"
        r"<td>0\.67</td>",
        body,
    )
    # the worst pairs give the excess with the rate and the base's own behind it
    assert "0.11 (0.44 − 0.33)" in body and "0.33 (0.33 − 0.00)" in body
    assert "variant answer (sample 0)" in body


def test_without_the_stage_s_tables_the_section_reads_sample_0() -> None:
    prompts, generations, _ = _run()
    (section,) = refusal_sections(prompts, generations)
    assert "Beyond the base's own flips" not in section.body
    assert re.search(r">register</td><td>breach</td><td>1</td><td><b>1\.00 ", section.body)
    assert "share of samples refused" not in section.body


def test_the_stage_s_files_read_back_as_written(tmp_path: Path) -> None:
    prompts, generations, tables = _run()
    write_refusal(tables, tmp_path)
    back = read_refusal(tmp_path / REFUSAL_FILE)
    assert back is not None
    for name in ("verdicts", "flips", "rates", "curve", "best_of_n"):
        assert getattr(back, name).equals(getattr(tables, name)), name
    assert refusal_sections(prompts, generations, None, back) == refusal_sections(
        prompts, generations, None, tables
    )
    (tmp_path / REFUSAL_FLIPS_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=REFUSAL_FLIPS_FILE):
        read_refusal(tmp_path / REFUSAL_FILE)


def test_a_run_that_measured_no_refusal_has_no_tables(tmp_path: Path) -> None:
    assert refusal_from_run(tmp_path) is None  # a run from before the stage
    write_refusal(None, tmp_path)
    assert json.loads((tmp_path / REFUSAL_FILE).read_text())["measured"] is False
    assert refusal_from_run(tmp_path) is None
