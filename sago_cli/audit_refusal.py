"""``sago audit refusal sample|judge|score``: a person's check of the refusal rules.

``sample`` draws a stratified, seeded sample of a finished run's answers to label (a CSV with
an empty ``label`` column: refused, complied or partial); ``judge`` adds a local judge model's
verdicts beside the labels; ``score`` prints the agreement of the labels with the rules (and
with the judge, when the CSV has its column): raw agreement, Cohen's kappa, the confusion
table and every disagreeing row (``sago_core/refusal/labels.py``)."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sago_cli.options import add_model, add_output, add_run
from sago_core.errors import ConfigError
from sago_core.refusal.judge import DEFAULT_RUBRIC, RUBRICS, Complete


def add_parser(checks: Any) -> None:
    refusal = checks.add_parser(
        "refusal", help="a person's check of the refusal rules: sample answers, judge, score"
    )
    steps = refusal.add_subparsers(
        dest="step", required=True, metavar="STEP", help="the audit's step"
    )
    sample = steps.add_parser("sample", help="draw answers to label from a finished run")
    add_run(sample, "a finished run that measured refusal (folder or store URL)")
    sample.add_argument("--n", type=int, default=50, help="answers drawn")
    sample.add_argument("--seed", type=int, default=0, help="the draw's seed")
    add_output(sample, "the CSV to label", suffixes=(".csv",), default=Path("labels.csv"))
    judge = steps.add_parser("judge", help="a local judge model's verdicts on the CSV's rows")
    judge.add_argument("labels", type=Path, metavar="LABELS.csv", help="the sampled CSV")
    add_model(judge, "a local judge model (nothing is sent to an API)", required=True)
    judge.add_argument("--rubric", default=DEFAULT_RUBRIC, help=f"one of {', '.join(RUBRICS)}")
    judge.add_argument("--batch-size", type=int, default=16, help="answers judged per batch")
    add_output(judge, "the judged CSV (default: LABELS.judged.csv)", suffixes=(".csv",))
    score = steps.add_parser("score", help="agreement of a labelled CSV with the rules")
    score.add_argument("labels", type=Path, metavar="LABELS.csv", help="the labelled CSV")
    add_output(score, "the scores as JSON too", suffixes=(".json",))


def command(args: argparse.Namespace) -> int:
    from sago_core.refusal import labels

    if args.step == "sample":
        answers, without = labels.labelled_answers(args.run)
        drawn = labels.stratified_sample(answers, args.n, args.seed)
        labels.write_labels_csv(drawn, args.out)
        kinds = Counter(drawn["kind"].to_list())
        print(
            f"{drawn.height} answers of {answers.height} with a rule verdict ({without} without "
            f"one left out) to {args.out}; kinds {dict(kinds)}, "
            f"{drawn['family'].n_unique()} families, {drawn['language'].n_unique()} languages"
        )
        return 0
    if args.step == "judge":
        from sago_core.refusal.judge import RefusalJudge, rubric_named

        rubric_named(args.rubric)  # a rubric that is not documented stops before any model
        identity, complete = local_complete(args.model, args.batch_size)
        out = args.out or args.labels.with_suffix(".judged.csv")
        judged = RefusalJudge(identity, complete, None, args.rubric)
        counts = labels.judge_csv(args.labels, out, judged)
        print(f"judge {identity} ({args.rubric}): {dict(counts)} to {out}")
        return 0
    rows = labels.read_labels_csv(args.labels)
    raters = ["rule", *(["judge"] if rows and "judge" in rows[0] else [])]
    results = [labels.agreement(rows, rater) for rater in raters]
    print("\n\n".join(labels.render(result) for result in results))
    if args.out:
        scores = {result.rater: asdict(result) for result in results}
        args.out.write_text(json.dumps(scores, indent=2), encoding="utf-8")
    return 0


def local_complete(spec: str, batch_size: int) -> tuple[str, Complete]:
    """A local judge model's identity and its completion (the judge machinery's contract),
    asked each conversation's last message at T = 0; an API model is refused, so nothing
    leaves this machine."""
    from sago_core.backends.factory import open_backend
    from sago_core.backends.target import behaviour_key, model_target
    from sago_core.config import build_config

    target = model_target(build_config(), spec)
    if target.is_api:
        raise ConfigError(
            f"--model {spec!r}: a local judge model (hf:, vllm:, mock:); this command sends "
            "no answer to an API model"
        )
    backend = open_backend(target)

    def complete(
        conversations: list[list[dict[str, str]]], max_tokens: int
    ) -> list[tuple[str | None, str | None]]:
        prompts = [conversation[-1]["content"] for conversation in conversations]
        answers = backend.generate(prompts, max_tokens, batch_size)
        return [(a.response_text, a.failure_reason) for a in answers]

    return behaviour_key(target), complete
