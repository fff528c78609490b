"""What a run would do, worked out without loading a model or calling an API (`--dry-run`).

Exact where the configuration decides: prompts per dataset, variant candidates per family
(surface noise and the replay are always kept), rewrite requests, generations and
teacher-forced sequences per model, API requests and the output tokens they may ask for.
Bounded where only a model decides: register and structural variants pass the semantic
filter (BERTScore, a model) at run time and the rewriter may fail, so their kept counts,
and the generations and judge calls that follow from them, are upper bounds ("up to").

Every text a model answers is answered ``generation.samples`` times (K, one seed each):
generations, teacher-forced sequences and API requests of evaluated models are K per text.

Tokens sent to an API are estimated as characters / 4 (a provider's tokenizer is not
available offline); the characters themselves are exact. The cost uses ``api.prices`` or
LiteLLM's local price table, with every request asking for its full ``max_tokens``: a
ceiling, not a forecast. Answers already cached are not subtracted (the plan is for a
fresh cache), except structural rewrites and translations, whose cache is checked.

Machine translation (``variants.translation``) sends the translator one request per
(prompt, language), then one per usable translation back into English (round trips and
the back check): that second count is an upper bound, and the back-translations'
characters are estimated as their prompts'. Translations and back-translations already
cached are counted apart and never sent.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from sago_core.artifacts.json_cache import JsonCache
from sago_core.artifacts.layout import RunLayout
from sago_core.axes.judge import JUDGE_MAX_TOKENS, JudgeRequest, judge_prompt
from sago_core.backends.patching import declared_layers
from sago_core.backends.target import ModelTarget, RunTargets, behaviour_key, model_target
from sago_core.budget.design import Grid
from sago_core.budget.dry_run import BudgetPlan, budget_lines, candidate_grid, plan_budget
from sago_core.config import RunConfig, TranslationSettings, parallel_entry
from sago_core.data.references import PARALLEL_REFERENCES, reference_lines
from sago_core.registry.axes import axes
from sago_core.registry.families import filtered_families
from sago_core.stages.posix_matrix import planned_sequences
from sago_core.stages.structural import model_rewrite_tasks, rewrite_key, rewrite_tasks
from sago_core.stages.translation import forward_tasks, needs_back_translation, translation_key
from sago_core.stages.variants import build_variant_candidates
from sago_core.variants.translation import ROUND_TRIP_FAMILY, TranslationTask
from sago_core.vocabulary import BASE_LANGUAGE, LANGUAGE_FAMILY, REPLAY_FAMILY

CHARS_PER_TOKEN = 4


@dataclass
class ApiTraffic:
    """Requests one API model (or tool) would be sent, and what they carry."""

    spec: str
    role: str  # "evaluated", "rewriter", "translator" or "judge"
    requests: int = 0
    requests_bounded: bool = False  # True: an upper bound (depends on the semantic filter)
    input_chars: int = 0
    output_token_ceiling: int = 0
    estimated_chars: int = 0  # the part of input_chars that is an estimate (unwritten texts)

    @property
    def input_tokens_estimate(self) -> int:
        return math.ceil(self.input_chars / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class PatchingCost:
    """Activation patching of one local model: one forward per (variant, layer), plus the
    unpatched variants and their bases. ``layers`` None: "all" of a model whose layer count
    is known only once it loads."""

    variants: int  # an upper bound when filtered families exist
    layers: int | None

    @property
    def forwards(self) -> int | None:
        return None if self.layers is None else self.variants * self.layers


@dataclass
class TranslationPlan:
    """What machine translation costs (``variants.translation``): the candidates it makes
    and the translator requests not yet cached."""

    translator: str  # the model spec
    languages: tuple[str, ...]
    translated: int  # language (mt:xx) candidates: prompts x languages
    round_trips: int  # round_trip candidates (0 when round trips are off)
    forward: int = 0  # requests into the languages, not cached
    back: int = 0  # requests back into English, not cached (an upper bound)
    cached: int = 0  # translations and back-translations already cached
    input_chars: int = 0
    estimated_chars: int = 0  # the part of input_chars that is an estimate

    @property
    def requests(self) -> int:
        return self.forward + self.back


@dataclass
class RunPlan:
    prompts: dict[str, int]
    candidates: dict[str, int]  # per family, before the semantic filter
    kept_exact: dict[str, int]  # per family always kept (noise, replay)
    kept_up_to: dict[str, int]  # per family decided by the filter (upper bound)
    rewrites_cached: int
    generations: dict[str, int]  # per model, upper bound when filtered families exist
    teacher_forced: dict[str, int]  # per local model
    api: list[ApiTraffic] = field(default_factory=list)
    cost_usd: float | None = None
    cost_unknown: list[str] = field(default_factory=list)
    budget_hits: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    patching: dict[str, PatchingCost] = field(default_factory=dict)  # per local model
    # per model: the axes its backend can fill (registry/axes.py needs, backend capabilities)
    axes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # language variants per language code (empty without ``languages``)
    languages: dict[str, int] = field(default_factory=dict)
    # machine translation (None without ``variants.translation``)
    translation: TranslationPlan | None = None
    # why a bounded family may keep fewer than its candidates (default: the semantic filter)
    bounds: dict[str, str] = field(default_factory=dict)
    # a budgeted run's schedule (None without ``budget``)
    budgeted: BudgetPlan | None = None
    # POSIX's full matrix: teacher-forced sequences per local model (None: posix_matrix off)
    posix_matrix: int | None = None


def measured_axes(target: ModelTarget) -> tuple[str, ...]:
    """The registered axes whose needs ``target``'s backend declares it can meet."""
    can = target.declared.capabilities
    return tuple(axis.name for axis in axes() if axis.needs <= can)


def _prompt_counts(prompts: pl.DataFrame) -> dict[str, int]:
    return dict(sorted(Counter(prompts["dataset"].to_list()).items()))


def _rewrites(
    prompts: pl.DataFrame, config: RunConfig, rewriter: ModelTarget | None, layout: RunLayout
) -> tuple[list[str], int]:
    """Instructions the rewriter would be sent, and how many are already cached."""
    grid = config.variants.structural
    if grid is None or rewriter is None:
        return [], 0
    cache = JsonCache(layout.cache.rewrites)
    todo, cached = [], 0
    for prompt in prompts["prompt"].to_list():
        for task in model_rewrite_tasks(prompt, grid):
            key = rewrite_key(behaviour_key(rewriter), task, prompt, grid.max_new_tokens)
            if cache.get(key) is None:
                todo.append(task.instruction)
            else:
                cached += 1
    return todo, cached


def translator_target(config: RunConfig, targets: RunTargets) -> ModelTarget | None:
    """The translator's target, resolved as the run's other tools are (an evaluated model's
    weights are reused)."""
    settings = config.variants.translation
    if settings is None:
        return None
    known = targets.models.get(settings.translator)
    return model_target(config, settings.translator, known.source if known else None)


def _translations(
    prompts: pl.DataFrame, settings: TranslationSettings, translator: ModelTarget, layout: RunLayout
) -> TranslationPlan:
    """Translator requests per (prompt, language), checked against the translation cache."""
    cache = JsonCache(layout.cache.rewrites)
    identity, max_new = behaviour_key(translator), settings.max_new_tokens
    back = needs_back_translation(settings)
    count = len(prompts) * len(settings.languages)
    plan = TranslationPlan(
        translator.spec, settings.languages, count, count if settings.round_trip else 0
    )
    for prompt in prompts["prompt"].to_list():
        for task in forward_tasks(prompt, settings):
            hit = cache.get(translation_key(identity, task, max_new))
            if hit is None:
                plan.forward += 1
                plan.input_chars += len(task.instruction)
                if back:  # the translation is unknown: counted as long as its prompt
                    unknown = TranslationTask(task.target, BASE_LANGUAGE, prompt)
                    plan.back += 1
                    plan.input_chars += len(unknown.instruction)
                    plan.estimated_chars += len(prompt)
                continue
            plan.cached += 1
            if back:
                home = TranslationTask(task.target, BASE_LANGUAGE, hit["text"])
                if cache.get(translation_key(identity, home, max_new)) is None:
                    plan.back += 1
                    plan.input_chars += len(home.instruction)
                else:
                    plan.cached += 1
    return plan


def plan_run(
    config: RunConfig,
    prompts: pl.DataFrame,
    targets: RunTargets,
    layout: RunLayout,
    prices: dict[str, tuple[float, float] | None],
) -> RunPlan:
    """``prices``: USD per input and output token per API spec (None: unknown)."""
    candidates = build_variant_candidates(prompts, config.variants, config.seed)
    structural = config.variants.structural
    rewriter = targets.rewriter
    instructions, rewrites_cached = _rewrites(prompts, config, rewriter, layout)
    families = Counter(candidates["family"].to_list())
    if structural is not None:
        families["structural"] = sum(
            len(rewrite_tasks(p, structural)) for p in prompts["prompt"].to_list()
        )
    translation = config.variants.translation
    translator = translator_target(config, targets)
    translated = None
    bounds = {}
    if translation is not None and translator is not None:
        translated = _translations(prompts, translation, translator, layout)
        families[LANGUAGE_FAMILY] += translated.translated
        bounds[LANGUAGE_FAMILY] = "machine translations: usable and back-checked"
        if translated.round_trips:
            families[ROUND_TRIP_FAMILY] = translated.round_trips
    filtered = filtered_families() | set(bounds)
    kept_exact = {f: n for f, n in families.items() if f not in filtered}
    kept_up_to = {f: n for f, n in families.items() if f in filtered}
    texts_per_model = len(prompts) + sum(families.values())
    per_model = texts_per_model * config.generation.samples
    bounded = any(kept_up_to.values())
    plan = RunPlan(
        prompts=_prompt_counts(prompts),
        candidates=dict(sorted(families.items())),
        kept_exact=dict(sorted(kept_exact.items())),
        kept_up_to=dict(sorted(kept_up_to.items())),
        rewrites_cached=rewrites_cached,
        generations={m: per_model for m in config.models},
        teacher_forced={
            m: per_model for m, t in targets.models.items() if t.declared.teacher_forced
        },
        axes={m: measured_axes(t) for m, t in targets.models.items()},
        languages=dict(
            Counter(candidates.filter(pl.col("family") == LANGUAGE_FAMILY)["subtype"].to_list())
        ),
        translation=translated,
        bounds=bounds,
    )
    max_new = config.generation.max_new_tokens
    # Texts every model answers: the base prompts and every candidate variant.
    texts = prompts["prompt"].to_list() + candidates["text"].to_list()
    unwritten = _structural_chars(prompts, config) + _translated_chars(prompts, translated)
    samples = config.generation.samples
    chars = (sum(len(t) for t in texts) + unwritten) * samples
    for model in config.models:
        if targets.models[model].is_api:
            plan.api.append(
                ApiTraffic(
                    model,
                    "evaluated",
                    per_model,
                    bounded,
                    chars,
                    per_model * max_new,
                    unwritten * samples,
                )
            )
    if rewriter is not None and rewriter.is_api and instructions:
        assert structural is not None
        plan.api.append(
            ApiTraffic(
                rewriter.spec,
                "rewriter",
                len(instructions),
                False,
                sum(len(i) for i in instructions),
                len(instructions) * structural.max_new_tokens,
            )
        )
    if translator is not None and translator.is_api and translated and translated.requests:
        plan.api.append(
            ApiTraffic(
                translator.spec,
                "translator",
                translated.requests,
                translated.back > 0,
                translated.input_chars,
                translated.requests * translated_max_new(config),
                translated.estimated_chars,
            )
        )
    judge = targets.judge
    register = candidates.filter(pl.col("family") == "register")
    if judge is not None and judge.is_api and len(register):
        calls = len(register) * len(config.models)
        # The judge's question wraps two answers of at most max_new_tokens each.
        template = len(judge_prompt(JudgeRequest(1.0, "", "")))
        answers = calls * 2 * max_new * CHARS_PER_TOKEN
        plan.api.append(
            ApiTraffic(
                judge.spec,
                "judge",
                calls,
                True,
                calls * template + answers,
                calls * JUDGE_MAX_TOKENS,
                answers,
            )
        )
    plan.patching = _patching(config, targets, sum(families.values()) - families[REPLAY_FAMILY])
    if config.posix_matrix is not None:
        machine = translated.translated + translated.round_trips if translated else 0
        extra = [
            (len(rewrite_tasks(p, structural)) if structural else 0) + machine // len(prompts)
            for p in prompts["prompt"].to_list()
        ]
        plan.posix_matrix = planned_sequences(
            prompts, candidates, extra, config.posix_matrix.max_prompts
        )
    if config.budget is not None:
        grid = _budget_grid(candidates, prompts, config)
        plan.budgeted = plan_budget(grid, config.budget, config.generation.samples)
    _price(plan, prices)
    _budget(plan, config)
    return plan


def _budget_grid(candidates: pl.DataFrame, prompts: pl.DataFrame, config: RunConfig) -> Grid:
    structural = config.variants.structural
    rewrites = {
        pid: [("structural", t.subtype, float(t.strength), "global") for t in tasks]
        for pid, text in zip(prompts["prompt_id"], prompts["prompt"], strict=True)
        if structural is not None and (tasks := rewrite_tasks(text, structural))
    }
    return candidate_grid(candidates, rewrites)


def _patching(config: RunConfig, targets: RunTargets, variants: int) -> dict[str, PatchingCost]:
    """Patching cost per model whose backend can patch (``analysis.patching``; the replay is
    never patched)."""
    settings = config.analysis.patching
    if settings is None:
        return {}
    costs = {}
    for spec, target in targets.models.items():
        if "patching" not in target.declared.capabilities:
            continue
        layers = (
            len(settings.layers)
            if settings.layers != "all"
            else declared_layers(
                target.source.location if target.source else None,
                target.source.gguf_file if target.source else None,
            )
        )
        costs[spec] = PatchingCost(min(variants, settings.max_variants), layers)
    return costs


def _structural_chars(prompts: pl.DataFrame, config: RunConfig) -> int:
    """Structural variants do not exist before the rewriter runs: a length variant is
    counted as its prompt times the multiplier, a mood variant as its prompt."""
    grid = config.variants.structural
    if grid is None:
        return 0
    scale = sum(grid.lengths) + (1.0 if grid.mood else 0.0)
    return round(sum(len(p) for p in prompts["prompt"].to_list()) * scale)


def translated_max_new(config: RunConfig) -> int:
    settings = config.variants.translation
    return 0 if settings is None else settings.max_new_tokens


def _translated_chars(prompts: pl.DataFrame, translated: TranslationPlan | None) -> int:
    """Translations and round trips do not exist before the translator runs: each is
    counted as long as its prompt."""
    if translated is None:
        return 0
    per_prompt = len(translated.languages) * (2 if translated.round_trips else 1)
    return sum(len(p) for p in prompts["prompt"].to_list()) * per_prompt


def _price(plan: RunPlan, prices: dict[str, tuple[float, float] | None]) -> None:
    total = 0.0
    for traffic in plan.api:
        price = prices.get(traffic.spec)
        if price is None:
            if traffic.spec not in plan.cost_unknown:
                plan.cost_unknown.append(traffic.spec)
            continue
        total += traffic.input_tokens_estimate * price[0] + traffic.output_token_ceiling * price[1]
    plan.cost_usd = total if plan.api and not plan.cost_unknown else None


def _budget(plan: RunPlan, config: RunConfig) -> None:
    budget = config.api.spending
    requests = sum(t.requests for t in plan.api)
    tokens = sum(t.input_tokens_estimate + t.output_token_ceiling for t in plan.api)
    if budget.max_requests is not None and requests > budget.max_requests:
        plan.budget_hits.append(
            f"api.spending.max_requests {budget.max_requests}: the run would stop after "
            f"{budget.max_requests} of up to {requests} requests"
        )
    if budget.max_tokens is not None and tokens > budget.max_tokens:
        plan.budget_hits.append(
            f"api.spending.max_tokens {budget.max_tokens}: up to {tokens} tokens (estimate)"
        )
    cost = plan.cost_usd
    if budget.max_cost_usd is not None and cost is not None and cost > budget.max_cost_usd:
        plan.budget_hits.append(
            f"api.spending.max_cost_usd {budget.max_cost_usd}: up to ${cost:.2f} (ceiling)"
        )


def _reference_lines(config: RunConfig) -> list[str]:
    """The references block; a parallel file (``mkqa:PATH``) says its own answers' origin."""
    others = tuple(d for d in config.datasets if parallel_entry(d) is None)
    lines = reference_lines(others, config.data_dir, config.question_column) if others else []
    parallel = [(d, p) for d in config.datasets if (p := parallel_entry(d)) is not None]
    if parallel and not lines:
        lines.append("Reference answers (correctness, flip rates):")
    lines += [f"  {entry}: {PARALLEL_REFERENCES[found[0]]}" for entry, found in parallel]
    return lines


def _language_lines(plan: RunPlan, config: RunConfig) -> list[str]:
    """Per language: its variants (one per prompt whose file carries that language)."""
    if config.languages is None:
        return []
    counts = plan.languages
    total = sum(
        plan.prompts.get(Path(p[1]).stem, 0)
        for d in config.datasets
        if (p := parallel_entry(d)) is not None
    )
    shown = ", ".join(f"{code} {counts.get(code, 0)}" for code in config.languages)
    lost = total * len(config.languages) - sum(counts.values())
    missing = f"; {lost} missing (the file has no text for that row)" if lost else ""
    return [f"  language variants by language: {shown} (of {total} prompts){missing}"]


def _translation_lines(plan: RunPlan) -> list[str]:
    """The translator's work: candidates, requests not yet cached, and what is cached."""
    t = plan.translation
    if t is None:
        return []
    trips = f", {t.round_trips} round trips (back into English)" if t.round_trips else ""
    back = f" + up to {t.back} back into English" if t.back else ""
    return [
        f"  machine translation by {t.translator} into {', '.join(t.languages)}: "
        f"{t.translated} translations{trips}",
        f"  translator requests: {t.forward} into the languages{back}; "
        f"{t.cached} already cached (translations and back-translations)",
    ]


def render_plan(plan: RunPlan, config: RunConfig) -> str:
    lines = [f"Plan for run {config.resolved_run_id()} (dry run: no model loaded, no API call)"]
    lines.append("")
    lines.append("Prompts: " + ", ".join(f"{d} {n}" for d, n in plan.prompts.items()))
    lines.append(f"  total {sum(plan.prompts.values())}")
    lines.extend(_reference_lines(config))
    lines.append("Variants per family (candidates -> kept):")
    for family, count in plan.candidates.items():
        if family in plan.kept_exact:
            lines.append(f"  {family:<11} {count:>6} -> {count} (kept by construction)")
        else:
            why = plan.bounds.get(family, "semantic filter")
            lines.append(f"  {family:<11} {count:>6} -> up to {count} ({why})")
    if plan.rewrites_cached:
        lines.append(f"  structural rewrites already cached: {plan.rewrites_cached}")
    lines.extend(_language_lines(plan, config))
    lines.extend(_translation_lines(plan))
    bound = "up to " if any(plan.kept_up_to.values()) else ""
    lines.append(decoding_line(config))
    lines.append("Per model:")
    for model, count in plan.generations.items():
        scored = plan.teacher_forced.get(model)
        forced = f", {bound}{scored} teacher-forced sequences" if scored is not None else ""
        tokens = count * config.generation.max_new_tokens
        lines.append(f"  {model}: {bound}{count} generations (at most {tokens} new tokens){forced}")
        if model in plan.axes:
            lines.append(f"    axes: {', '.join(plan.axes[model]) or 'none'}")
        cost = plan.patching.get(model)
        if cost is not None:
            layers = (
                f"{cost.layers} layers = {cost.forwards}"
                if cost.forwards is not None
                else f"all L layers (counted when the model loads) = {cost.variants} x L"
            )
            lines.append(
                f"    patching: {bound}{cost.variants} variants x {layers} patched forwards "
                "(+ the unpatched variants and their bases)"
            )
        if plan.posix_matrix is not None and scored is not None and config.posix_matrix:
            lines.append(
                f"    POSIX full matrix: {bound}{plan.posix_matrix} teacher-forced sequences "
                f"(each answer under every prompt text of its instance, at most "
                f"{config.posix_matrix.max_prompts} texts per instance: a seeded sample above)"
            )
    if plan.api:
        lines.append("API requests:")
        for t in plan.api:
            up = "up to " if t.requests_bounded else ""
            lines.append(
                f"  {t.spec} ({t.role}): {up}{t.requests} requests, {t.input_chars} input "
                f"characters (~{t.input_tokens_estimate} tokens), at most "
                f"{t.output_token_ceiling} output tokens"
            )
        if plan.cost_usd is not None:
            lines.append(f"  cost ceiling: ${plan.cost_usd:.4f}")
        for spec in plan.cost_unknown:
            lines.append(f"  cost of {spec}: unknown (no price; set api.prices)")
    if plan.budgeted is not None:
        lines.extend(budget_lines(plan.budgeted, config.generation.samples))
    lines.extend(f"Budget: {hit}" for hit in plan.budget_hits)
    lines.extend(f"Warning: {w}" for w in plan.warnings)
    return "\n".join(lines)


def decoding_line(config: RunConfig) -> str:
    """How every model answers: greedy, or the sampling settings and samples per text."""
    g = config.generation
    if not g.sampled:
        return "Decoding: greedy (T = 0), one answer per prompt text"
    top_k = g.top_k if g.top_k else "off"
    top_p = g.top_p if g.top_p < 1 else "off"
    each = "one answer" if g.samples == 1 else f"{g.samples} samples"
    return (
        f"Decoding: sampled (temperature {g.temperature}, top-p {top_p}, top-k {top_k}, "
        f"seed {g.seed}), {each} per prompt text, each with its own seed"
    )
