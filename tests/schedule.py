"""How `make test` shares the suite between its two workers (pytest-xdist, ``--dist
loadfile``).

Every test file goes whole to one worker, so a file's module and session fixtures (a Prefect
harness, a loaded model, a built family) are set up once, as in a serial run. Files are
handed out in the order of the collection, each to the next free worker; the hook below puts
the files that take longest first (longest-processing-time-first), so the two workers finish
close together instead of one running the slowest file alone at the end.

``HEAVIEST_FIRST`` is an ordering, not a timing: the files measured slowest on two cores,
heaviest first. A file missing from it runs after them, in collection order; a listed file
that no longer exists is ignored. ``FileSeconds`` prints, at the end of every run, the files
that took longest (set-up, calls and tear-down of their tests added up), so CI's log says
where to re-rank a file when the suite grows.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

HEAVIEST_FIRST: tuple[str, ...] = (
    "tests/integration/test_prefect_server.py",
    "tests/flow/test_vllm_backend.py",
    "tests/reliability/test_signals.py",
    "tests/storage/test_store_runs.py",
    "tests/reliability/test_server_restart.py",
    "tests/flow/test_demo_unchanged.py",
    "tests/reliability/test_disk_full.py",
    "tests/conformance/test_vllm_families.py",
    "tests/flow/test_shards_resume.py",
    "tests/reliability/test_kill_resume.py",
    "tests/reliability/test_budget_resume.py",
    "tests/flow/test_consistency_flow.py",
    "tests/reliability/test_concurrent_runs.py",
    "tests/reliability/test_reproducible.py",
    "tests/reliability/test_secrets.py",
    "tests/conformance/test_end_to_end.py",
    "tests/flow/test_evaluate_flow.py",
    "tests/flow/test_sampling_flow.py",
    "tests/flow/test_budget_sampling_flow.py",
    "tests/reliability/test_cache_keys.py",
    "tests/reliability/test_cache_integrity.py",
    "tests/flow/test_api_kill_resume.py",
    "tests/reliability/test_api_faults.py",
    "tests/flow/test_score_flow.py",
    "tests/flow/test_api_flow.py",
    "tests/flow/test_refusal_judge_flow.py",
    "tests/unit/test_report.py",
    "tests/flow/test_watch.py",
    "tests/integration/test_tracking.py",
    "tests/unit/test_watch_budget.py",
    "tests/unit/test_embedded_model.py",
    "tests/flow/test_locate_flow.py",
    "tests/reliability/test_api_drift.py",
    "tests/unit/test_patching.py",
    "tests/test_bench.py",
    "tests/conformance/test_families.py",
    "tests/reliability/test_unsafe_loading.py",
    "tests/reliability/test_bad_inputs.py",
    "tests/flow/test_dry_run.py",
    "tests/flow/test_plugin_run.py",
    "tests/unit/test_training_flow.py",
    "tests/unit/test_training_trl.py",
    "tests/unit/test_training_lora.py",
    "tests/storage/test_training_store.py",
    "tests/unit/test_explorer_browser.py",
    "tests/unit/test_backend_hf.py",
    "tests/unit/test_semantic_calibration.py",
    "tests/unit/test_stages.py",
)


def order_heaviest_first(items: list[pytest.Item]) -> None:
    """Files in ``HEAVIEST_FIRST`` order, then the rest as collected; stable inside a file."""
    rank = {path: index for index, path in enumerate(HEAVIEST_FIRST)}
    unlisted = len(rank)

    def key(indexed: tuple[int, pytest.Item]) -> tuple[int, int]:
        index, item = indexed
        return rank.get(item.nodeid.split("::", 1)[0], unlisted), index

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]


UNRANKED_S = 20.0  # a file this slow belongs in HEAVIEST_FIRST: the summary says so


class FileSeconds:
    """Seconds per test file, from the reports (under xdist the controller gets every
    worker's), printed as the slowest files at the end of the run."""

    def __init__(self, shown: int = 30) -> None:
        self.shown = shown
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid.split("::", 1)[0]] += report.duration

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.seconds:
            return
        terminalreporter.write_sep("=", f"slowest {self.shown} test files")
        slowest = sorted(self.seconds.items(), key=lambda item: -item[1])[: self.shown]
        for path, seconds in slowest:
            unranked = path not in HEAVIEST_FIRST and seconds >= UNRANKED_S
            listed = "  (not ranked in tests/schedule.py)" if unranked else ""
            terminalreporter.write_line(f"{seconds:9.1f}s {path}{listed}")
        terminalreporter.write_line(f"{sum(self.seconds.values()):9.1f}s in all files")
