"""Pages across runs: the comparison page of several runs and the paired A/B table of two."""
