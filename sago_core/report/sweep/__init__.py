"""A temperature sweep's own page and card, across the runs of its temperatures."""
