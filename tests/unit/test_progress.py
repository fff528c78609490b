"""Progress of a long stage: a line when its batches start, then at least every few
seconds with done/total and the time left, and one at the end; nothing for a stage that
counted nothing, and nothing at all outside a reporter."""

from __future__ import annotations

import itertools
import time
import warnings
from pathlib import Path

import pytest

from sago_core.backends.hf import HFBackend
from sago_core.backends.model_source import resolve_local_model
from sago_core.progress import Progress, counted, duration, each, reporting, stepper


def test_a_line_says_done_of_total_the_rate_and_the_time_left() -> None:
    line = Progress("rewrite-structural", done=120, total=576, elapsed=120.0)
    assert line.seconds_left == pytest.approx(456.0)
    assert line.text == ("rewrite-structural: 120/576 (21%), 1/s, about 8 min left, 2 min so far")
    start = Progress("generate", done=0, total=40, elapsed=0.5)
    assert start.seconds_left is None
    assert start.text == "generate: 0/40 (0%), time left unknown yet, 1 s so far"
    end = Progress("generate", done=40, total=40, elapsed=3725.0, final=True)
    assert end.text == "generate: 40/40 (100%) done in 1 h 02 min"
    expected = ["1 s", "89 s", "2 min", "1 h 00 min"]
    assert [duration(s) for s in (0.2, 89.0, 91.0, 3599.0)] == expected


def test_lines_come_at_the_start_while_a_slow_batch_runs_and_at_the_end() -> None:
    lines: list[tuple[float, Progress]] = []
    started = time.monotonic()
    with reporting("score-pairs", lambda p: lines.append((time.monotonic() - started, p)), 0.1):
        done: list[int] = []
        for batch in counted([[1, 2], [3, 4], [5]], total=5):
            time.sleep(0.35)  # one batch lasts several reporting periods
            done += batch
    assert done == [1, 2, 3, 4, 5]
    first, last = lines[0][1], lines[-1][1]
    assert (first.done, first.total, first.final) == (0, 5, False)
    assert lines[0][0] < 0.05, "the first line must come when the work starts"
    assert (last.done, last.total, last.final) == (5, 5, True)
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(lines)]
    assert max(gaps[:-1]) < 0.3, f"a slow batch went quiet: gaps {gaps}"
    dones = [p.done for _, p in lines]
    assert dones == sorted(dones) and {2, 4} <= set(dones)


def test_a_quick_stage_that_counts_nothing_says_nothing_and_outside_a_reporter_neither() -> None:
    lines: list[Progress] = []
    with reporting("compute-deltas", lines.append, 5.0):
        time.sleep(0.05)
    assert lines == []
    assert list(counted([[1], [2]], total=2)) == [[1], [2]]
    assert list(each(iter("ab"), total=2)) == ["a", "b"]


def test_a_stage_still_loading_its_model_says_it_is_working() -> None:
    lines: list[Progress] = []
    with reporting("rewrite-structural", lines.append, 0.05):
        time.sleep(0.2)  # a model loading: nothing counted yet
        for _ in counted([[1, 2]], total=2):
            pass
    first = lines[0]
    assert (first.total, first.final) == (0, False)
    said = "rewrite-structural: working (loading, or nothing counted yet), 1 s so far"
    assert first.text == said
    assert lines[-1].final and (lines[-1].done, lines[-1].total) == (2, 2)
    done = Progress("build-instances", 0, 0, 12.0, final=True)
    assert done.text == "build-instances: done in 12 s"


def test_a_long_batch_moves_by_its_decode_steps_and_settles_when_it_ends() -> None:
    lines: list[Progress] = []
    with reporting("generate", lines.append, 0.02):
        for batch in counted([[1, 2, 3, 4]], total=4):
            step = stepper(len(batch), steps=8)
            assert step is not None
            for _ in range(4):  # half the steps: half the batch
                step()
            time.sleep(0.1)
            assert lines[-1].done == pytest.approx(2.0)
            assert lines[-1].text.startswith("generate: 2/4 (50%)")
            for _ in range(10):  # more calls than steps never count past the batch
                step()
            time.sleep(0.1)
            assert lines[-1].done == pytest.approx(4.0)
    assert lines[-1].final and lines[-1].done == 4
    assert stepper(4, 8) is None  # outside a reporter


def test_a_sink_that_fails_never_stops_the_work() -> None:
    def broken(_: Progress) -> None:
        raise OSError("log closed")

    with reporting("generate", broken, 0.01):
        assert sum(len(b) for b in counted([[1, 2], [3]], total=3)) == 3


@pytest.mark.slow
def test_the_transformers_backend_counts_its_generation_and_scoring_batches(
    tiny_model_dir: Path,
) -> None:
    backend = HFBackend(resolve_local_model(str(tiny_model_dir)))
    lines: list[Progress] = []
    prompts = ["one", "two two", "three three three"]
    with reporting("generate", lines.append, 60.0):
        outputs = backend.generate(prompts, max_new_tokens=2, batch_size=2)
    assert [(p.done, p.total, p.final) for p in lines] == [(0, 3, False), (3, 3, True)]
    # Counting the decode steps changes no answer.
    quiet = backend.generate(prompts, max_new_tokens=2, batch_size=2)
    assert [o.response_token_ids for o in outputs] == [o.response_token_ids for o in quiet]


@pytest.mark.slow
def test_a_stage_task_files_its_progress_artifact_under_its_own_task_run(harness: None) -> None:
    """The first line may come from the timer thread (a model still loading): the artifact is
    still created in the task run's context, with no 'outside of a flow or task run'."""
    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterTaskRunId
    from prefect.context import TaskRunContext

    from sago.tasks.progress import with_progress

    def stage_work() -> str:
        time.sleep(0.3)  # loading: the timer thread says the first lines
        for _ in counted([[1, 2], [3]], total=3):
            time.sleep(0.05)
        context = TaskRunContext.get()
        assert context is not None
        return str(context.task_run.id)

    staged = task(name="slow-stage")(with_progress("slow-stage", stage_work, every=0.1))

    @flow(name="progress-artifact")
    def run() -> str:
        return str(staged())

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        task_run_id = run()
    deadline = time.monotonic() + 30
    with get_client(sync_client=True) as client:
        while True:
            found = client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    task_run_id=ArtifactFilterTaskRunId(any_=[task_run_id])
                )
            )
            if found and found[0].description and "done in" in found[0].description:
                break
            assert time.monotonic() < deadline, [a.description for a in found]
            time.sleep(0.2)
    assert found[0].type == "progress" and found[0].data == 100
    assert found[0].description.startswith("slow-stage: 3/3 (100%) done in ")
