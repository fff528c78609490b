"""The notebook tutorial (docs/tutorials/python-api.md) runs as written: its Python cells,
in order, in one namespace, from an empty folder, on the ``mock:`` backend it uses; then
what it claims is checked against the files it wrote."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "python-api.md"
CELL = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def cells(text: str) -> list[str]:
    return CELL.findall(text)


@pytest.mark.slow  # two mock runs through the flow: about 27 s on 2 CPU cores
def test_the_tutorial_runs_as_written(
    harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sago

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / ".prefect"))  # restored after the test
    found = cells(TUTORIAL.read_text(encoding="utf-8"))
    assert len(found) >= 5  # the page is read, not skipped
    namespace: dict[str, object] = {}
    for cell in found:
        exec(compile(cell, str(TUTORIAL), "exec"), namespace)
    release_a = namespace["release_a"]
    assert isinstance(release_a, sago.RunResult)
    assert release_a.folder.parent == tmp_path / "runs"  # the folder `sago run` writes
    on_disk = pl.read_parquet(release_a.folder / "summary.parquet")
    assert release_a.summary.equals(on_disk)
    assert release_a.report is not None and release_a.report.is_file()
    verdicts = release_a.verdicts
    assert set(verdicts["verdict"].drop_nulls()) <= {"above tolerance", "not shown above tolerance"}
    paired = namespace["paired"]
    assert isinstance(paired, sago.Comparison) and paired.path == Path("paired.parquet")
    assert (tmp_path / "paired.md").is_file()


def test_load_refuses_a_folder_that_is_not_a_finished_run(tmp_path: Path) -> None:
    import sago
    from sago_core.errors import InputError

    with pytest.raises(InputError, match="is not a finished run"):
        sago.load(tmp_path)
