"""Asynchronous multi-objective successive halving: which trial to promote next.

Rungs are the fidelities `optimizer.fidelity` allows (`FidelitySpec.rungs`:
min, min*eta, min*eta^2, ..., max). Every new configuration starts at rung 0.
Whenever a slot frees, the optimizer asks `choose_promotion`: from the highest
rung below the top down to rung 0, a completed trial at rung k is promoted to
rung k+1 if it ranks in the top floor(n_k / eta) of the n_k trials completed at
rung k and was not promoted before. Nothing waits for a rung to fill (as in
ASHA), and a trial that ranked in the top share early may be promoted before
later trials at its rung would have out-ranked it, which is the price of never
idling a worker.

Two variants differ only while a rung holds fewer than eta results
(`optimizer.fidelity.promotion`):

- `strict` (classic ASHA): such a rung promotes nobody yet, so the first
  result at the top rung waits for eta**(rungs-1) results at rung 0;
- `eager` (the default): such a rung promotes its best result, as the
  stopping variant of ASHA lets a trial go on that is the best at its rung so
  far. The first configuration reaches the top after min + ... + max epochs,
  the cost of one full-fidelity trial, instead of after eta**(rungs-1) new
  configurations. The extra cost is what a rung promotes while it holds
  fewer than eta results (its first result, then any that is the best so
  far: at most eta - 1 trials a rung); from n_k = eta on, both rules admit
  the top floor(n_k / eta).

The ranking is multi-objective, on the objectives only (each trial's values at
the rung it trained to):

1. trials that meet the outcome constraints (`constraints:` in the spec) come
   before those that do not, which are ordered by how far they miss;
   objective thresholds are not constraints here: at a low rung accuracy
   thresholds meant for the full training are rarely met, and they would not
   rank anything (they set the reference point in 3);
2. then by non-dominated sorting rank (moocore's `pareto_rank`);
3. within one front, by exclusive hypervolume contribution (larger first).
   Objectives are scaled to [0, 1] across the rung; each one's reference is
   its threshold or 0.1 beyond the rung's worst value, whichever is worse. So
   every trial of the rung counts, and an objective whose threshold lies far
   beyond the rung's values weighs by the room the threshold leaves, as in
   the hypervolume the front is judged by: with `num_params <= 80000` and
   networks of 1,500 to 26,000 parameters, a network's size spans a third of
   its scale, not all of it, and a tiny network near chance accuracy does not
   out-rank an accurate one for being the smallest. Without thresholds the
   reference is 0.1 beyond the worst value of each (the scale is the rung's
   range). A trial sharing its point with another contributes nothing alone,
   and those ties go to the earlier trial.

Which trials of a rung go on (`optimizer.fidelity.rank`):

- `rung` (the default): the top of the ranking above, by the values the
  trials reached at the rung (MO-ASHA's rule). Any trial in the top
  floor(n_k / eta) that was not promoted yet goes on, so a rung may promote
  more than that share when a later trial out-ranks one promoted earlier
  (as ASHA);
- `model`: the same rule and the same ranking, applied to what the model
  predicts each trial of the rung would reach at the top rung instead of the
  values it reached at the rung, and with the objective thresholds as
  constraints (they are meant for the top rung, which the prediction is of):
  a trial predicted to miss a threshold ranks after every trial predicted
  to meet them all. A fidelity-independent objective (a parameter count is
  exact after one epoch) then counts as what it is, and a tiny network at
  chance accuracy is not promoted for being the smallest. Until the model
  can predict (the quasi-random start), the `rung` ranking decides. That is
  the intent; measured on real training `model` did worse than `rung` and
  still promoted about as many near-chance results from the first rung
  (docs/multifidelity.md), so `rung` is the default.

With the `rung` rank a rung can also be ranked by the objectives' thresholds
carried down to it (`carried_thresholds`, switched on by
`multifidelity.CARRY_THRESHOLDS`): a threshold is meant for the top rung, so
it is moved by what the configurations that met it at the top improved after
that rung (all but the slowest tenth of them), and a rung's trials beyond it
rank after the others as constraint misses do. Non-dominated sorting alone
puts the smallest network of every front level of a rung first, near-chance
accuracy or not; a carried accuracy threshold ranks those that no
configuration within the threshold resembled at that rung after the rest.

This module is pure (numpy and moocore), so the rule is tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from nasctl.spec import Constraint, Objective


@dataclass(frozen=True)
class RungResult:
    """A completed trial at one rung."""

    index: int  # the trial index
    rung: int
    values: Mapping[str, float]


def violation(values: Mapping[str, float], constraints: Sequence[Constraint]) -> float:
    """How far `values` miss the outcome constraints, each relative to its bound (0: all met)."""
    total = 0.0
    for c in constraints:
        v = values.get(c.metric)
        if v is None:
            total += 1.0
            continue
        miss = v - c.bound if c.op == "<=" else c.bound - v
        if miss > 0:
            total += miss / max(abs(c.bound), 1e-12)
    return total


def rank_order(results: Sequence[RungResult], objectives: Mapping[str, Objective],
               constraints: Sequence[Constraint] = ()) -> list[RungResult]:
    """`results` best first by the rule in the module docstring."""
    if not results:
        return []
    import moocore

    names = list(objectives)
    # minimisation throughout; a missing objective is the worst possible value
    y = np.array([[(-1.0 if objectives[m].maximize else 1.0) * r.values.get(m, np.nan) for m in names]
                  for r in results], dtype=float)
    worst = np.nanmax(np.where(np.isfinite(y), y, np.nan), axis=0)
    worst = np.where(np.isfinite(worst), worst, 0.0)
    y = np.where(np.isfinite(y), y, worst + 1.0)
    lo, hi = y.min(axis=0), y.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    z = (y - lo) / span  # the rung's range is [0, 1]
    threshold = np.array([-np.inf if (t := objectives[m].threshold) is None
                          else (-1.0 if objectives[m].maximize else 1.0) * t for m in names])
    ref = np.maximum(1.1, (threshold - lo) / span)  # 0.1 beyond the worst, or the threshold if worse
    miss = np.array([violation(r.values, constraints) for r in results])
    key_rank = np.zeros(len(results))
    key_contrib = np.zeros(len(results))
    for feasible in (True, False):
        group = np.flatnonzero((miss == 0) == feasible)
        if group.size == 0:
            continue
        ranks = np.asarray(moocore.pareto_rank(z[group]))
        key_rank[group] = ranks
        for r in np.unique(ranks):
            members = group[ranks == r]
            if members.size == 1:
                key_contrib[members] = np.inf
                continue
            key_contrib[members] = moocore.hv_contributions(z[members], ref=ref)
    order = sorted(range(len(results)), key=lambda i: (
        miss[i] > 0, miss[i], key_rank[i], -key_contrib[i], results[i].index))
    return [results[i] for i in order]


def promotable(n: int, eta: int, eager: bool) -> int:
    """How many of a rung's `n` completed trials may have been promoted."""
    return max(n // eta, 1 if eager and n else 0)


Predictor = Callable[[Sequence[RungResult]], Sequence[RungResult] | None]
"""The `model` rank's prediction of the given results at the top rung (the same
trials with their predicted values), or None where the model cannot predict (yet)."""


def thresholds_as_constraints(objectives: Mapping[str, Objective]) -> list[Constraint]:
    """The objectives' thresholds as outcome constraints (`acc >= 0.8`)."""
    return [Constraint(metric=n, op=">=" if o.maximize else "<=", bound=float(o.threshold))
            for n, o in objectives.items() if o.threshold is not None]


CARRIED_SHARE = 0.9
"""The quantile of the improvements after a rung, among the configurations that
met a threshold at the top rung, that the threshold carried down to that rung
allows for (`carried_thresholds`): the slowest tenth of them does not loosen it."""


def carried_thresholds(ladders: Sequence[Mapping[int, Mapping[str, float]]], objectives: Mapping[str, Objective],
                       n_rungs: int, share: float = CARRIED_SHARE) -> dict[int, list[Constraint]]:
    """The objectives' thresholds carried down to each rung below the top, as constraints.

    A threshold is meant for the top rung; at a lower rung a value beyond it
    may still end within it after more training. How far is measured on the
    configurations that reached the top rung within the threshold: how much
    each improved from rung k to the top. The threshold at rung k is the
    threshold moved by the `share` quantile of those improvements (never
    tighter than the threshold itself): a value the configurations that met
    the threshold were, but for the slowest of them, better than at rung k.
    An objective that training does not change, such as a parameter count,
    keeps its threshold exactly. A rung gets no constraint from an objective
    while no configuration has met its threshold at the top rung.

    Args:
        ladders: per configuration, its completed values at each rung it reached.
        objectives: the objectives; those without a threshold carry nothing.
        n_rungs: how many rungs there are (the top is `n_rungs - 1`).
        share: the quantile of the improvements allowed for (1: the largest).
    """
    top = n_rungs - 1
    out: dict[int, list[Constraint]] = {}
    for name, objective in objectives.items():
        if objective.threshold is None:
            continue
        sign = -1.0 if objective.maximize else 1.0  # minimisation throughout
        limit = sign * objective.threshold
        for k in range(top):
            gains = [g for ladder in ladders
                     if k in ladder and top in ladder and name in ladder[k] and name in ladder[top]
                     and sign * ladder[top][name] <= limit
                     and np.isfinite(g := sign * (ladder[k][name] - ladder[top][name]))]
            if not gains:
                continue
            bound = sign * (limit + max(0.0, float(np.quantile(gains, share))))
            out.setdefault(k, []).append(Constraint(metric=name, op=">=" if objective.maximize else "<=",
                                                    bound=bound))
    return out


def choose_promotion(results: Sequence[RungResult], promoted: set[int], n_rungs: int, eta: int,
                     objectives: Mapping[str, Objective],
                     constraints: Sequence[Constraint] = (), *, eager: bool = False,
                     predict: Predictor | None = None,
                     carried: Mapping[int, Sequence[Constraint]] | None = None) -> RungResult | None:
    """The trial to promote now (to its rung + 1), or None: a new configuration should start.

    Args:
        results: every completed trial with the rung it trained to.
        promoted: indices of trials already promoted (never promoted again).
        n_rungs: how many rungs there are; trials at the top rung are never promoted.
        eta: the reduction factor: the top 1/eta of a rung may go on.
        eager: a rung with fewer than eta results promotes its best (see the module docstring).
        predict: the `model` rank: the rung is ranked by these predicted
            top-rung values (see the module docstring); None: the `rung` rank.
        carried: per rung, constraints its values are also ranked by (the
            thresholds carried down to it, `carried_thresholds`); the `rung`
            rank only.
    """
    for k in range(n_rungs - 2, -1, -1):
        at_k = [r for r in results if r.rung == k]
        top = promotable(len(at_k), eta, eager)
        if top == 0:
            continue
        ranked = None
        if predict is not None:
            predicted = predict(at_k)
            if predicted is not None:
                by_index = {r.index: r for r in at_k}
                order = rank_order(predicted, objectives,
                                   [*constraints, *thresholds_as_constraints(objectives)])
                ranked = [by_index[p.index] for p in order]
        if ranked is None:  # the rung's own values
            ranked = rank_order(at_k, objectives, [*constraints, *(carried or {}).get(k, ())])
        for r in ranked[:top]:
            if r.index not in promoted:
                return r
    return None
