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
   (At the finest level, family x subtype x strength x position, a stratum holds one cell
   per prompt, so within a prompt it cannot be sampled.)

Each sampled prompt reads its own random order of each stratum's kinds (a generator
seeded by (seed, dataset, prompt id), as HELM seeds a perturbation by its instance) and
takes the first ``M_ih`` kinds it kept: its cells in a stratum are a simple random sample of
``M_ih`` of its kept kinds, drawn independently of every other prompt's. The orders used to
be one shared permutation per stratum read from staggered offsets, which spread the kinds
evenly over the dataset; but then prompt i's kinds told which kinds the others drew, and
through their values steered i's later allocation (sequential.py), a channel that made the
realised-count estimator biased by 2-4% of the mean square. Independent orders close it.

So a cell's inclusion probability is exact and simple: pi = (n / N) x (m_ih / V_ih), with
V_ih the prompt's kept kinds in the stratum and m_ih = min(M_ih, V_ih), as long as M_ih
does not depend on prompt i's own values: sequential.py sets the later rounds' counts from
the other prompts' pilot cells only, so given them M_ih is fixed and pi is the design's
probability, valid for reweighting. Rounds only raise ``M_ih``: round k's cells are the
cells of the counts after round k minus those before it, a deterministic function of
(seed, dataset, prompt, the counts), so a rerun asks for the same cells.
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
    sampled (the first ``n_j`` of each dataset's order) and each cell's place in its
    prompt's own reading order of its stratum (0 is read first)."""

    layout: Layout
    prompt_order: tuple[np.ndarray, ...]  # per dataset: prompt indices, random order
    sampled_prompts: np.ndarray  # per dataset: n_j
    place: np.ndarray  # per cell: its rank in its (prompt, stratum) reading order
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
    for j, name in enumerate(layout.datasets):
        members = np.flatnonzero(layout.prompt_dataset == j)
        prompt_order.append(members[_rng(seed, "prompts", name).permutation(len(members))])
    # one uniform key per cell from its prompt's own generator, in the grid's kind order
    # (kind codes), so a prompt's order does not depend on the grid's row order
    key = np.empty(len(layout.stratum))
    by_prompt = np.argsort(layout.prompt_code, kind="stable")
    starts = np.r_[0, np.flatnonzero(np.diff(layout.prompt_code[by_prompt])) + 1]
    for cells in np.split(by_prompt, starts[1:]):
        dataset, prompt = layout.prompts[int(layout.prompt_code[cells[0]])]
        cells = cells[np.lexsort((layout.kind_code[cells], layout.stratum[cells]))]
        key[cells] = _rng(seed, "kinds", dataset, prompt).random(len(cells))
    order = np.lexsort((key, layout.stratum, layout.prompt_code))
    group = layout.prompt_code[order] * len(layout.strata) + layout.stratum[order]
    first = np.r_[0, np.flatnonzero(np.diff(group)) + 1]
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order)) - np.repeat(first, np.diff(np.r_[first, len(order)]))
    return Design(layout, tuple(prompt_order), n, place, seed)


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
    return sampled[layout.prompt_code] & (design.place < _per_cell(layout, counts))


def inclusion_probability(design: Design, counts: np.ndarray) -> np.ndarray:
    """pi per cell: (n_j / N_j) x min(M_h, V_ih) / V_ih."""
    layout = design.layout
    first = design.sampled_prompts / layout.prompts_per_dataset
    size = layout.sizes[layout.prompt_code, layout.stratum]
    taken = np.minimum(_per_cell(layout, counts), size)
    return first[layout.prompt_dataset[layout.prompt_code]] * taken / size
