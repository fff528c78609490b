"""How `make test` shares the suite between its two workers (pytest-xdist, ``--dist
loadgroup``).

Every test file is one group, so a file's module and session fixtures (a Prefect harness,
a loaded model, a built family) are set up once, on one worker, as in a serial run. Groups
are handed out in the order of the collection, each to the next free worker; the hook below
puts the files that take longest first (longest-processing-time-first), so the two workers
finish close together instead of one running the slowest file alone at the end. A file
listed in ``SPLIT_BY_PARAMETER`` is split into one group per parameter value (each its own
fixtures), because it alone is a large share of the suite.

``HEAVIEST_FIRST`` is an ordering, not a timing: the files measured slowest on CI's two
cores (`--durations` in CI's log), heaviest first. A file missing from it runs after them,
in collection order; a listed file that no longer exists is ignored.
"""

from __future__ import annotations

import pytest

HEAVIEST_FIRST: tuple[str, ...] = (
    "tests/conformance/test_vllm_families.py",
    "tests/conformance/test_end_to_end.py",
    "tests/conformance/test_families.py",
    "tests/flow/test_vllm_backend.py",
    "tests/flow/test_consistency_flow.py",
    "tests/integration/test_store_workers.py",
    "tests/integration/test_prefect_server.py",
    "tests/reliability/test_server_restart.py",
    "tests/storage/test_store_runs.py",
    "tests/reliability/test_unsafe_loading.py",
    "tests/flow/test_demo_unchanged.py",
    "tests/flow/test_evaluate_flow.py",
    "tests/flow/test_shards_resume.py",
    "tests/reliability/test_kill_resume.py",
    "tests/reliability/test_concurrent_runs.py",
    "tests/reliability/test_disk_full.py",
    "tests/reliability/test_cache_integrity.py",
    "tests/reliability/test_reproducible.py",
    "tests/reliability/test_cache_keys.py",
    "tests/reliability/test_api_faults.py",
    "tests/reliability/test_api_drift.py",
    "tests/reliability/test_secrets.py",
    "tests/flow/test_score_flow.py",
    "tests/flow/test_locate_flow.py",
    "tests/flow/test_api_kill_resume.py",
    "tests/flow/test_api_flow.py",
    "tests/test_bench.py",
    "tests/unit/test_patching.py",
    "tests/unit/test_backend_hf.py",
    "tests/flow/test_watch.py",
    "tests/flow/test_dry_run.py",
    "tests/unit/test_semantic_calibration.py",
    "tests/unit/test_explorer_browser.py",
    "tests/unit/test_stages.py",
    "tests/unit/test_embedded_model.py",
)

SPLIT_BY_PARAMETER: frozenset[str] = frozenset({"tests/conformance/test_families.py"})


def group_of(item: pytest.Item) -> str:
    """The xdist group of one test: its file, or its file and parameter for a split file."""
    path = item.nodeid.split("::", 1)[0]
    callspec = getattr(item, "callspec", None)
    if path in SPLIT_BY_PARAMETER and callspec is not None:
        return f"{path}:{callspec.id}"  # no brackets: xdist reads "@group" after the last "]"
    return path


def order_heaviest_first(items: list[pytest.Item]) -> None:
    """Files in ``HEAVIEST_FIRST`` order, then the rest as collected; stable inside a file."""
    rank = {path: index for index, path in enumerate(HEAVIEST_FIRST)}
    unlisted = len(rank)

    def key(indexed: tuple[int, pytest.Item]) -> tuple[int, int]:
        index, item = indexed
        return rank.get(item.nodeid.split("::", 1)[0], unlisted), index

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))
