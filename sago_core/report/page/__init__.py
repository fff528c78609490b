"""report.html, the run's page: its assembly, the headline ("At a glance") and the story."""
