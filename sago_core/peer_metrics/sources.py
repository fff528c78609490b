"""The indices' names and the papers that define them (one owner for both)."""

from __future__ import annotations

import polars as pl

PSS_CORRECT = "pss_correct"
# ProSA's PSS formula on Y = BERTScore F1 against the base answer: not ProSA's PSS,
# whose Y scores each answer against the task; a pair of variants here counts the gap between
# two similarities to the base, not how far apart the two answers are. Never set beside
# ProSA's published PSS values.
PSS_BERT_TO_BASE = "pss_bert_to_base"
# POSIX as the paper defines it: the full N x N matrix (RunConfig.posix_matrix; NA when off)
POSIX = "posix"
# its column j = base alone (the base answer under every prompt), what the analysis stage
# scores in every run; "posix" in runs written before the full matrix existed
POSIX_BASE_COLUMN = "posix_base_column"
PDR = "pdr"
MAX_P = "max_p"
AVG_P = "avg_p"
CPS = "cps"
INDICES: tuple[str, ...] = (
    PSS_CORRECT,
    PSS_BERT_TO_BASE,
    POSIX,
    POSIX_BASE_COLUMN,
    PDR,
    MAX_P,
    AVG_P,
    CPS,
)

_PROSA = "ProSA PSS, Zhuo et al. 2024 (arXiv:2410.12405)"
_MULTI_PROMPT = "State of What Art?, Mizrahi et al. 2024 (arXiv:2401.00595)"
SOURCES: dict[str, str] = {
    PSS_CORRECT: _PROSA,
    PSS_BERT_TO_BASE: "ProSA's PSS formula (Zhuo et al. 2024, arXiv:2410.12405) on BERTScore "
    "to the base answer: not ProSA's PSS",
    POSIX: "POSIX, Chatterjee et al. 2024 (arXiv:2410.02185)",
    POSIX_BASE_COLUMN: "POSIX's formula (Chatterjee et al. 2024, arXiv:2410.02185) on the base "
    "answer's column alone: not the paper's POSIX",
    PDR: "PromptBench PDR, Zhu et al. 2023 (arXiv:2306.04528)",
    MAX_P: _MULTI_PROMPT,
    AVG_P: _MULTI_PROMPT,
    CPS: _MULTI_PROMPT,
}

# What sago computes where it departs from the peer's definition (null: the definition in full).
POSIX_PAIRS = (
    "N-1 of the N(N-1) ordered pairs per instance: the base answer scored under each variant "
    "prompt (the paper's column j = base only; posix is the full matrix)"
)
BERTSCORE_AGAINST_BASE = (
    "Y = BERTScore F1 of each prompt's answer against the base answer (the base's own is 1), "
    "not a score against the task; a pair of variants counts the gap between their "
    "similarities to the base, not the distance between their answers: not comparable with "
    "ProSA's published PSS"
)
COVERAGE: dict[str, str | None] = {
    PSS_CORRECT: None,
    PSS_BERT_TO_BASE: BERTSCORE_AGAINST_BASE,
    POSIX: None,
    POSIX_BASE_COLUMN: POSIX_PAIRS,
    PDR: None,
    MAX_P: None,
    AVG_P: None,
    CPS: None,
}

# Names an index had in artifacts written before (old -> current): readers map them, so an
# old peer_metrics.parquet still reads.
RENAMED: dict[str, str] = {"pss_bertscore": PSS_BERT_TO_BASE}
# Before the full matrix, "posix" was the base column; its coverage said so (POSIX_PAIRS).
BASE_COLUMN_MARK = "N-1 of the N(N-1) ordered pairs"
assert POSIX_PAIRS.startswith(BASE_COLUMN_MARK)


def current_names(peer: pl.DataFrame) -> pl.DataFrame:
    """``peer`` (peer_metrics.parquet) with every renamed index under its current name: an
    older run's "posix", the base column (its coverage says so), is ``posix_base_column``."""
    old_posix = (pl.col("index") == POSIX) & pl.col("coverage").str.contains(
        BASE_COLUMN_MARK, literal=True
    ).fill_null(False)
    return peer.with_columns(
        pl.when(old_posix)
        .then(pl.lit(POSIX_BASE_COLUMN))
        .otherwise(pl.col("index").replace(RENAMED))
        .alias("index")
    )
