"""The report page's sections that read an artifact of their own: tails and axis structure,
where the instability sits, languages, peer indices, sampling, refusal and the instance explorer."""
