"""Statistics beyond the paper: intervals, multiple-testing corrections, power, rankings,
partial correlations across checkpoints (the consistency study), and the paired A/B
comparison of two runs with the design behind it. Pure numpy/scipy over artifacts."""
