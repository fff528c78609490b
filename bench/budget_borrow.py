"""``python -m bench.budget_borrow``: does a model that borrows strength across prompts beat
the design-based budgeted estimator at equal budget?

The same seeded budgeted runs as ``bench.budget`` (its ``replay``: the same sampled cells,
the same rounds), and on their final cells two more estimators beside the design-based one:

- ``add``: per dataset and axis, an additive model of the squared normalised delta,
  d^2(i, k) = mu + a_i + g_h(k) + b_k, i the prompt, k the variant kind (family x subtype x
  strength x position, the grid's finest strata), h(k) its group (family x subtype x
  position), so a kind no sampled prompt was asked about falls back to its group;
- ``rank1``: the same plus a rank-1 prompt x kind interaction u_i v_k (as PromptEval, Polo et
  al. 2024, fits for accuracy): a fragile prompt's deltas grow faster with strength.

Both are fitted to the observed cells by alternating least squares (each block is the exact
ridge solution given the others), with a ridge of ``RIDGE`` pseudo-observations on every
effect (shrinking a kind seen once halfway to its group, a group towards the dataset). Each
unobserved cell of a sampled prompt is predicted; a prompt's mean square is over its
observed and predicted cells (clipped at 0 as a whole, ``_mean_squares``), its score the
root, a dataset's SGS the mean over sampled prompts, the pooled SGS the mean over datasets:
the design-based estimator's targets, the full grid's values over these prompts. Beside
them, error only (no interval was built for it): the model-assisted difference estimator
(``_assisted_roots``).

Interval: a heteroscedastic residual bootstrap of the fitted model (Davison and Hinkley
1997, section 6.2.3), with cross-validated residuals in place of the fit's own (a kind seen
once has its own effect absorb half of its residual, so the fit's residuals understate the
error of predicting a cell not asked): the observed
cells' residuals from a refit without their fold (``FOLDS`` random folds), standardised by a
prompt scale times a kind scale (root mean squares, each shrunk towards the dataset's with
``SHRINK`` pseudo-cells), are resampled within the dataset and put back, times each cell's
scale, on every cell of the sampled prompts; the observed cells are refitted (warm-started),
and each replicate's error is the estimate from its refit minus its own full grid (observed
cells as drawn, unobserved cells = fit + their drawn residual, plus, for a kind no sampled
prompt was asked about, one effect shared by every prompt, drawn normal with the root mean
square of the dataset's seen kinds' own effects b_k: the refit cannot see an effect no cell
showed). Each prompt's root is corrected by that error's bootstrap mean (at most
``MAX_CORRECTION`` of it, as the design-based roots are: without it the model's SGS came
out low by 0.1-0.4 of the full run's half-width on the demo run); the interval is the
corrected estimate +- 1.96 sd of the pooled error; where prompts were sampled (n < N) the
first stage's (1 - n/N) s_b^2 / n is added, as the design's formula does. Verdicts: the
one-sided t-test over the sampled prompts' corrected model scores at the level of the
design's last look.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from bench.budget import ALPHA, budget_rows, full_truth, load_grid, replay
from sago_core.budget.cells import GridValues
from sago_core.budget.design import index_grid
from sago_core.budget.schedule import BudgetTooSmall, budget_cells, make_schedule
from sago_core.budget.sequential import BudgetResult, look_levels
from sago_core.scoring.significance import one_sided_t_test
from sago_core.vocabulary import EPSILONS, Z95

RIDGE = 1.0
SHRINK = 4.0
ITERATIONS = 60  # the point fit's sweeps
WARM_ITERATIONS = 15  # a bootstrap refit's sweeps, from the point fit
BOOTSTRAP = 50
FOLDS = 10  # cross-validation folds for the bootstrap's residuals
MODELS = ("add", "rank1")

# The bias correction moves a root by at most this share of it.
MAX_CORRECTION = 0.25


@dataclass(frozen=True)
class Effects:
    """The fitted effects (leading dimensions: any batch, e.g. axes x replicates)."""

    mu: np.ndarray  # (...)
    a: np.ndarray  # (..., P)
    g: np.ndarray  # (..., G)
    b: np.ndarray  # (..., K)
    u: np.ndarray  # (..., P)
    v: np.ndarray  # (..., K)

    def predict(self, group: np.ndarray) -> np.ndarray:
        """(..., P, K): every cell's fitted value."""
        kind = self.g[..., group] + self.b
        return (
            self.mu[..., None, None]
            + self.a[..., :, None]
            + kind[..., None, :]
            + self.u[..., :, None] * self.v[..., None, :]
        )


def _zeros(y: np.ndarray, groups: int) -> Effects:
    lead = y.shape[:-2]
    p, k = y.shape[-2:]
    return Effects(
        np.zeros(lead), np.zeros((*lead, p)), np.zeros((*lead, groups)), np.zeros((*lead, k)),
        np.zeros((*lead, p)), np.zeros((*lead, k)),
    )  # fmt: skip


def fit_additive(
    y: np.ndarray,
    observed: np.ndarray,
    group: np.ndarray,
    rank: int = 0,
    ridge: float = RIDGE,
    iterations: int = ITERATIONS,
    start: Effects | None = None,
) -> Effects:
    """Alternating least squares for y = mu + a_i + g_h(k) + b_k (+ u_i v_k at rank 1) on
    the ``observed`` cells (a 0/1 mask broadcastable to ``y``; y's other cells are ignored).
    ``group``: (K,) each kind's group code. Each sweep sets mu, a, g, b (then u, v) to their
    exact ridge solutions given the rest; v is kept at unit root mean square so the ridge on
    u and v is in observations, like the others."""
    shape = np.broadcast_shapes(y.shape, np.shape(observed))
    m = np.broadcast_to(observed, shape).astype(np.float64)
    y = np.where(m > 0, np.broadcast_to(y, shape), 0.0)
    groups = int(group.max()) + 1 if len(group) else 0
    onehot = np.eye(groups)[group]  # K x G
    n_i, n_k = m.sum(-1), m.sum(-2)
    n_g = n_k @ onehot
    total = np.maximum(m.sum((-2, -1)), 1.0)
    e = start if start is not None else _zeros(y, groups)
    mu, a, g, b, u, v = e.mu, e.a, e.g, e.b, e.u, e.v
    if rank and start is None:
        v = np.broadcast_to(np.linspace(-1.0, 1.0, y.shape[-1]), b.shape).copy()
    for sweep in range(iterations):
        kind = (g @ onehot.T + b)[..., None, :]
        inter = u[..., :, None] * v[..., None, :]
        mu = (m * (y - a[..., :, None] - kind - inter)).sum((-2, -1)) / total
        r = m * (y - mu[..., None, None] - kind - inter)
        a = r.sum(-1) / (n_i + ridge)
        r = m * (y - mu[..., None, None] - a[..., :, None] - inter)
        col = r.sum(-2)
        g = (col - (m * b[..., None, :]).sum(-2)) @ onehot / (n_g + ridge)
        b = (col - n_k * (g @ onehot.T)) / (n_k + ridge)
        if not rank or (start is None and sweep < iterations // 4):
            continue  # the additive part first, then the interaction
        kind = (g @ onehot.T + b)[..., None, :]
        if start is None and sweep == iterations // 4:  # v starts as the kinds' own effects
            centred = kind[..., 0, :] - kind[..., 0, :].mean(-1, keepdims=True)
            spread = np.sqrt(np.mean(centred**2, axis=-1, keepdims=True))
            v = np.where(spread > 0, centred / np.where(spread > 0, spread, 1.0), v)
        r = m * (y - mu[..., None, None] - a[..., :, None] - kind)
        u = (r * v[..., None, :]).sum(-1) / ((m * v[..., None, :] ** 2).sum(-1) + ridge)
        scale_u = np.maximum(np.mean(u**2, axis=-1, keepdims=True), 1e-300)
        v = (r * u[..., :, None]).sum(-2) / ((m * u[..., :, None] ** 2).sum(-2) + ridge * scale_u)
        norm = np.sqrt(np.mean(v**2, axis=-1, keepdims=True))
        norm = np.where(norm > 0, norm, 1.0)
        v, u = v / norm, u * norm
    return Effects(mu, a, g, b, u, v)


@dataclass(frozen=True)
class DatasetGrid:
    """One dataset's cells as a dense prompts x kinds matrix: ``cell[p, k]`` the grid's cell
    index (-1 where the prompt did not keep the kind), ``prompt`` the layout's prompt codes,
    ``group`` each kind's group."""

    prompt: np.ndarray
    cell: np.ndarray
    group: np.ndarray


def dense_datasets(gv: GridValues) -> list[DatasetGrid]:
    layout = index_grid(gv.grid, "position")  # groups: family x subtype x position
    out = []
    for j in range(len(layout.datasets)):
        prompts = np.flatnonzero(layout.prompt_dataset == j)
        cells = np.flatnonzero(layout.prompt_dataset[layout.prompt_code] == j)
        keys = list(
            zip(layout.stratum[cells].tolist(), layout.kind_code[cells].tolist(), strict=True)
        )
        kinds = {key: c for c, key in enumerate(dict.fromkeys(sorted(keys)))}
        row = {int(p): r for r, p in enumerate(prompts)}
        dense = np.full((len(prompts), len(kinds)), -1, dtype=np.int64)
        for cell, key in zip(cells.tolist(), keys, strict=True):
            dense[row[int(layout.prompt_code[cell])], kinds[key]] = cell
        strata = sorted({h for h, _ in kinds})
        group = np.array([strata.index(h) for h, _ in kinds], dtype=np.int64)
        out.append(DatasetGrid(prompts, dense, group))
    return out


@dataclass(frozen=True)
class BorrowEstimate:
    """Per axis: the pooled estimate, its half-width, and the sampled prompts' scores."""

    value: np.ndarray  # axes
    half: np.ndarray  # axes
    scores: list[np.ndarray]  # per axis: the sampled prompts' roots
    assisted: np.ndarray  # axes: the model-assisted (difference) estimate, no interval
    raw: np.ndarray  # axes: the estimate before the roots' bias correction


def _mean_squares(cells: np.ndarray, known: np.ndarray) -> np.ndarray:
    """(..., P): the mean over a prompt's known cells, clipped at 0 as a whole. A linear
    model's predictions sum to an unbiased mean square; clipping each negative prediction
    at 0 instead lifted the heavy-tailed axes' SGS (Prob, Ent, Act: +0.3 to +0.5 of the
    full run's half-width at 40% of the demo run), the few large squares pulling the many
    small cells' predictions around 0."""
    total = np.where(known, cells, 0.0).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.maximum(total / known.sum(-1), 0.0)


def _held_out_residuals(
    y: np.ndarray,
    m: np.ndarray,
    group: np.ndarray,
    rank: int,
    ridge: float,
    eff: Effects,
    rng: np.random.Generator,
) -> np.ndarray:
    """(axes, P, K): each observed cell's cross-validated residual, y minus its prediction
    from a refit without its fold (``FOLDS`` random folds of the asked cells, all refits at
    once, warm-started): the error of predicting a cell the run did not ask, a kind seen
    once included (held out, it is an unseen kind)."""
    where = np.argwhere(m.any(0))  # L x 2
    fold = rng.permutation(len(where)) % FOLDS
    folds = min(FOLDS, len(where))
    held = np.ones((folds, *m.shape[1:]), dtype=bool)
    held[fold, where[:, 0], where[:, 1]] = False
    start = Effects(*(np.repeat(getattr(eff, f.name)[:, None], folds, axis=1) for f in fields(eff)))
    refit = fit_additive(
        y[:, None], m[:, None] & held[None], group, rank, ridge, WARM_ITERATIONS, start
    ).predict(group)
    r = np.zeros(y.shape)
    r[:, where[:, 0], where[:, 1]] = (
        y[:, where[:, 0], where[:, 1]] - refit[:, fold, where[:, 0], where[:, 1]]
    )
    return np.where(m, r, 0.0)


def _standardised(r: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(standardised residuals on observed cells, each cell's scale): a prompt scale x a
    kind scale over the dataset's, each a root mean square shrunk towards the dataset's with
    ``SHRINK`` pseudo-cells."""
    n_i, n_k = m.sum(-1, keepdims=True), m.sum(-2, keepdims=True)
    overall = np.sqrt(
        (r**2).sum((-2, -1), keepdims=True) / np.maximum(m.sum((-2, -1)), 1)[..., None, None]
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        prompt = np.sqrt(((r**2).sum(-1, keepdims=True) + SHRINK * overall**2) / (n_i + SHRINK))
        kind = np.sqrt(((r**2).sum(-2, keepdims=True) + SHRINK * overall**2) / (n_k + SHRINK))
        scale = prompt * kind / np.where(overall > 0, overall, 1.0)
        z = np.where(m & (scale > 0), r / scale, 0.0)
    return z, scale


def estimate_borrow(
    gv: GridValues,
    dense: list[DatasetGrid],
    result: BudgetResult,
    rank: int,
    rng: np.random.Generator,
    stratum: np.ndarray,
    bootstrap: int = BOOTSTRAP,
    ridge: float = RIDGE,
) -> BorrowEstimate:
    """The model's estimates from a budgeted run's cells; ``stratum``: each grid cell's
    stratum in the run's design (for the model-assisted estimate)."""
    axes = len(gv.axes)
    assert result.values is not None
    values = np.where(result.observed[:, None], result.values, np.nan)
    value = np.zeros(axes)
    error = np.zeros((axes, bootstrap))
    first = np.zeros(axes)
    assisted = np.zeros(axes)
    raw = np.zeros(axes)
    scores: list[list[np.ndarray]] = [[] for _ in range(axes)]
    used = 0
    for d in dense:
        seen = np.where(d.cell >= 0, result.observed[np.maximum(d.cell, 0)], False)
        sampled = seen.any(-1)
        if not sampled.any():
            continue
        cell = d.cell[sampled]
        kept = cell >= 0
        asked = result.observed[np.where(kept, cell, 0)] & kept
        y = np.moveaxis(values[np.where(kept, cell, 0)], -1, 0)  # axes x P x K
        m = asked[None] & np.isfinite(y)
        known = kept[None] & ~(asked[None] & ~np.isfinite(y))  # not a measured gap
        y = np.where(m, y, 0.0) ** 2
        eff = fit_additive(y, m, d.group, rank, ridge)
        fit = eff.predict(d.group)
        ms = _mean_squares(np.where(m, y, fit), known)
        roots = np.sqrt(ms)  # axes x P
        held_out = _held_out_residuals(y, m, d.group, rank, ridge, eff, rng)
        residual = np.where(m, y - fit, 0.0)
        assisted += np.nanmean(_assisted_roots(fit, residual, m, known, stratum[cell]), axis=-1)
        z, scale = _standardised(held_out, m)
        draws = np.zeros((axes, bootstrap, *y.shape[1:]))
        for a in range(axes):
            pool = z[a][m[a]]
            pool = pool - pool.mean() if len(pool) else np.zeros(1)
            draws[a] = pool[rng.integers(0, len(pool), size=(bootstrap, *y.shape[1:]))]
        noise = draws * scale[:, None]
        y_star = fit[:, None] + noise
        start = Effects(
            *(np.repeat(getattr(eff, f.name)[:, None], bootstrap, axis=1) for f in fields(eff))
        )
        refit = fit_additive(
            y_star, m[:, None], d.group, rank, ridge, WARM_ITERATIONS, start
        ).predict(d.group)
        est = np.sqrt(_mean_squares(np.where(m[:, None], y_star, refit), known[:, None]))
        # a kind no sampled prompt was asked about shares one unknown effect across prompts
        unseen = m.sum(-2) == 0  # axes x K
        seen_b = np.where(unseen, np.nan, eff.b)
        with np.errstate(invalid="ignore"):
            tau = np.sqrt(np.nan_to_num(np.nanmean(seen_b**2, axis=-1)))  # axes
        shared = rng.standard_normal((axes, bootstrap, y.shape[-1])) * tau[:, None, None]
        shared = np.where(unseen[:, None], shared, 0.0)[:, :, None, :]
        truth = np.sqrt(_mean_squares(y_star + shared, known[:, None]))
        n, population = int(sampled.sum()), int(sampled.size)
        bias = np.clip((est - truth).mean(axis=1), -MAX_CORRECTION * roots, MAX_CORRECTION * roots)
        corrected = roots - bias
        value += np.nanmean(corrected, axis=-1)
        raw += np.nanmean(roots, axis=-1)
        error += np.nanmean(est - truth, axis=-1)
        between = np.nanvar(corrected, axis=-1, ddof=1) if n >= 2 else np.zeros(axes)
        first += (1 - n / population) * between / n
        for a in range(axes):
            scores[a].append(corrected[a][np.isfinite(corrected[a])])
        used += 1
    value, raw, error, first = value / used, raw / used, error / used, first / used**2
    half = Z95 * np.sqrt(error.var(axis=-1, ddof=1) + first)
    return BorrowEstimate(value, half, [np.concatenate(s) for s in scores], assisted / used, raw)


def _assisted_roots(
    fit: np.ndarray, residual: np.ndarray, m: np.ndarray, known: np.ndarray, stratum: np.ndarray
) -> np.ndarray:
    """(axes, P): the difference estimator of each prompt's mean square (Saerndal, Swensson
    and Wretman 1992, section 6.3): the mean of the model's prediction over every cell,
    plus the design's stratified mean of the observed cells' residuals, so the model only
    narrows the design's estimate and does not bias it (to first order); its root."""
    prompts = fit.shape[-2]
    _, local = np.unique(stratum, return_inverse=True)
    local = local.reshape(stratum.shape)
    strata = int(local.max()) + 1
    index = np.arange(prompts)[:, None] * strata + local
    out = np.full(fit.shape[:-1], np.nan)
    for a in range(fit.shape[0]):
        size = np.bincount(index[known[a]], minlength=prompts * strata).reshape(prompts, -1)
        count = np.bincount(index[m[a]], minlength=prompts * strata).reshape(prompts, -1)
        total = np.bincount(
            index[m[a]], weights=residual[a][m[a]], minlength=prompts * strata
        ).reshape(prompts, -1)
        weight = np.where(count > 0, size, 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            weight = weight / weight.sum(-1, keepdims=True)
            correction = (weight * np.where(count > 0, total / np.maximum(count, 1), 0)).sum(-1)
            base = np.where(known[a], fit[a], 0.0).sum(-1) / known[a].sum(-1)
        out[a] = np.sqrt(np.maximum(base + correction, 0.0))
    return out


def borrow_rows(
    gv: GridValues, truth: dict, estimates: list[BorrowEstimate], level: float
) -> list[dict]:
    rows = []
    for a, axis in enumerate(gv.axes):
        t = truth[axis]
        est = np.array([e.value[a] for e in estimates])
        hw = np.array([e.half[a] for e in estimates])
        assisted = np.array([e.assisted[a] for e in estimates])
        agree = []
        for eps in EPSILONS:
            said = [
                (p := one_sided_t_test(e.scores[a], eps).p_value) is not None and p < level
                for e in estimates
            ]
            agree.append(float(np.mean([v == t["verdicts"][eps] for v in said])))
        rows.append(
            {
                "axis": axis,
                "cover": float(np.mean(np.abs(est - t["sgs"]) <= hw)),
                "err": float(np.mean(np.abs(est - t["sgs"]))) / t["half"] if t["half"] else None,
                "agree": agree,
                "assisted": float(np.mean(np.abs(assisted - t["sgs"]))) / t["half"]
                if t["half"]
                else None,
                "real": float(np.mean(hw)),
                "rmse": Z95 * float(np.sqrt(np.mean((est - t["sgs"]) ** 2))),
            }
        )
    return rows


def _num(x: float | None, form: str = ".3f") -> str:
    return "NA" if x is None else format(x, form)


def table_rows(
    fraction: float, design: list[dict], models: dict[str, list[dict]]
) -> list[list[str]]:
    out = []
    for a, row in enumerate(design):
        others = [models[name][a] for name in models]
        every = [row, *others]
        out.append(
            [
                f"{fraction:.0%}",
                row["axis"],
                " / ".join(f"{r['cover']:.3f}" for r in every),
                " / ".join(_num(r["err"]) for r in every),
                *(" / ".join(f"{r['agree'][e]:.3f}" for r in every) for e in range(len(EPSILONS))),
                " / ".join(
                    f"{r['real'] / r['rmse']:.2f}" if r["rmse"] > 0 else "NA" for r in every
                ),
                " / ".join(_num(r["assisted"]) for r in others),
            ]
        )
    return out


def verdict(design: list[dict], rows: list[dict]) -> tuple[bool, str]:
    """Borrowing wins at a budget when on every axis its error is below the design's and its
    coverage is at least the design's or 0.93, whichever is lower."""
    lower = [
        r["err"] is not None and d["err"] is not None and r["err"] < d["err"]
        for d, r in zip(design, rows, strict=True)
    ]
    cover = [r["cover"] >= min(0.93, d["cover"]) for d, r in zip(design, rows, strict=True)]
    text = (
        f"error lower on {sum(lower)}/{len(lower)} axes, coverage kept on {sum(cover)}/{len(cover)}"
    )
    return all(lower) and all(cover), text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.budget_borrow", description=__doc__)
    parser.add_argument("--run", type=Path, help="a finished full-grid run folder")
    parser.add_argument("--model", help="the model to replay (when the run holds several)")
    parser.add_argument("--prompts", type=int, default=8, help="synthetic: prompts per dataset")
    parser.add_argument("--grid-seed", type=int, default=1, help="synthetic grid's seed")
    parser.add_argument("--budgets", default="0.1,0.2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--bootstrap", type=int, default=BOOTSTRAP)
    parser.add_argument("--ridge", type=float, default=RIDGE)
    parser.add_argument("--markdown", type=Path, help="also write the table here (Markdown)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    gv = load_grid(args.run, args.model, args.prompts, args.grid_seed)
    source = str(args.run) if args.run else f"synthetic paper grid, {args.prompts} prompts/dataset"
    truth = full_truth(gv)
    dense = dense_datasets(gv)
    print(
        f"borrowing strength: {source}, {gv.grid.cells} cells, {args.replays} runs per budget, "
        f"ridge {args.ridge}, {args.bootstrap} bootstrap replicates; "
        "each cell: design / add / rank1 (assisted: add / rank1)"
    )
    head = [
        "budget",
        "axis",
        "cover",
        "|err|/hw",
        *(f"agree@{e}" for e in EPSILONS),
        "hw/(1.96 rmse)",
        "assisted |err|/hw",
    ]
    lines = ["|" + "|".join(c.replace("|", "\\|") for c in head) + "|", "|" + "---|" * len(head)]
    decisions: list[str] = []
    print("  ".join(head), flush=True)
    for fraction in (float(f) for f in args.budgets.split(",")):
        clock = time.perf_counter()
        try:
            schedule = make_schedule(
                gv.grid, budget_cells(gv.grid.cells, fraction, None), args.rounds
            )
        except BudgetTooSmall as exc:
            print(f"{fraction:.0%} refused: {exc}")
            continue
        results = replay(gv, fraction, args.rounds, args.replays)
        design = budget_rows(gv, truth, fraction, args.rounds, results)
        level = look_levels(schedule.rounds, ALPHA)[-1]
        stratum = schedule.layout.stratum
        models = {}
        for rank, name in enumerate(MODELS):
            rng = np.random.default_rng(7 + rank)
            estimates = [
                estimate_borrow(gv, dense, r, rank, rng, stratum, args.bootstrap, args.ridge)
                for r in results
            ]
            models[name] = borrow_rows(gv, truth, estimates, level)
        for cells in table_rows(fraction, design, models):
            print("  ".join(cells))
            lines.append("|" + "|".join(cells) + "|")
        for name, rows in models.items():
            wins, why = verdict(design, rows)
            line = f"{fraction:.0%} {name}: borrowing {'wins' if wins else 'does not win'} ({why})"
            print(line)
            decisions.append(f"- {line}")
        print(f"({time.perf_counter() - clock:.0f} s)", flush=True)
    if args.markdown:
        args.markdown.write_text("\n".join([*lines, "", *decisions]) + "\n", encoding="utf-8")
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
