"""A synthetic full grid with realistic variance components, for the budget replay.

The paper's grid (6 datasets, 81 variant kinds: register 10 strengths x 3 positions, three
noise subtypes x 5 strengths x 3 positions, length x 5 and mood, global), N prompts each.
A cell's answer changes with probability logistic(a_i + b_v + c_j): a_i a prompt's fragility
(sd 1.2), b_v rising with a variant's strength (structural rewrites change most), c_j a
dataset's offset. Normalised deltas follow the axes' shapes in real runs: BLEU near -1 when
the answer changed and 0 or small otherwise; BERT -0.05..-0.35 when changed; MR a 0/1
indicator (mirroring only where the answer changed); Prob and Ent continuous with a
per-prompt scale; Act small negative cosines growing with strength. Pooled values land in
the paper's ranges (BLEU ~0.55, BERT ~0.17, MR ~0.45, Ent < 0.012); the prompt-to-prompt
spread (sd of s_i over prompts ~0.3 of the mean for BLEU) and the within-prompt spread are
the two variance components the design trades.

``sparse_mr``: MR redrawn as a sparse 0/1 event, independent of the answer changing, at a
per-prompt rate ~ Beta(2.09, 16.89) (mean 0.11, sd 0.07: the real demo run's per-prompt
mirroring rates), the shape under which a prompt's few sampled cells often show no event;
drawn from its own stream, so every other column is the default grid's.
"""

from __future__ import annotations

import numpy as np

from sago_core.budget.cells import GridValues
from sago_core.budget.design import LEVELS, Grid, Kind, index_grid

AXES = ("act", "bleu", "bert", "prob", "ent", "mr")
DATASETS = ("truthfulqa", "nq", "alpaca", "simpleqa", "triviaqa", "hotpotqa")
POSITIONS = ("prefix", "suffix", "global")


def paper_kinds() -> list[tuple[Kind, float]]:
    """(kind, logit effect b_v) for the paper's 81 variant kinds."""
    kinds: list[tuple[Kind, float]] = []
    for position in POSITIONS:
        bump = 0.6 if position == "global" else 0.0
        for strength in (-10, -8, -6, -4, -2, 2, 4, 6, 8, 10):
            effect = -0.6 + 0.1 * abs(strength) + bump
            kinds.append((("register", "politeness", float(strength), position), effect))
        for subtype, levels, per in (
            ("spacing", (1, 5, 20, 50, 100), 0.012),
            ("punctuation", (1, 3, 5, 10, 20), 0.07),
            ("capitalization", (10, 25, 50, 75, 100), 0.012),
        ):
            for strength in levels:
                effect = -1.4 + per * strength + bump / 2
                kinds.append((("noise", subtype, float(strength), position), effect))
    for m in (0.25, 0.5, 1.5, 2.0, 3.0):
        kinds.append((("structural", "length", m, "global"), 1.2 + abs(np.log(m))))
    kinds.append((("structural", "mood", 1.0, "global"), 0.8))
    return kinds


SPARSE_MR_BETA = (2.09, 16.89)


def synthetic_grid(
    prompts: int, seed: int, datasets: int = 6, sparse_mr: bool = False
) -> GridValues:
    rng = np.random.default_rng(seed)
    kinds = paper_kinds()
    effects = np.array([e for _, e in kinds])
    strength = np.array([abs(k[2]) for k, _ in kinds]) / np.array(
        [100.0 if k[0] == "noise" else 10.0 if k[0] == "register" else 3.0 for k, _ in kinds]
    )
    names, prompt_ids, cell_kinds, rows = [], [], [], []
    for j in range(datasets):
        offset = rng.normal(0, 0.4)
        for i in range(prompts):
            fragility = rng.normal(0, 1.2)
            scale_prob = 0.03 * rng.lognormal(0, 0.5)
            scale_ent = 0.004 * rng.lognormal(0, 0.5)
            scale_act = 0.01 * rng.lognormal(0, 0.4)
            p_change = 1 / (1 + np.exp(-(fragility + effects + offset)))
            changed = rng.random(len(kinds)) < p_change
            v = len(kinds)
            bleu = np.where(
                changed,
                -rng.beta(5, 2, v),
                -(rng.random(v) < 0.1).astype(float) * rng.random(v) * 0.1,
            )
            bert = np.where(changed, -rng.uniform(0.05, 0.35, v), -rng.uniform(0, 0.01, v))
            mr = (changed & (rng.random(v) < 0.75)).astype(float)
            prob = rng.normal(0, scale_prob * (0.5 + strength), v)
            ent = rng.normal(0, scale_ent * (0.5 + strength), v)
            act = -rng.gamma(2.0, scale_act * (0.3 + strength) / 2, v)
            for c, (kind, _) in enumerate(kinds):
                names.append(DATASETS[j % len(DATASETS)] + ("" if j < len(DATASETS) else str(j)))
                prompt_ids.append(f"p{j}-{i}")
                cell_kinds.append(kind)
                rows.append((act[c], bleu[c], bert[c], prob[c], ent[c], mr[c]))
    grid = Grid(tuple(names), tuple(prompt_ids), tuple(cell_kinds))
    values = np.array(rows, dtype=np.float64)
    if sparse_mr:
        sparse = np.random.default_rng([seed, 1])
        rate = sparse.beta(*SPARSE_MR_BETA, datasets * prompts).repeat(len(kinds))
        values[:, AXES.index("mr")] = (sparse.random(len(values)) < rate).astype(np.float64)
    return GridValues(grid, AXES, values)


def drawn_grid(real: GridValues, prompts: int, seed: int) -> GridValues:
    """A grid of ``prompts`` per dataset drawn from a finished run's cells: each dataset's
    real prompts as they are, then (beyond their number) new prompts, each a real prompt of
    its dataset drawn at random whose cells' values are redrawn with replacement within its
    strata (family x subtype x position, the design's finest; its kinds stay), every axis of
    a cell together. A new prompt has its model's cell distributions, its missing cells and
    its MR events as the run measured them, not as a parametric shape describes them."""
    rng = np.random.default_rng(seed)
    layout = index_grid(real.grid, LEVELS[0])
    kinds: list[np.ndarray] = []
    values: list[np.ndarray] = []
    names: list[str] = []
    for j in range(len(layout.datasets)):
        members = np.flatnonzero(layout.prompt_dataset == j)
        picks = [*members[:prompts], *rng.choice(members, max(prompts - len(members), 0))]
        for slot, p in enumerate(picks):
            cells = np.flatnonzero(layout.prompt_code == p)
            drawn = cells.copy()
            if slot >= len(members):
                for h in np.unique(layout.stratum[cells]):
                    mine = layout.stratum[cells] == h
                    drawn[mine] = rng.choice(cells[mine], int(mine.sum()))
            kinds.append(cells)
            values.append(drawn)
            name = layout.prompts[p][1]
            names.extend([name if slot < len(members) else f"{name}#{slot}"] * len(cells))
    at = np.concatenate(kinds)
    grid = Grid(
        tuple(real.grid.dataset[i] for i in at),
        tuple(names),
        tuple(real.grid.kind[i] for i in at),
    )
    return GridValues(grid, real.axes, real.values[np.concatenate(values)])
