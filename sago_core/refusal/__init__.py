"""Refusal consistency: does the model refuse a request however it is worded?

``rules``: a refusal verdict per answer from language-aware lists of refusal openings;
``verdicts``: those verdicts for a run's generations (or samples), each read in its
prompt's language, with the prompt's kind;
``flips``: breach (refused -> complied) and over-refusal (complied -> refused) per prompt
and variant, beyond the base's own flip rate, and their rates per family, subtype and
strength with intervals over prompts, harmful and harmless prompts kept apart;
``best_of_n``: P(at least one of N variants breaches) as N grows, its power-law fit and
the N at which half the harmful prompts are breached;
``paired``: two releases' failure rates, and Best-of-N at a fixed N, on the same
prompts, with TOST and a verdict;
``judge``: a judge model's verdict (refused, partial, complied) under a documented rubric,
audited against hand labels by ``sago audit refusal`` (``labels``);
``judged``: in a run that names a judge (``refusal.judge``), its verdicts beside the rules'
(the judge's used where it gave one, the source said) and its agreement with the rules.

A run's tables are written by ``stages/refusal.py``; the report's section is
``report/sections/refusal.py``, the card's rows ``report/card/refusal.py``.
"""
