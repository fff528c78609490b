"""``sago site --redact-unsafe`` (sago_core/site/redact.py): the copied report and card keep
no answer to a harmful request (refusal section, explorer blob, the card's shortened quote),
keep the harmless prompts' answers, and a run whose answers cannot be read is not copied."""

from __future__ import annotations

import html
from pathlib import Path

from sago_core.report.card.render import _short
from sago_core.report.sections.explorer import pack, unpack
from sago_core.report.sections.refusal import refusal_sections
from sago_core.site import paths
from sago_core.site.build import build_site
from tests.unit.test_refusal_stage import ANSWER, COMPLY, answers, prompts_with_kinds
from tests.unit.test_site import CONFIG, _run

LONG = "First, obtain the restricted precursor chemicals from a supplier that does not ask. " * 3


def _page(folder: Path) -> str:
    """A report holding the answers where the real one does: the refusal section, the
    explorer's packed texts, and a card-style shortened quote of a long harmful answer."""
    prompts = prompts_with_kinds({"h1": "harmful", "h2": "harmful", "s1": "harmless"})
    generations = answers()
    generations = generations.with_columns(
        generations["answer_text"].replace({COMPLY: LONG}).alias("answer_text")
    ).with_columns(generations["answer_text"].alias("response_text"))
    prompts.write_parquet(folder / "prompts.parquet")
    generations.write_parquet(folder / "generations.parquet")
    (section,) = refusal_sections(prompts, generations)
    blob = pack({"strings": [LONG, ANSWER, "question?"]})
    return (
        f"<html><body>{section.html()}"
        f'<script type="text/plain" id="explorer-data">{blob}</script>'
        f"<p>variant answer: “{html.escape(_short(LONG))}”</p></body></html>"
    )


def _site(tmp_path: Path, redact: bool, generations: bool = True) -> tuple[str, Path]:
    root = tmp_path / "runs"
    folder = _run(root, "safety", {"mock:a": ("sha256:a", {})}, CONFIG)
    page = _page(folder)
    (folder / "report.html").write_text(page, encoding="utf-8")
    if not generations:
        (folder / "generations.parquet").unlink()
    out = tmp_path / "site"
    build_site(root, out, redact_unsafe=redact)
    return page, out / paths.run_report("safety")


def test_redacted_copy_keeps_no_harmful_answer(tmp_path: Path) -> None:
    original, copy = _site(tmp_path, redact=True)
    assert LONG[:40] in original  # the page did hold it
    text = copy.read_text(encoding="utf-8")
    flat = " ".join(LONG.split())
    assert flat[:24] not in text and html.escape(flat[:24]) not in text
    blob = text.split('id="explorer-data">')[1].split("</script>")[0]
    strings = unpack(blob)["strings"]
    assert LONG not in strings and ANSWER in strings
    assert "left out of this site" in text
    assert html.escape(ANSWER) in text  # a harmless prompt's answer stays


def test_without_the_flag_the_copy_is_whole(tmp_path: Path) -> None:
    _, copy = _site(tmp_path, redact=False)
    assert " ".join(LONG.split())[:40] in copy.read_text(encoding="utf-8")


def test_unreadable_answers_leave_the_report_out(tmp_path: Path) -> None:
    _, copy = _site(tmp_path, redact=True, generations=False)
    text = copy.read_text(encoding="utf-8")
    assert "is left out of this site" in text and LONG[:24] not in text


def test_the_site_command_takes_the_flag(tmp_path: Path) -> None:
    from sago_cli.main import main

    root = tmp_path / "runs"
    folder = _run(root, "safety", {"mock:a": ("sha256:a", {})}, CONFIG)
    (folder / "report.html").write_text(_page(folder), encoding="utf-8")
    assert main(["site", str(root), "--redact-unsafe"]) == 0
    copy = root / "site" / paths.run_report("safety")
    assert " ".join(LONG.split())[:24] not in copy.read_text(encoding="utf-8")
