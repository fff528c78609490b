"""The refusal section's account of a refusal judge (the run's ``refusal.judge``): which model
and rubric gave the verdicts, how many of the verdicts the tables read are the judge's and
how many the rules' (where the judge gave none), and the judge's agreement with the rules
on the answers both judged, per model, with the confusion table. It reads refusal.json's
``judge`` record (``refusal/judged.py``); a run without a judge shows nothing here.
"""

from __future__ import annotations

import html
from typing import Any

from sago_core.refusal.judge import LABELS
from sago_core.refusal.judged import COMPLIED_RULE, JUDGE, RULES
from sago_core.report.markup import na
from sago_core.report.markup import table as _table


def _number(value: float | None, reason: str | None = None) -> str:
    return na(reason) if value is None else f"{value:.2f}"


def _agreement_rows(record: dict[str, Any]) -> list[list[str]]:
    parts = record["per_model"] if len(record["per_model"]) > 1 else []
    rows = []
    for name, audit in [("all models", record["agreement"]), *((p["model"], p) for p in parts)]:
        confusion = audit["confusion"]
        rows.append(
            [
                html.escape(str(name)),
                str(audit["n"]),
                _number(audit["agreement"]),
                _number(audit["kappa"], audit["kappa_missing_reason"]),
                *(
                    f"{confusion[label]['refused']} / {confusion[label][COMPLIED_RULE]}"
                    for label in LABELS
                ),
            ]
        )
    return rows


def judge_html(record: dict[str, Any] | None) -> str:
    """The judge's paragraph and its agreement table; empty without a judge."""
    if record is None:
        return ""
    sources = record["sources"]
    missing = record["without_verdict"]
    gaps = (
        " The judge gave no verdict for "
        + "; ".join(f"{n} answer(s): {html.escape(str(why))}" for why, n in missing.items())
        + "."
        if missing
        else ""
    )
    head = ["", "answers both judged", "agreement", "Cohen's kappa"]
    head += [f"judge {label}: rules refused / complied" for label in LABELS]
    return (
        f"<p><b>A judge model gave the verdicts</b>: <code>{html.escape(record['model'])}</code>"
        f" with the rubric <code>{html.escape(record['rubric'])}</code> "
        f"(refused, partial or complied; partial counts as complied). Of "
        f"{record['answers']} answers, {sources[JUDGE]} verdicts are the judge's, "
        f"{sources[RULES]} the rules' (where the judge gave none) and {sources['none']} have "
        f"neither.{gaps} Every rate below reads these verdicts; the rules' own stay in "
        "<code>refusal_verdicts.parquet</code> (<code>rule_refused</code>, "
        "<code>verdict_source</code>). Judge and rules on the answers both judged (agreement "
        "says how far they agree, not which is right):</p>" + _table(head, _agreement_rows(record))
    )
