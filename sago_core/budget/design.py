"""The budgeted design: which (prompt, variant) cells a round asks for, with their inclusion
probabilities.

The grid of one dataset is N prompts x the variant kinds v = (family, subtype, strength,
position) each prompt kept. A budgeted run samples it in two stages:

1. prompts: a simple random sample of n of the N prompts (n = N unless a plan says fewer;
   the planner weighs more prompts against more variants per prompt);
2. variants within a sampled prompt: a stratified simple random sample, ``M_h`` cells in
   every stratum h of the prompt's variants. A stratum is a group of variant kinds at the
   finest ``level`` the first round affords with two cells per stratum per prompt (one
   where a stratum holds one kind):
   ``position`` = family x subtype x position, ``subtype`` = family x subtype, ``family``.
   (At the issue's finest level, family x subtype x strength x position, a stratum holds one
   cell per prompt, so within a prompt it cannot be sampled; that level is balanced across
   prompts instead, below.)

Balance across prompts: the kinds of each (dataset, stratum) are put in one random order
(a permutation drawn from the seed), each sampled prompt starts reading it at its own offset
(prompts spread evenly around the circle) and takes the first ``M_h`` kinds it kept. Every
prompt's cells in a stratum are then, marginally, a simple random sample of ``M_h`` of its
kept kinds (a uniformly random permutation read from a fixed place gives a uniformly random
subset, also after the kinds a prompt did not keep are skipped), while across the dataset's
prompts every kind (strength and position included) is asked about equally often: at least
once per dataset as soon as n x M_h reaches the stratum's kind count.

A systematic reading (kinds sorted by strength, read in van der Corput order) was tried:
more precise, but such a sample has no unbiased variance estimator, and the simple-random-
sample bootstrap of estimate.py then over-corrected the root's bias (+1% to +2% of SGS at a
quarter of the cells, against +0.3% to +0.6% here): not kept.

So a cell's inclusion probability is exact and simple: pi = (n / N) x (m_ih / V_ih), with
V_ih the prompt's kept kinds in the stratum and m_ih = min(M_h, V_ih). Rounds only raise
``M_h``: round k's cells are the cells of the counts after round k minus those before it,
a deterministic function of (seed, dataset, the counts), so a rerun asks for the same cells.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Level = Literal["position", "subtype", "family"]
# Finest first: the design takes the first level the first round affords.
LEVELS: tuple[Level, ...] = ("position", "subtype", "family")
Kind = tuple[str, str, float, str]  # (family, subtype, strength, position)
MIN_PER_STRATUM = 2


def stratum_of(kind: Kind, level: Level) -> tuple[str, ...]:
    family, subtype, _, position = kind
    if level == "position":
        return (family, subtype, position)
    if level == "subtype":
        return (family, subtype)
    return (family,)


@dataclass(frozen=True)
class Grid:
    """The full grid's cells (one per kept (prompt, variant)), in any order.

    ``dataset``/``prompt``: names per cell; ``kind``: its (family, subtype, strength,
    position). The replay is not a variant and is never a cell here."""

    dataset: tuple[str, ...]
    prompt: tuple[str, ...]
    kind: tuple[Kind, ...]

    def __post_init__(self) -> None:
        if not (len(self.dataset) == len(self.prompt) == len(self.kind)):
            raise ValueError("grid: dataset, prompt and kind must have one entry per cell")

    @property
    def cells(self) -> int:
        return len(self.kind)

    def datasets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.dataset))


@dataclass(frozen=True)
class Layout:
    """The grid indexed for one stratum level: integer codes per cell and the sizes.

    ``prompt_code``: cell -> prompt index; ``prompt_dataset``: prompt -> dataset index;
    ``stratum``: cell -> stratum index (strata are per dataset, numbered globally);
    ``stratum_dataset``: stratum -> dataset index; ``sizes``: prompts x strata, V_ih (the
    prompt's kept kinds in the stratum); ``kind_code``: cell -> its kind's place in its
    stratum's kind list."""

    level: Level
    datasets: tuple[str, ...]
    prompts: tuple[tuple[str, str], ...]  # (dataset, prompt_id) per prompt index
    strata: tuple[tuple[str, tuple[str, ...]], ...]  # (dataset, stratum key)
    prompt_code: np.ndarray
    prompt_dataset: np.ndarray
    stratum: np.ndarray
    stratum_dataset: np.ndarray
    kind_code: np.ndarray
    kinds_per_stratum: np.ndarray
    sizes: np.ndarray

    @property
    def prompts_per_dataset(self) -> np.ndarray:
        return np.bincount(self.prompt_dataset, minlength=len(self.datasets))

    def strata_per_dataset(self) -> np.ndarray:
        return np.bincount(self.stratum_dataset, minlength=len(self.datasets))


def index_grid(grid: Grid, level: Level) -> Layout:
    datasets = grid.datasets()
    d_index = {d: i for i, d in enumerate(datasets)}
    prompts: dict[tuple[str, str], int] = {}
    strata: dict[tuple[str, tuple[str, ...]], int] = {}
    kinds: dict[int, dict[Kind, int]] = {}
    prompt_code = np.empty(grid.cells, dtype=np.int64)
    stratum = np.empty(grid.cells, dtype=np.int64)
    kind_code = np.empty(grid.cells, dtype=np.int64)
    for c, (d, p, k) in enumerate(zip(grid.dataset, grid.prompt, grid.kind, strict=True)):
        prompt_code[c] = prompts.setdefault((d, p), len(prompts))
        h = strata.setdefault((d, stratum_of(k, level)), len(strata))
        stratum[c] = h
        kind_code[c] = kinds.setdefault(h, {}).setdefault(k, len(kinds[h]))
    sizes = np.zeros((len(prompts), len(strata)), dtype=np.int64)
    np.add.at(sizes, (prompt_code, stratum), 1)
    if _duplicate_cells(prompt_code, grid):
        raise ValueError("grid: a (prompt, variant kind) appears twice")
    return Layout(
        level=level,
        datasets=datasets,
        prompts=tuple(prompts),
        strata=tuple(strata),
        prompt_code=prompt_code,
        prompt_dataset=np.array([d_index[d] for d, _ in prompts], dtype=np.int64),
        stratum=stratum,
        stratum_dataset=np.array([d_index[d] for d, _ in strata], dtype=np.int64),
        kind_code=kind_code,
        kinds_per_stratum=np.array([len(kinds[h]) for h in range(len(strata))], dtype=np.int64),
        sizes=sizes,
    )


def _duplicate_cells(prompt_code: np.ndarray, grid: Grid) -> bool:
    seen = set(zip(prompt_code.tolist(), grid.kind, strict=True))
    return len(seen) != grid.cells


def minimum_counts(layout: Layout) -> np.ndarray:
    """Cells per prompt in every stratum of the smallest round: two (a variance needs two;
    Cochran 1977 section 5A.12), or the stratum's one kind."""
    return np.minimum(MIN_PER_STRATUM, layout.kinds_per_stratum)


def minimum_round(layout: Layout, prompts: np.ndarray) -> int:
    """Cells of the smallest round (an upper bound where prompts lost kinds to the
    semantic filter): ``minimum_counts`` for each sampled prompt."""
    per_prompt = np.bincount(
        layout.stratum_dataset, weights=minimum_counts(layout), minlength=len(layout.datasets)
    )
    return int((np.asarray(prompts) * per_prompt).sum())


def _rng(seed: int, *parts: str) -> np.random.Generator:
    words = [seed & 0xFFFFFFFF] + [zlib.crc32(p.encode()) for p in parts]
    return np.random.default_rng(words)


@dataclass(frozen=True)
class Design:
    """The random parts of a budgeted design, fixed by (seed, grid): which prompts are
    sampled (the first ``n_j`` of each dataset's order), each stratum's kind order, and
    each prompt's offset into it."""

    layout: Layout
    prompt_order: tuple[np.ndarray, ...]  # per dataset: prompt indices, random order
    sampled_prompts: np.ndarray  # per dataset: n_j
    kind_order: tuple[np.ndarray, ...]  # per stratum: its kind codes in a random order
    offset: np.ndarray  # prompts x strata: where the prompt starts reading the kind order
    seed: int = 0

    def prompt_sampled(self) -> np.ndarray:
        mask = np.zeros(len(self.layout.prompts), dtype=bool)
        for j, order in enumerate(self.prompt_order):
            mask[order[: self.sampled_prompts[j]]] = True
        return mask


def draw_design(layout: Layout, seed: int, prompts: Sequence[int] | None = None) -> Design:
    n_all = layout.prompts_per_dataset
    n = n_all.copy() if prompts is None else np.minimum(np.asarray(prompts), n_all)
    if (n < 1).any():
        raise ValueError("budget: every dataset needs at least one sampled prompt")
    prompt_order = []
    rank = np.zeros(len(layout.prompts), dtype=np.int64)
    for j, name in enumerate(layout.datasets):
        members = np.flatnonzero(layout.prompt_dataset == j)
        order = members[_rng(seed, "prompts", name).permutation(len(members))]
        prompt_order.append(order)
        rank[order] = np.arange(len(order))
    kind_order = []
    offset = np.zeros(layout.sizes.shape, dtype=np.int64)
    for h, (name, key) in enumerate(layout.strata):
        k = int(layout.kinds_per_stratum[h])
        kind_order.append(_rng(seed, "kinds", name, *key).permutation(k))
        j = int(layout.stratum_dataset[h])
        members = layout.prompt_dataset == j
        # the sampled prompt of rank r starts at floor(r K / n): evenly around the circle
        offset[members, h] = (rank[members] * k) // max(int(n[j]), 1) % k
    return Design(layout, tuple(prompt_order), n, tuple(kind_order), offset, seed)


def _per_cell(layout: Layout, counts: np.ndarray) -> np.ndarray:
    """Each cell's count: ``counts[h]`` (the same for every prompt) or ``counts[i, h]``."""
    if counts.ndim == 2:
        return counts[layout.prompt_code, layout.stratum]
    return counts[layout.stratum]


def select_cells(design: Design, counts: np.ndarray) -> np.ndarray:
    """Mask over the grid's cells asked for when stratum h holds ``counts[h]`` (or, per
    prompt, ``counts[i, h]``) cells of each sampled prompt (capped by what it kept)."""
    layout = design.layout
    sampled = design.prompt_sampled()
    # each cell's place in its prompt's reading of the stratum's kind order
    place = np.empty(len(layout.stratum), dtype=np.int64)
    for h, order in enumerate(design.kind_order):
        where = np.empty(len(order), dtype=np.int64)
        where[order] = np.arange(len(order))
        cells = layout.stratum == h
        start = design.offset[layout.prompt_code[cells], h]
        place[cells] = (where[layout.kind_code[cells]] - start) % len(order)
    # rank among the prompt's kept kinds of the stratum, in reading order
    key = np.lexsort((place, layout.stratum, layout.prompt_code))
    rank = np.empty(len(place), dtype=np.int64)
    group = layout.prompt_code[key] * len(layout.strata) + layout.stratum[key]
    starts = np.r_[0, np.flatnonzero(np.diff(group)) + 1]
    run = np.arange(len(key)) - np.repeat(starts, np.diff(np.r_[starts, len(key)]))
    rank[key] = run
    return sampled[layout.prompt_code] & (rank < _per_cell(layout, counts))


def inclusion_probability(design: Design, counts: np.ndarray) -> np.ndarray:
    """pi per cell: (n_j / N_j) x min(M_h, V_ih) / V_ih."""
    layout = design.layout
    first = design.sampled_prompts / layout.prompts_per_dataset
    size = layout.sizes[layout.prompt_code, layout.stratum]
    taken = np.minimum(_per_cell(layout, counts), size)
    return first[layout.prompt_dataset[layout.prompt_code]] * taken / size
