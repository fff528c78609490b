"""Scheduled re-evaluation: which models are new, who evaluates them, the leaderboard."""
