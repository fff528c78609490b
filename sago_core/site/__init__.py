"""The results site across runs and releases (``sago site``, rebuilt by ``sago-watch``).

A static, offline folder of HTML pages over a runs folder: ``collect`` reads what the runs
and the watch's registry hold, ``trends`` draws each model family's SGS per axis release
after release (95% intervals, significant regressions from the paired verdicts marked),
``pages`` renders the pages, ``build`` writes them (with copies of each run's report and
card, linked back to the site) and ``address`` says where the site can be opened.
"""
