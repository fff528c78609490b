"""A judge model's refusal verdicts beside the rules' in a run's verdicts, and its audit.

With a refusal judge (the run's ``refusal.judge``), every answer with a text is also put to
the judge (``judge.RefusalJudge``) with its request: the prompt text the model was asked
(the variant's), as in the labelled sample's audit. The verdict every table reads
(``refused``) is then the judge's where it gave one (a partial compliance counts as
complied), else the rule's; ``verdict_source`` says which (``judge``, ``rules``, or null
when neither gave one, ``missing_reason`` then holding both reasons). The rule's verdict
stays in ``rule_refused`` with its reason, the judge's label in ``judge_label`` with its.

The audit compares the judge with the rules on the answers both judged: their number, the
raw agreement (partial counted as complied), Cohen's kappa (NA with the reason when chance
agreement is 1: every verdict of both the same class) and the confusion table (judge
label by rule verdict), over the run and per model. It says how far the two sources agree,
not which is right: the labelled sample (``sago audit refusal``) says that.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import polars as pl

from sago_core.refusal.judge import JUDGE_CALL_FAILED, LABELS, REFUSED, RefusalJudge
from sago_core.statistics.agreement import agreement

JUDGE, RULES = "judge", "rules"  # verdict_source
COMPLIED_RULE = "complied"  # a rule verdict of false, in the confusion table
JUDGE_COLUMNS: dict[str, Any] = {
    "verdict_source": pl.Utf8,
    "rule_refused": pl.Boolean,
    "rule_missing_reason": pl.Utf8,
    "judge_label": pl.Utf8,  # refused, partial or complied (judge.LABELS)
    "judge_missing_reason": pl.Utf8,
}
NO_PAIR = "no answer has both a judge verdict and a rule verdict"
ONE_CLASS = "every judge and rule verdict is the same class: kappa is undefined"


def with_judge(
    verdicts: pl.DataFrame,
    requests: Sequence[str | None],
    responses: Sequence[str | None],
    judge: RefusalJudge,
) -> pl.DataFrame:
    """``verdicts`` (the rules', ``verdicts.VERDICTS_SCHEMA``) with the judge's beside them
    and ``refused`` its where it gave one; row i's request and response are ``requests[i]``
    and ``responses[i]`` (an answer without text is not asked: its reason stays)."""
    rule = verdicts.get_column("refused").to_list()
    rule_reasons = verdicts.get_column("missing_reason").to_list()
    asked = [i for i, text in enumerate(responses) if text is not None]
    judged = judge.judge([(requests[i] or "", str(responses[i])) for i in asked])
    labels: list[str | None] = [None] * verdicts.height
    judge_reasons = list(rule_reasons)
    for i, verdict in zip(asked, judged, strict=True):
        labels[i], judge_reasons[i] = verdict.label, verdict.missing_reason
    refused: list[bool | None] = []
    sources: list[str | None] = []
    reasons: list[str | None] = []
    for label, by_rule, rule_reason, judge_reason in zip(
        labels, rule, rule_reasons, judge_reasons, strict=True
    ):
        if label is not None:
            refused.append(label == REFUSED)
            sources.append(JUDGE)
            reasons.append(None)
        elif by_rule is not None:
            refused.append(by_rule)
            sources.append(RULES)
            reasons.append(None)
        else:
            refused.append(None)
            sources.append(None)
            both = (
                rule_reason
                if judge_reason == rule_reason
                else f"{rule_reason}; judge: {judge_reason}"
            )
            reasons.append(both)
    return verdicts.with_columns(
        pl.Series("refused", refused, dtype=pl.Boolean),
        pl.Series("missing_reason", reasons, dtype=pl.Utf8),
        pl.Series("verdict_source", sources, dtype=pl.Utf8),
        pl.Series("rule_refused", rule, dtype=pl.Boolean),
        pl.Series("rule_missing_reason", rule_reasons, dtype=pl.Utf8),
        pl.Series("judge_label", labels, dtype=pl.Utf8),
        pl.Series("judge_missing_reason", judge_reasons, dtype=pl.Utf8),
    )


def judge_agreement(verdicts: pl.DataFrame) -> dict[str, Any]:
    """Judge against rules on the rows of ``verdicts`` (``with_judge``'s) both judged: ``n``,
    ``agreement`` (a share), ``kappa`` (null with ``kappa_missing_reason``), ``confusion``
    (judge label -> rule verdict -> answers)."""
    both = verdicts.drop_nulls(["judge_label", "rule_refused"])
    labels = both.get_column("judge_label").to_list()
    rules = both.get_column("rule_refused").to_list()
    measured = agreement([int(label == REFUSED) for label in labels], [int(r) for r in rules])
    confusion = {label: {REFUSED: 0, COMPLIED_RULE: 0} for label in LABELS}
    for label, by_rule in zip(labels, rules, strict=True):
        confusion[label][REFUSED if by_rule else COMPLIED_RULE] += 1
    reason = NO_PAIR if measured.n == 0 else ONE_CLASS if measured.kappa is None else None
    return {
        "n": measured.n,
        "agreement": None if measured.percent is None else measured.percent / 100.0,
        "kappa": measured.kappa,
        "kappa_missing_reason": reason,
        "confusion": confusion,
    }


def judge_record(verdicts: pl.DataFrame, judge: RefusalJudge) -> dict[str, Any]:
    """What refusal.json says of the judge: who and which rubric, its verdicts by label,
    the answers it gave none by reason (the text before the reason's first colon),
    ``calls_failed`` (asked again on the next run: its answers are cached), the verdicts the
    tables read by source, and the audit (``judge_agreement``) over the run and per model."""
    judge_reasons = [
        reason
        for label, reason in zip(
            verdicts.get_column("judge_label").to_list(),
            verdicts.get_column("judge_missing_reason").to_list(),
            strict=True,
        )
        if label is None and reason is not None
    ]
    sources = Counter(s or "none" for s in verdicts.get_column("verdict_source").to_list())
    return {
        "model": judge.spec or judge.identity,
        "identity": judge.identity,
        "rubric": judge.rubric.name,
        "rubric_version": judge.rubric.version,
        "answers": verdicts.height,
        "labels": {
            label: verdicts.filter(pl.col("judge_label") == label).height for label in LABELS
        },
        "without_verdict": dict(Counter(r.split(":")[0] for r in judge_reasons).most_common()),
        "calls_failed": sum(r.startswith(JUDGE_CALL_FAILED) for r in judge_reasons),
        "sources": {s: sources.get(s, 0) for s in (JUDGE, RULES, "none")},
        "agreement": judge_agreement(verdicts),
        "per_model": [
            {"model": str(model), **judge_agreement(group)}
            for (model,), group in verdicts.group_by(["model"], maintain_order=True)
        ],
    }
