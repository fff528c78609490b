"""The cost of a sample at T > 0: wall seconds per sample at K = 1 and at K = 4 on
the embedded model, a small workload (a few prompts, one variant per family), per stage.

At K = 1 a prompt text is answered once (``generate_responses``) and its base answer is
teacher-forced under every prompt text (``analyse_pairs``). At K = 4 samples 1..3 are added as
a run adds them (``sample_responses``, ``analyse_samples``: sample 0 reused), so the cost per
sample at K = 4 is (sample 0's cost + the extra samples' cost) / (4 x texts): below K = 1's
when the extra samples batch better than one answer per text. What vLLM saves by computing a
text's prompt once for its K samples (its prefix cache) is measured in ``bench/sampling_vllm.py``.

``python -m bench.sampling`` prints the table on a workload of its own;
``python -m bench.sampling WORKDIR`` (the bench's subprocess) measures the workload saved in
WORKDIR and writes WORKDIR/sampling/timings.json.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench.timing import Stopwatch
from bench.workload import Workload

SAMPLES = 4
TEMPERATURE = 0.7
# A few seconds to tens of seconds on a laptop CPU: 3 prompts, one variant per family.
WORKLOAD = Workload(n=1, max_new_tokens=16, limit=3, per_family=1)
OUT = "sampling"


def measure(workdir: Path) -> None:
    """Time the four stages on the workload in ``workdir`` (one process, model loaded once)."""
    from sago_core.backends.factory import open_backend
    from sago_core.backends.target import model_target
    from sago_core.config import AnalysisSettings, GenerationSettings, RunConfig
    from sago_core.stages.analysis import analyse_pairs
    from sago_core.stages.generation import generate_responses
    from sago_core.stages.samples import analyse_samples, sample_responses

    spec, prompts, variants = Workload.load(workdir)
    watch = Stopwatch()
    with watch.stage("load"):
        backend = open_backend(model_target(RunConfig(), spec.model))
    hot = GenerationSettings(
        max_new_tokens=spec.max_new_tokens,
        batch_size=96,
        temperature=TEMPERATURE,
        samples=SAMPLES,
    )
    scoring = AnalysisSettings(batch_size=32)
    with watch.stage("generate"):
        one = hot.model_copy(update={"samples": 1})
        generations = generate_responses(backend, spec.model, prompts, variants, one)
    with watch.stage("analyse"):
        analysis = analyse_pairs(backend, generations, scoring)
    with watch.stage("sample"):
        samples = sample_responses(backend, spec.model, generations, hot)
    with watch.stage("analyse-samples"):
        scored = analyse_samples(backend, samples, analysis, scoring)
    out = workdir / OUT
    out.mkdir(parents=True, exist_ok=True)
    watch.write(
        out / "timings.json",
        model=spec.model,
        texts=generations.height,
        samples=SAMPLES,
        sample_rows=samples.height,
        scored_rows=scored.height,
        tokens_k1=int(generations["response_token_ids"].list.len().sum()),
        tokens=int(samples["response_token_ids"].list.len().sum()),
    )


def table(result: dict) -> list[str]:
    """Wall seconds per sample (generation) and per teacher-forced sequence, K = 1 vs K."""
    seconds, texts, k = result["seconds"], result["texts"], result["samples"]
    gen_1 = seconds["generate"] / texts
    gen_k = (seconds["generate"] + seconds["sample"]) / (texts * k)
    tf_1 = seconds["analyse"] / texts
    tf_k = (seconds["analyse"] + seconds["analyse-samples"]) / (texts * k)
    return [
        f"cost per sample at T {TEMPERATURE} ({texts} prompt texts, {result['model']}, "
        f"model load {seconds['load']:.1f} s apart):",
        f"{'stage':<16}{'K=1 s/sample':>14}{f'K={k} s/sample':>14}{'K=1/K ratio':>13}",
        f"{'generation':<16}{gen_1:>14.3f}{gen_k:>14.3f}{gen_1 / gen_k:>12.2f}x",
        f"{'teacher-forced':<16}{tf_1:>14.3f}{tf_k:>14.3f}{tf_1 / tf_k:>12.2f}x",
        f"generated tokens: {result['tokens_k1']} at K=1, {result['tokens']} at K={k}",
    ]


def sampling_costs(workdir: Path, workload: Workload = WORKLOAD) -> list[str]:
    """The table, measured in a subprocess on ``workload`` saved below ``workdir``."""
    from bench.pipelines import run_pipeline

    folder = workdir / OUT
    workload.save(folder)
    return table(run_pipeline("bench.sampling", folder, OUT))


def main() -> int:
    if len(sys.argv) > 1:
        measure(Path(sys.argv[1]))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="sago-bench-sampling-"))
    print("\n".join(sampling_costs(workdir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
