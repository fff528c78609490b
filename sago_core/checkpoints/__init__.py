"""Model series for the consistency study: fine-tuning trajectories and quantisation ladders."""
