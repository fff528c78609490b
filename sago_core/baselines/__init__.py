"""BERTScore's rescale baselines (``bertscore.rescale_with_baseline``): the table of known
baselines and the rescaling. A package of its own, importing nothing else of sago, so the
configuration can check a baseline exists without an import cycle."""
