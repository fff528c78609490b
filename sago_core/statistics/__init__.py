"""Statistics beyond the paper: intervals, multiple-testing corrections, power, rankings,
and partial correlations across checkpoints (the consistency study). Pure numpy/scipy."""
