"""The indices' names and the papers that define them (one owner for both)."""

from __future__ import annotations

PSS_CORRECT = "pss_correct"
PSS_BERTSCORE = "pss_bertscore"
POSIX = "posix"
PDR = "pdr"
MAX_P = "max_p"
AVG_P = "avg_p"
CPS = "cps"
INDICES: tuple[str, ...] = (PSS_CORRECT, PSS_BERTSCORE, POSIX, PDR, MAX_P, AVG_P, CPS)

_PROSA = "ProSA PSS, Zhuo et al. 2024 (arXiv:2410.12405)"
_MULTI_PROMPT = "State of What Art?, Mizrahi et al. 2024 (arXiv:2401.00595)"
SOURCES: dict[str, str] = {
    PSS_CORRECT: _PROSA,
    PSS_BERTSCORE: _PROSA,
    POSIX: "POSIX, Chatterjee et al. 2024 (arXiv:2410.02185)",
    PDR: "PromptBench PDR, Zhu et al. 2023 (arXiv:2306.04528)",
    MAX_P: _MULTI_PROMPT,
    AVG_P: _MULTI_PROMPT,
    CPS: _MULTI_PROMPT,
}

# What sago computes where it departs from the peer's definition (null: the definition in full).
POSIX_PAIRS = (
    "N-1 of the N(N-1) ordered pairs per instance: the base answer scored under each variant "
    "prompt (sago teacher-forces the base answer only)"
)
BERTSCORE_AGAINST_BASE = (
    "Y = BERTScore F1 of each prompt's answer against the base answer (the base's own is 1), "
    "not against a reference answer"
)
COVERAGE: dict[str, str | None] = {
    PSS_CORRECT: None,
    PSS_BERTSCORE: BERTSCORE_AGAINST_BASE,
    POSIX: POSIX_PAIRS,
    PDR: None,
    MAX_P: None,
    AVG_P: None,
    CPS: None,
}
