"""Pareto fronts and hypervolume for the store's trials (CLI, dashboard, loop).

Non-dominated sorting and hypervolumes are moocore's (`is_nondominated`,
`hypervolume`; C code), which replaced nasctl's own NumPy sweeps; the
comparison is in docs/optimizer.md ("Non-dominated sorting and hypervolume").

Conventions: every function takes a matrix `Y` of shape (n, m) in which all
objectives are to be *maximised* (callers negate minimised ones with
`to_maximization`). The reference point `ref` is the worst acceptable value of
each objective in the same orientation; only points strictly better than `ref`
in every objective contribute to the hypervolume.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from nasctl.spec import Constraint, Objective


def pareto_mask(Y: np.ndarray) -> np.ndarray:
    """Boolean mask of non-dominated rows of `Y` (maximisation). Duplicates are all kept."""
    import moocore

    Y = np.asarray(Y, dtype=float)
    if Y.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    if Y.ndim == 2 and Y.shape[1] == 1:
        return np.asarray(Y[:, 0] == Y[:, 0].max())
    return np.asarray(moocore.is_nondominated(Y, maximise=True, keep_weakly=True), dtype=bool)


def hypervolume(Y: np.ndarray, ref: Sequence[float]) -> float:
    """Exact hypervolume dominated by `Y` (maximisation) and bounded by `ref`:
    only points strictly better than `ref` in every objective contribute."""
    Y = np.asarray(Y, dtype=float).reshape(-1, len(ref))
    r = np.asarray(ref, dtype=float)
    Y = Y[np.all(Y > r, axis=1)]
    if Y.shape[0] == 0:
        return 0.0
    if Y.shape[1] == 1:
        return float(Y[:, 0].max() - r[0])
    return _front_hv(Y - r)


@dataclass(frozen=True)
class FrontResult:
    """Result of `compute_front` over a set of completed trials."""

    indices: list[int]  # trial indices on the Pareto front (feasible, beyond the reference)
    feasible: list[int]  # trial indices that satisfy every constraint and threshold
    hypervolume: float
    reference: dict[str, float]  # the reference point per objective, in the objectives' own units
    inferred_reference: list[str]  # objectives whose reference had no threshold and was inferred


def to_maximization(values: np.ndarray, objectives: Mapping[str, Objective]) -> np.ndarray:
    signs = np.array([1.0 if o.maximize else -1.0 for o in objectives.values()])
    out: np.ndarray = np.asarray(values, dtype=float) * signs
    return out


def compute_front(
    trials: Sequence[tuple[int, Mapping[str, float]]],
    objectives: Mapping[str, Objective],
    constraints: Sequence[Constraint] = (),
) -> FrontResult:
    """Pareto front and hypervolume of completed trials.

    Args:
        trials: (trial index, metric values) for completed trials.
        objectives: the spec's objectives, in order.
        constraints: outcome constraints; a trial that violates one is infeasible.

    The reference point is each objective's threshold; an objective without a
    threshold uses the worst value observed among feasible trials (so every
    feasible trial that beats the other thresholds counts), and is reported in
    `inferred_reference`.

    Cost: O(n log n) for 2 and 3 objectives (`nondominated_mask`); the
    hypervolume is computed on the front only.
    """
    names = list(objectives)
    idx, Y = _objective_matrix(trials, objectives, constraints)
    signs = np.array([1.0 if objectives[n].maximize else -1.0 for n in names])
    ref_native: dict[str, float] = {}
    inferred: list[str] = []
    for k, n in enumerate(names):
        th = objectives[n].threshold
        if th is not None:
            ref_native[n] = th
        else:
            inferred.append(n)
            col = Y[:, k]
            if len(col):
                worst = col.min() if objectives[n].maximize else col.max()
                span = (col.max() - col.min()) or abs(worst) or 1.0
                # a little beyond the worst value so the worst point still counts
                ref_native[n] = float(worst - 0.1 * span * signs[k])
            else:
                ref_native[n] = 0.0
    ref = np.array([ref_native[n] for n in names]) * signs
    Ymax = Y * signs
    beyond = np.all(Ymax > ref, axis=1) if len(Ymax) else np.zeros(0, dtype=bool)
    feasible = [i for i, b in zip(idx, beyond) if b]
    Yf = Ymax[beyond]
    mask = nondominated_mask(Yf)
    front_idx = [i for i, m in zip(feasible, mask) if m]
    hv = _front_hv(Yf[mask] - ref) if mask.any() else 0.0
    return FrontResult(front_idx, feasible, hv, ref_native, inferred)


def exclusion(
    values: Mapping[str, float],
    objectives: Mapping[str, Objective],
    constraints: Sequence[Constraint] = (),
    reference: Mapping[str, float] | None = None,
) -> str | None:
    """Why a completed trial is not eligible for the Pareto front, or None if it is.

    The reason names the requirement it failed, in the order `compute_front`
    applies them: a missing objective value (`no val_acc`), a constraint
    (`latency_ms <= 5`), then an objective's threshold, which a value must beat
    strictly (`val_acc > 0.9`). `reference` is `FrontResult.reference` (the
    thresholds, and the inferred references of objectives without one).
    """
    for n in objectives:
        v = values.get(n)
        if v is None or not math.isfinite(float(v)):
            return f"no {n}"
    for c in constraints:
        v = values.get(c.metric)
        if v is None or not math.isfinite(float(v)) or not c.satisfied(float(v)):
            return str(c)
    for n, o in objectives.items():
        ref = o.threshold if reference is None else reference.get(n, o.threshold)
        if ref is None:
            continue
        v = float(values[n])
        if (o.maximize and not v > ref) or (not o.maximize and not v < ref):
            return f"{n} {'>' if o.maximize else '<'} {ref:g}"
    return None


def exclusions(
    trials: Sequence[tuple[int, Mapping[str, float]]],
    objectives: Mapping[str, Objective],
    constraints: Sequence[Constraint] = (),
    reference: Mapping[str, float] | None = None,
) -> dict[str, list[int]]:
    """The completed trials left out of the front, by the requirement they failed
    (`exclusion`): {"val_acc > 0.9": [3, 7], ...}, in order of first appearance."""
    out: dict[str, list[int]] = {}
    for index, values in trials:
        why = exclusion(values, objectives, constraints, reference)
        if why is not None:
            out.setdefault(why, []).append(index)
    return out


def hypervolume_trace(
    trials: Sequence[tuple[int, Mapping[str, float]]],
    objectives: Mapping[str, Objective],
    constraints: Sequence[Constraint] = (),
) -> list[tuple[int, float]]:
    """Hypervolume after each completed trial, in trial-index order (for progress plots).

    The reference point is fixed from all trials first, so the trace is monotone.
    """
    full = compute_front(trials, objectives, constraints)
    fixed = {n: Objective(goal=o.goal, threshold=full.reference[n], value=o.value) for n, o in objectives.items()}
    ordered = sorted(trials, key=lambda t: t[0])
    out = []
    for k in range(len(ordered)):
        out.append((ordered[k][0], compute_front(ordered[: k + 1], fixed, constraints).hypervolume))
    return out


def nondominated_mask(Y: np.ndarray) -> np.ndarray:
    """`pareto_mask` (kept for callers of the name)."""
    return pareto_mask(Y)


def _objective_matrix(
    trials: Sequence[tuple[int, Mapping[str, float]]],
    objectives: Mapping[str, Objective],
    constraints: Sequence[Constraint],
) -> tuple[list[int], np.ndarray]:
    """Indices and objective values (native units) of trials with every objective finite and every constraint met."""
    names = list(objectives)
    rows, idx = [], []
    for index, values in trials:
        try:
            row = [float(values[n]) for n in names]
        except (KeyError, TypeError, ValueError):
            continue
        if constraints:
            ok = True
            for c in constraints:
                v = values.get(c.metric)
                if v is None or not math.isfinite(v) or not c.satisfied(float(v)):
                    ok = False
                    break
            if not ok:
                continue
        rows.append(row)
        idx.append(index)
    Y = np.array(rows, dtype=float).reshape(-1, len(names))
    finite = np.all(np.isfinite(Y), axis=1)
    if finite.all():
        return idx, Y
    return [i for i, f in zip(idx, finite) if f], Y[finite]


#: With `max_points`, checkpoints are spaced so that the total work stays near this many point visits.
HISTORY_WORK = 500_000


def hypervolume_history(
    trials: Sequence[tuple[int, Mapping[str, float]]],
    objectives: Mapping[str, Objective],
    constraints: Sequence[Constraint] = (),
    max_points: int | None = None,
    reference: Mapping[str, float] | None = None,
) -> list[tuple[int, float]]:
    """Same result as `hypervolume_trace`, computed incrementally.

    The hypervolume only changes when a trial enters the running front, so the
    trace recomputes it only then. Trials are screened in blocks against the
    front as it stood before the block (vectorised): a trial dominated by it can
    never enter the front later.

    With `max_points` and more trials than that, the trace is sampled: at most
    `max_points` checkpoints (fewer when the front holds thousands of points, so
    the cost stays bounded), always including the last trial. Every value
    reported is the exact hypervolume after that trial.

    `reference` is the reference point `compute_front` found for the same
    trials (pass it when already known; it is computed otherwise).
    """
    if reference is None:
        reference = compute_front(trials, objectives, constraints).reference
    names = list(objectives)
    signs = np.array([1.0 if objectives[n].maximize else -1.0 for n in names])
    ref = np.array([reference[n] for n in names]) * signs
    ordered = sorted(trials, key=lambda t: t[0])
    idx, Y = _objective_matrix(ordered, objectives, constraints)
    Y = Y * signs
    contributes = np.all(Y > ref, axis=1) if len(Y) else np.zeros(0, dtype=bool)
    if max_points is not None and len(ordered) > max_points:
        return _sampled_history(ordered, set(idx), Y, contributes, ref, max_points)
    trace_at: dict[int, float] = {}
    front = np.zeros((0, len(names)))
    block = 2048
    for start in range(0, len(Y), block):
        cand = np.flatnonzero(contributes[start : start + block]) + start
        if len(front) and len(cand):
            B = Y[cand]
            ge = np.all(front[None, :, :] >= B[:, None, :], axis=2)
            gt = np.any(front[None, :, :] > B[:, None, :], axis=2)
            cand = cand[~np.any(ge & gt, axis=1)]
        for p in cand:
            y = Y[p]
            if len(front) and np.any(np.all(front >= y, axis=1) & np.any(front > y, axis=1)):
                continue
            front = np.vstack([front, y])
            front = front[nondominated_mask(front)]
            trace_at[idx[p]] = _front_hv(front - ref)
    out = []
    current = 0.0
    for index, _ in ordered:
        current = trace_at.get(index, current)
        out.append((index, current))
    return out


def _front_hv(P: np.ndarray) -> float:
    """Hypervolume of points P (> 0 in every objective) w.r.t. the origin, maximisation."""
    import moocore

    if P.shape[0] == 0:
        return 0.0
    if P.shape[1] == 1:
        return float(P[:, 0].max())
    return float(moocore.hypervolume(P, ref=np.zeros(P.shape[1]), maximise=True))


def _sampled_history(
    ordered: Sequence[tuple[int, Mapping[str, float]]],
    usable: set[int],
    Y: np.ndarray,
    contributes: np.ndarray,
    ref: np.ndarray,
    max_points: int,
) -> list[tuple[int, float]]:
    """Hypervolume at checkpoints over `ordered`; `Y` holds the usable trials' rows in the same order."""
    n = len(ordered)
    rows_upto = np.cumsum([t[0] in usable for t in ordered])
    base = max(1, -(-n // max(1, max_points)))
    front = np.zeros((0, Y.shape[1]))
    hv = 0.0
    consumed = 0
    k = -1
    out: list[tuple[int, float]] = []
    while k < n - 1:
        step = max(base, -(-len(front) * n // HISTORY_WORK))
        k = min(n - 1, k + step)
        upto = int(rows_upto[k])
        block = Y[consumed:upto][contributes[consumed:upto]]
        consumed = upto
        if len(block):
            both = np.vstack([front, block])
            mask = nondominated_mask(both)
            if mask[len(front):].any():
                front = both[mask]
                hv = _front_hv(front - ref)
        out.append((ordered[k][0], hv))
    return out
