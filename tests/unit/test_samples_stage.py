"""K > 1 samples per prompt text: samples.parquet holds K rows per text, sample 0
being the generations.parquet row, each sample with its own seed, reproducible and the same
whatever its batch; sample_analysis.parquet scores each base sample under every prompt text of
its prompt, sample 0 being the analysis.parquet values. The mock backend (and a scoring
double whose values are computed by hand) here; the shared tiny model below."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from sago_core.artifacts.schemas import SAMPLE_ANALYSIS, SAMPLES
from sago_core.artifacts.store import write_parquet
from sago_core.backends.mock import MockBackend
from sago_core.backends.protocol import Generation, Sampling, ScoringRequest, TeacherForced
from sago_core.config import AnalysisSettings, GenerationSettings
from sago_core.sample_seeds import sample_seed
from sago_core.stages.analysis import analyse_pairs
from sago_core.stages.generation import generate_responses
from sago_core.stages.samples import analyse_samples, sample_responses
from tests.fakes import PROMPTS, kept_variants

MODEL = "mock:m"
KEY = ["dataset", "prompt_id", "variant_id"]


def _variants() -> pl.DataFrame:
    rows = [
        ("p1", "noise-1", "noise", "What is  the capital of France?"),
        ("p1", "replay", "replay", "What is the capital of France?"),
        ("p2", "register-1", "register", "Tell me who wrote the play Hamlet."),
        ("p2", "replay", "replay", "Who wrote the play Hamlet?"),
    ]
    return kept_variants(rows)


class Recording(MockBackend):
    """The mock backend, each call's prompts kept; an answer's token ids are its words'
    lengths (so two samples' ids differ when their words do), and its teacher-forced
    log-probability is -(characters of the prompt + sum of the ids), its entropy the
    number of ids / 10: values a test computes by hand."""

    def __init__(self, fail_on: str | None = None) -> None:
        super().__init__("m")
        self.generated: list[list[str]] = []
        self.scored: list[list[str]] = []
        self.fail_on = fail_on

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        batch_size: int,
        sampling: Sampling | None = None,
    ) -> list[Generation]:
        self.generated.append(list(prompts))
        out = []
        for row, answer in enumerate(
            super().generate(prompts, max_new_tokens, batch_size, sampling)
        ):
            ids = tuple(len(w) for w in answer.response_text.split())
            failed = (
                self.fail_on is not None
                and sampling is not None
                and (sampling.seeds[row] == int(self.fail_on))
            )
            out.append(
                Generation("", (), "failed", "server_error", sampling=answer.sampling)
                if failed
                else Generation(answer.response_text, ids, "stop", sampling=answer.sampling)
            )
        return out

    def score(
        self,
        requests: Sequence[ScoringRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[TeacherForced]:
        self.scored.append([r.prompt for r in requests])
        return [
            TeacherForced(
                None,
                -float(len(r.prompt) + sum(r.response_token_ids)),
                len(r.response_token_ids) / 10,
                len(r.response_token_ids),
                "mock: no hidden states",
            )
            for r in requests
        ]


HOT = GenerationSettings(max_new_tokens=40, temperature=0.9, samples=4, seed=3)


def _generations(backend: MockBackend, settings: GenerationSettings = HOT) -> pl.DataFrame:
    first = settings.model_copy(update={"samples": 1})
    return generate_responses(backend, MODEL, PROMPTS, _variants(), first)


def test_every_prompt_text_has_k_samples_with_their_own_seeds_and_sample_0_is_its_generation(
    tmp_path: Path,
) -> None:
    backend = Recording()
    generations = _generations(backend)
    samples = sample_responses(backend, MODEL, generations, HOT)
    assert samples.schema == pl.Schema(SAMPLES)
    # 2 prompts, each with its base, one variant and its replay: 6 texts x 4 samples
    assert samples.height == 6 * 4
    counts = samples.group_by(KEY).agg(pl.col("sample").sort()).sort(KEY)
    assert counts["sample"].to_list() == [[0, 1, 2, 3]] * 6
    expected = [
        sample_seed(3, MODEL, d, p, v, s)
        for d, p, v, s in samples.select(*KEY, "sample").iter_rows()
    ]
    assert samples["seed"].to_list() == expected
    assert len(set(expected)) == 24
    first = samples.filter(pl.col("sample") == 0).drop("sample", "seed")
    assert first.equals(generations.sort(KEY))
    # the samples differ (the mock swaps words at T 0.9), each as its seed draws it
    base_p1 = samples.filter((pl.col("prompt_id") == "p1") & (pl.col("variant_id") == "base"))
    assert base_p1["response_text"].n_unique() > 1
    assert (
        samples["engine"].str.json_decode().struct.field("sampling").struct.field("seed").to_list()
        == expected
    )
    # samples 1..3 in two calls after generation's: every non-replay text, then the replays
    extra = backend.generated[-2:]
    assert len(backend.generated) == 4
    replays = set(_variants().filter(pl.col("family") == "replay")["text"])
    assert len(extra[0]) == 4 * 3 and len(extra[1]) == 2 * 3
    assert set(extra[1]) <= replays and extra[0].count(PROMPTS["prompt"][0]) == 3
    # a rerun writes the same bytes
    again = sample_responses(Recording(), MODEL, _generations(Recording()), HOT)
    one = write_parquet(samples, tmp_path / "a" / "samples.parquet", SAMPLES)
    two = write_parquet(again, tmp_path / "b" / "samples.parquet", SAMPLES)
    assert one.read_bytes() == two.read_bytes()


def test_samples_another_run_drew_are_read_back_not_drawn_again(tmp_path: Path) -> None:
    """With the answer rows' cache, a second stage over the same texts (a budgeted run's
    next round) asks the backend nothing and returns the same samples; one new text draws
    only its own K - 1 samples."""
    from sago_core.artifacts.row_cache import RowCache
    from sago_core.artifacts.schemas import GENERATIONS
    from sago_core.stages.generation import ANSWER_COLUMNS

    cache = RowCache(tmp_path, "generations", "mock m", {c: GENERATIONS[c] for c in ANSWER_COLUMNS})
    generations = _generations(Recording())
    first = sample_responses(Recording(), MODEL, generations, HOT, cache)
    assert first.equals(sample_responses(Recording(), MODEL, generations, HOT))
    again = Recording()
    assert sample_responses(again, MODEL, generations, HOT, cache).equals(first)
    assert again.generated == []
    one_more = Recording()
    grown = sample_responses(one_more, MODEL, _generations(Recording()).head(5), HOT, cache)
    assert one_more.generated == [] and grown.height == 5 * 4
    fresh = _generations(Recording()).with_columns(
        pl.when(pl.col("variant_id") == "base")
        .then(pl.col("prompt_text") + " Now.")
        .otherwise(pl.col("prompt_text"))
        .alias("prompt_text")
    )
    new = Recording()
    sample_responses(new, MODEL, fresh, HOT, cache)
    assert sum(len(call) for call in new.generated) == 2 * 3  # two new base texts x 3


def test_a_sample_does_not_depend_on_k_or_on_its_batch() -> None:
    generations = _generations(Recording())
    four = sample_responses(Recording(), MODEL, generations, HOT)
    two = sample_responses(
        Recording(), MODEL, generations, HOT.model_copy(update={"samples": 2, "batch_size": 1})
    )
    assert two.height == 6 * 2
    assert two.equals(four.filter(pl.col("sample") < 2))


def test_each_base_sample_is_scored_under_every_prompt_text_and_sample_0_is_the_analysis() -> None:
    backend = Recording()
    generations = _generations(backend)
    settings = AnalysisSettings()
    analysis = analyse_pairs(backend, generations, settings)
    samples = sample_responses(backend, MODEL, generations, HOT)
    backend.scored.clear()
    scored = analyse_samples(backend, samples, analysis, settings)
    assert scored.schema == pl.Schema(SAMPLE_ANALYSIS)
    assert scored.height == 6 * 4
    first = scored.filter(pl.col("sample") == 0)
    assert first.select("logprob", "mean_entropy", "n_response_tokens").equals(
        analysis.sort(KEY).select("logprob", "mean_entropy", "n_response_tokens")
    )
    # by hand: text v of prompt p scores base sample s as -(len(text) + sum(word lengths))
    texts = dict(zip(generations.select(KEY).iter_rows(), generations["prompt_text"], strict=True))
    bases = {
        (p, s): text
        for p, s, text in samples.filter(pl.col("variant_id") == "base")
        .select("prompt_id", "sample", "response_text")
        .iter_rows()
    }
    for d, p, v, s, logprob, entropy, n, reason in scored.select(
        *KEY, "sample", "logprob", "mean_entropy", "n_response_tokens", "missing_reason"
    ).iter_rows():
        words = [len(w) for w in bases[(p, s)].split()]
        assert logprob == -(len(texts[(d, p, v)]) + sum(words))
        assert (n, entropy, reason) == (len(words), len(words) / 10, None)
    # samples 1..3 in two calls: 4 non-replay texts x 3 samples, then 2 replays x 3
    assert [len(c) for c in backend.scored] == [12, 6]
    replays = set(_variants().filter(pl.col("family") == "replay")["text"])
    assert set(backend.scored[1]) <= replays


def test_sample_scores_another_run_made_are_read_back_not_scored_again(tmp_path: Path) -> None:
    """With the scores' row cache, a second analysis of the same samples (a budgeted run's
    next round) scores nothing and gives the same table."""
    from sago_core.backends.target import ModelTarget
    from sago_core.stages.samples import score_cache

    target = ModelTarget(spec=MODEL, backend="mock", model_id="m", identity=MODEL)
    cache = score_cache(tmp_path, target)
    backend = Recording()
    generations = _generations(backend)
    settings = AnalysisSettings()
    analysis = analyse_pairs(backend, generations, settings)
    samples = sample_responses(backend, MODEL, generations, HOT)
    plain = analyse_samples(Recording(), samples, analysis, settings)
    first = analyse_samples(Recording(), samples, analysis, settings, cache)
    assert first.equals(plain)
    again = Recording()
    assert analyse_samples(again, samples, analysis, settings, cache).equals(plain)
    assert again.scored == []
    assert cache.get([]).is_empty() and len(list(tmp_path.rglob("part-*.parquet"))) == 1


def test_a_failed_base_sample_is_missing_with_its_reason() -> None:
    failing = sample_seed(3, MODEL, "d", "p2", "base", 2)
    backend = Recording(fail_on=str(failing))
    generations = _generations(backend)
    samples = sample_responses(backend, MODEL, generations, HOT)
    failed = samples.filter(pl.col("failure_reason").is_not_null())
    assert failed.select("prompt_id", "variant_id", "sample").rows() == [("p2", "base", 2)]
    assert failed["response_text"].to_list() == [None]
    scored = analyse_samples(
        backend,
        samples,
        analyse_pairs(backend, generations, AnalysisSettings()),
        AnalysisSettings(),
    )
    missing = scored.filter(pl.col("logprob").is_null())
    assert missing.select("prompt_id", "sample").unique().rows() == [("p2", 2)]
    assert missing.height == 3  # base, register-1 and replay of p2
    assert set(missing["missing_reason"]) == {"no base answer to score (generation failed)"}
    assert set(missing["n_response_tokens"]) == {0}


# ------------------------------------------------------------------ the shared tiny model


def test_tiny_model_samples_are_seeded_per_row_and_scored_as_alone(tiny_model_dir: Path) -> None:
    from sago_core.backends.hf import HFBackend
    from sago_core.backends.model_source import resolve_local_model

    backend = HFBackend(resolve_local_model(str(tiny_model_dir)))
    hot = GenerationSettings(max_new_tokens=6, temperature=1.0, samples=3, seed=5, batch_size=16)
    generations = _generations(backend, hot)
    samples = sample_responses(backend, "tiny", generations, hot)
    assert samples.height == 6 * 3
    # one batch of 12 rows, then batches of 4 (other companions, other padding): every
    # sample's tokens are the same
    smaller = sample_responses(
        backend, "tiny", generations, hot.model_copy(update={"batch_size": 4})
    )
    assert smaller["response_token_ids"].to_list() == samples["response_token_ids"].to_list()
    assert smaller["response_text"].to_list() == samples["response_text"].to_list()
    base = samples.filter((pl.col("prompt_id") == "p1") & (pl.col("variant_id") == "base"))
    assert len({tuple(ids) for ids in base["response_token_ids"]}) == 3
    # a base sample's teacher-forced log-probability under a variant equals that pair
    # scored alone, whatever the batch it was scored in
    settings = AnalysisSettings(batch_size=8)
    analysis = analyse_pairs(backend, generations, settings)
    scored = analyse_samples(backend, samples, analysis, settings)
    pick = scored.filter(
        (pl.col("prompt_id") == "p2")
        & (pl.col("variant_id") == "register-1")
        & (pl.col("sample") == 2)
    ).row(0, named=True)
    ids = samples.filter(
        (pl.col("prompt_id") == "p2") & (pl.col("variant_id") == "base") & (pl.col("sample") == 2)
    )["response_token_ids"].to_list()[0]
    own = backend.score([ScoringRequest("Tell me who wrote the play Hamlet.", tuple(ids))], 1)[0]
    assert pick["n_response_tokens"] == len(ids)
    assert abs(pick["logprob"] - own.logprob) < 1e-4
    assert abs(pick["mean_entropy"] - own.mean_entropy) < 1e-4


# ------------------------------------------------------------------ an API without seeds


def test_an_api_sample_is_asked_even_where_the_provider_takes_no_seed(tmp_path: Path) -> None:
    """A provider LiteLLM lists without ``seed`` (deepinfra) is sent none; its samples 1..K-1
    are still requests of their own, not cache hits of sample 0 asked in an earlier call."""
    from sago_core.backends.api import ApiBackend
    from sago_core.backends.api_ledger import ApiLedger
    from sago_core.config import ApiSettings, ApiSpending
    from tests.openai_server import ScriptedServer

    hot = GenerationSettings(max_new_tokens=20, temperature=0.7, samples=3, seed=1)
    with ScriptedServer() as server:
        settings = ApiSettings.model_validate({"base_url": server.base_url, "max_retries": 0})
        ledger = ApiLedger(tmp_path / "ledger.jsonl", ApiSpending())
        backend = ApiBackend(
            "deepinfra/mock-1", settings, tmp_path / "cache", ledger, api_key="sk-local-test"
        )
        assert "seed" not in backend.sampling_options(Sampling(0.7, 1.0, 0, (1,)))[0]
        generations = _generations(backend, hot)
        assert server.total_calls() == 6  # 2 prompts x (base, variant, replay)
        samples = sample_responses(backend, "deepinfra/mock-1", generations, hot)
        assert samples["failure_reason"].null_count() == samples.height == 18
        assert server.total_calls() == 18
        again = sample_responses(backend, "deepinfra/mock-1", generations, hot)
        assert server.total_calls() == 18 and again.equals(samples)
