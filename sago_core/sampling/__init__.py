"""Statistics of sampling at T > 0: K samples per (prompt,
variant), the base included, and the numbers that separate what the wording changes from
what resampling the same prompt already changes.

- ``distances``: the sample-by-sample distance matrices of one (prompt, variant) pair;
- ``excess``: the prompt-induced excess of a text axis (E = D - (W_base + W_variant) / 2),
  of mirroring (flag shares) and of the teacher-forced axes (Prob, Ent);
- ``permutation``: the per-prompt permutation test of "variant and base samples come from
  one distribution";
- ``flips``: answer-flip rates beyond the base's own self-flip rate;
- ``variance``: the nested prompt / variant / sample decomposition and the prompt-induced
  share with its bootstrap interval over prompts;
- ``spread``: the number of distinct meanings among K samples and their entropy.

Pure numpy/scipy: no torch, no Prefect. Bad input (wrong shapes, K < 1, NaN) raises
``ValueError`` naming what is wrong; a value that cannot be computed from good input is
None with a ``missing_reason``, never 0.
"""
