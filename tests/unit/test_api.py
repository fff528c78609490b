"""The Python API's own logic, without a run: ``sago.configure`` merges its arguments into
one strict configuration as ``sago run`` does; ``RunResult`` reads a finished folder's
tables (the verdict rule by hand: Holm-adjusted p below 0.05 is "above tolerance");
``sago.compare`` and ``sago.run`` refuse what they cannot do before any work."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import sago
from sago_core.artifacts.layout import FINISHED_RUN_FILES, SUMMARY_FILE
from sago_core.config import RunConfig
from sago_core.errors import ConfigError


def test_configure_merges_arguments_into_the_sections() -> None:
    config = sago.configure(
        ["mock:a"], "builtin", n=3, max_new_tokens=8, generation={"batch_size": 4}, seed=7
    )
    assert config.models == ("mock:a",) and config.datasets == ("builtin",)
    assert config.n == 3 and config.seed == 7 and config.preset == "demo"
    assert config.generation.max_new_tokens == 8 and config.generation.batch_size == 4


def test_configure_names_a_mistyped_key() -> None:
    with pytest.raises(ConfigError, match="sedd"):
        sago.configure(["mock:a"], sedd=1)


def test_run_refuses_a_config_with_settings_beside_it() -> None:
    with pytest.raises(ConfigError, match="a RunConfig alone"):
        sago.run(config=RunConfig(), n=2)


def _finished(folder: Path, p_holm: list[float | None]) -> Path:
    folder.mkdir()
    for name in FINISHED_RUN_FILES:
        (folder / name).touch()
    pl.DataFrame(
        {
            "model": ["mock:a"] * 3,
            "dataset": ["__pooled__"] * 3,
            "axis": ["bleu", "bert", "act"],
            "sgs": [0.3, 0.1, None],
            "p_holm": p_holm,
            "missing_reason": [None, None, "no hidden states"],
        }
    ).write_parquet(folder / SUMMARY_FILE)
    return folder


def test_a_loaded_run_reads_its_summary_and_verdicts(tmp_path: Path) -> None:
    result = sago.load(_finished(tmp_path / "run-1", [0.01, 0.2, None]))
    assert result.run_id == "run-1" and result.summary.height == 3
    verdicts = dict(zip(result.verdicts["axis"], result.verdicts["verdict"], strict=True))
    assert verdicts == {
        "bleu": "above tolerance",
        "bert": "not shown above tolerance",
        "act": None,
    }
    assert result.report is None and result.card == ()


def test_compare_refuses_an_output_of_the_wrong_format_before_reading(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"compare paired writes a \.parquet file"):
        sago.compare([tmp_path / "a", tmp_path / "b"], mode="paired", out=tmp_path / "x.html")
    with pytest.raises(ConfigError, match="exactly two runs"):
        sago.compare([tmp_path / "a"], mode="paired")
