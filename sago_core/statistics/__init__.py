"""Statistics beyond the paper: intervals, multiple-testing corrections, power, rankings,
and partial correlations across checkpoints (seed 003). Pure numpy/scipy."""
