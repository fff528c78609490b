"""The BERTScore encoder is named beside every BERT number, and ``sago compare`` refuses runs
scored by different encoders unless asked."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago_cli.compare import check_encoders
from sago_cli.main import main
from sago_core.report.card.build import build_card, write_card
from sago_core.report.compare.page import encoder_banner
from sago_core.report.summary_md import render_summary
from sago_core.scoring.encoder import Encoder, encoder_of, run_encoder
from sago_core.scoring.summary import summarize
from tests.unit.test_card import _run as card_run
from tests.unit.test_card import _values
from tests.unit.test_compare import _run as compare_run
from tests.unit.test_report import _deltas

MINILM = {"model": "minilm-l6", "num_layers": 6, "semantic_threshold": 0.78, "batch_size": 64}
ROBERTA = {"model": "roberta-large", "num_layers": 17, "semantic_threshold": 0.85}


def _with_encoder(run: Path, bertscore: dict) -> Path:
    for name in ("manifest.json", "run_config.json"):
        path = run / name
        saved = json.loads(path.read_text()) if path.is_file() else {}
        if name == "manifest.json":
            saved["config"] = {**(saved.get("config") or {}), "bertscore": bertscore}
        else:
            saved["bertscore"] = bertscore
        path.write_text(json.dumps(saved))
    return run


def test_the_encoder_label_reads_the_saved_configuration(tmp_path: Path) -> None:
    assert encoder_of({"bertscore": MINILM}) == Encoder("minilm-l6", 6)
    assert Encoder("minilm-l6", 6).label == "all-MiniLM-L6-v2 (embedded), layer 6"
    assert Encoder("roberta-large", 17, True).label == (
        "roberta-large, layer 17, rescaled with baseline"
    )
    assert Encoder("/models/my-encoder/", 4).label == "my-encoder, layer 4"
    # a saved config leaves out only rescale_with_baseline at its default (off)
    assert encoder_of({"bertscore": {"model": "minilm-l6"}}) is None
    assert encoder_of({"preset": "comparison"}) is None and encoder_of(None) is None
    run = _with_encoder(compare_run(tmp_path / "r", "hf:m", flip=False), MINILM)
    (run / "run_config.json").unlink()  # the manifest's copy is read then
    assert run_encoder(run) == Encoder("minilm-l6", 6)


def test_compare_refuses_runs_scored_by_different_encoders_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _with_encoder(compare_run(tmp_path / "run-a", "hf:m", flip=False), MINILM)
    b = _with_encoder(compare_run(tmp_path / "run-b", "hf:n", flip=True), ROBERTA)
    out = tmp_path / "cmp.html"
    assert main(["compare", "page", str(a), str(b), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and not out.exists()
    assert "run-a: all-MiniLM-L6-v2 (embedded), layer 6" in error
    assert "run-b: roberta-large, layer 17" in error
    assert "--allow-different-encoders" in error
    assert main(["compare", str(a), str(b), "--out", str(out), "--allow-different-encoders"]) == 0
    assert "WARNING: the runs' BERT numbers come from different" in capsys.readouterr().out
    page = out.read_text()
    assert "Warning: BERT numbers from different encoders, not comparable" in page
    assert "run-b: roberta-large, layer 17" in page

    same = _with_encoder(compare_run(tmp_path / "run-c", "hf:o", flip=True), MINILM)
    check_encoders([a, same], allow=False)  # one encoder: no refusal
    banner = encoder_banner([a, same])
    assert "are BERTScore F1 by" in banner and "not comparable" not in banner
    assert "run-c: all-MiniLM-L6-v2 (embedded), layer 6" in banner


def test_summary_md_names_the_encoder_beside_the_bert_row() -> None:
    from sago_core.scoring.prompt_scores import score_prompts

    summary = summarize(score_prompts(_deltas()))
    label = Encoder("minilm-l6", 6).label
    text = render_summary(summary, encoder=label)
    bert_rows = [line for line in text.splitlines() if line.startswith("| bert")]
    assert bert_rows and all(
        line.startswith("| bert (all-MiniLM-L6-v2 (embedded), layer 6) |") for line in bert_rows
    )
    assert f"BERT: BERTScore F1 by {label}" in text
    assert "| bleu |" in text  # the other axes keep their names
    assert "(embedded)" not in render_summary(summary)  # a caller that does not know


def test_the_card_names_the_encoder_beside_its_bert_numbers(tmp_path: Path) -> None:
    from sago_core.artifacts.schemas import PEER_METRICS

    run = _with_encoder(card_run(tmp_path / "rel", "hf:/m/rel", _values()), MINILM)
    pl.DataFrame(
        [
            {
                "model": "hf:/m/rel",
                "dataset": "__pooled__",
                "family": "__all__",
                "index": "pss_bert_to_base",
                "value": 0.125,
                "n": 4,
                "coverage": None,
                "source": "a paper",
                "missing_reason": None,
            }
        ],
        schema=PEER_METRICS,
    ).write_parquet(run / "peer_metrics.parquet")
    card = build_card(run)
    assert card["bert_encoder"] == "all-MiniLM-L6-v2 (embedded), layer 6"
    md = write_card(run)[0].read_text()
    assert "| bert (all-MiniLM-L6-v2 (embedded), layer 6) | " in md
    assert "| pss_bert_to_base (all-MiniLM-L6-v2 (embedded), layer 6) | 0.1250 |" in md
    assert "| bleu | " in md


def test_the_report_names_the_encoder_in_its_pooled_table_peer_section_and_headline() -> None:
    from sago_core.report.page.headline import glances, headline_html
    from sago_core.report.page.results import pooled_table as _pooled_table
    from sago_core.report.sections.peer import peer_sections
    from sago_core.scoring.encoder import provenance_encoder
    from sago_core.scoring.prompt_scores import score_prompts
    from tests.unit.test_peer_metrics import _analysis, _instances, peer_metrics_on_few

    summary = summarize(score_prompts(_deltas()))
    label = provenance_encoder({"config": {"bertscore": MINILM}})
    assert label == "all-MiniLM-L6-v2 (embedded), layer 6"
    assert provenance_encoder({}) is None and provenance_encoder({"config": {"n": 3}}) is None
    pooled = _pooled_table(summary, label)
    assert ">bert (all-MiniLM-L6-v2 (embedded), layer 6)<" in pooled
    assert ">bleu</td>" in pooled
    from tests.unit.test_peer_metrics import _deltas as peer_deltas

    peer = peer_metrics_on_few(_instances(), peer_deltas(), _analysis())
    section = "".join(peer_sections(peer, summary, label))
    assert f"SGS bert ({label})" in section and f"PSS form, BERT to base ({label})" in section
    glance = glances(summary, _deltas(), None, None, None, None)
    assert f"are BERTScore F1 by {label}" in headline_html(glance, label)
    assert "BERTScore F1 by" not in headline_html(glance)
