"""Multi-fidelity search: asynchronous successive halving with Bayesian proposals.

`MultiFidelityOptimizer` is the `AxOptimizer` for specs with
`optimizer.fidelity`. Each request for n candidates is served slot by slot:

1. a promotion, if `promotion.choose_promotion` finds a rung that may promote
   one more of its trials (the top 1/eta; with `promotion: eager`, also the
   best of a rung that has fewer than eta results): the same configuration at
   the next rung, continuing that trial (`promoted_from`). With `rank: rung`
   (the default) a rung is ranked by the values its trials reached there;
   with `rank: model`, by what the model predicts they would reach at the top
   rung (`predict_top`);
2. otherwise the model's proposal: a configuration no trial has, started at
   the lowest rung; with `untried.CONTINUE_PAUSED` (off by default) also one
   paused below the top rung (its last trial completed there and was not
   promoted), continued from that trial to the next rung (`promoted_from`, as
   a promotion).

The model sees every trial at every rung. The fidelity parameter is one more
input of the Ax search space (a range on the log scale), so the GP fits all
results with fidelity as a feature and shares what lower rungs say about a
region with the prediction at the top rung. New configurations are chosen with
the fidelity held at `propose_at` (default: `max`, so qLogNEHVI scores each
candidate by its predicted top-rung outcome, the quantity the front is made of)
and then launched at the lowest rung: the trial the Ax experiment records is
the configuration at `min`, which is what it will be trained to first.

Promotions happen on the generator thread, in the order of everything else
the optimizer does, so Ax's trial indices stay equal to the store's. A
promotion is recorded by the loop before its job starts (see the store's
`add_trial`); on resume, the stored `promoted_from` of every trial is given back
to `restore`, so nothing is promoted twice.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from nasctl.optimizer import compat, untried
from nasctl.optimizer.ax_optimizer import AxOptimizer
from nasctl.optimizer.base import Candidate, RestoredTrial
from nasctl.optimizer.promotion import RungResult, carried_thresholds, choose_promotion, rank_order
from nasctl.optimizer.quiet import quietly
from nasctl.spec import Constraint, ExperimentSpec, FidelitySpec
from nasctl.types import ParamValue

PROMOTION = "promotion"
"""The generation method recorded for a promoted trial."""

BRACKETS = 1
"""How many of the lowest rungs a new configuration may start at (asynchronous
Hyperband's brackets) when the spec does not say (`optimizer.fidelity.brackets`):
1 starts every one at the lowest rung (successive halving); b > 1 starts each at one of the b lowest rungs, the one whose
configurations have cost least so far (each start counted at its rung's
fidelity), so that the brackets share the budget and a problem whose low rungs
mislead still gets configurations the model chose trained further at once.
1 by default: on the time-to-front tables 3 brackets were not better at the end
and later to a good front (docs/multifidelity.md, "Starting new configurations
at higher rungs"). `benchmarks/ablation.py` variant `brackets-B` sets it."""


END_GAME = False
"""Off by default (measured in docs/multifidelity.md, "The end of the budget"):
with `budget.max_gpu_hours`, once what is left of it is at most what the
parallel slots spend while one configuration climbs the ladder
(`budget.parallelism` x the median cost of a top-rung training, each result's
cost scaled to the top rung as the cost model learns it), a configuration
started at the lowest rung could no longer reach the top before the budget
ends. Then every free slot first promotes, to the top rung, the best trial of
the rung below not yet promoted, past the rung's 1/eta quota; a new
configuration starts only when none is left. `benchmarks/ablation.py` variant
`end-game` sets it."""


LATE_FULL_FROM: float | None = None
"""Off (None) by default (measured in docs/benchmarks.md, "Tried and not kept":
worse on the digits MLP at the end of the budget): once this share of the budget is spent
(`budget.max_gpu_hours` where set, else `budget.max_trials`), every new
configuration starts at the top rung, trained in full at once: the rungs
screen while the model knows little, and the model's later proposals are
not stopped by a first rung that ranks late learners low. Promotions of the
trials already below the top go on as before. `benchmarks/ablation.py`
variant `late-full` sets it to 0.5."""


CARRY_THRESHOLDS = False
"""Off by default (measured in docs/multifidelity.md, "Thresholds at the lower
rungs"): with the `rung` rank, each rung below the top is also ranked by the
objectives' thresholds carried down to it as constraints
(`promotion.carried_thresholds`: a threshold moved by what the configurations
that met it at the top, but for the slowest tenth, improved after that rung),
so a trial no such configuration was as bad as at its rung, like the smallest
network of a rung at near-chance accuracy, ranks after those that could still
end within them. `benchmarks/ablation.py` variant `carry-thresholds` sets it."""


class MultiFidelityOptimizer(AxOptimizer):
    """An `AxOptimizer` that also promotes trials rung by rung (see the module docstring).

    Args:
        spec: a spec with `optimizer.fidelity`.
        propose_at: the fidelity new configurations are scored at: `max` (the
            top rung) or `min` (the rung they start at).
    """

    def __init__(self, spec: ExperimentSpec, propose_at: Literal["max", "min"] = "max") -> None:
        assert spec.optimizer.fidelity is not None, "MultiFidelityOptimizer needs optimizer.fidelity"
        self.fidelity: FidelitySpec = spec.optimizer.fidelity
        self.propose_at = propose_at
        self._configs: dict[int, dict[str, ParamValue]] = {}  # trial index -> its configuration
        self._rung: dict[int, int] = {}  # trial index -> the rung it trains to
        self._results: dict[int, Mapping[str, float]] = {}  # completed trials' values
        self._promoted: set[int] = set()  # trials already promoted
        self._source: dict[int, int] = {}  # a promoted trial -> the trial it continues
        self._model: tuple[int, Any] | None = None  # (results seen, Ax adapter) of the last `predict_top` fit
        self._continuing: dict[tuple[tuple[str, str], ...], int] = {}  # paused configurations chosen in `generate`
        self._started: dict[int, float] = {}  # start rung -> fidelity spent on configurations started there
        self._top_costs: dict[int, float] = {}  # trial index -> its cost as a top-rung training (`END_GAME`)
        # No quasi-random fast path: its draws would bypass `_trial_run` (every
        # new configuration starts at the lowest rung) and promotions attach
        # trials to Ax between them.
        super().__init__(spec, fast_start=False)

    # --- the Ax experiment carries the fidelity as a parameter ------------------
    def _parameter_configs(self) -> list[Any]:
        from ax.api.configs import RangeParameterConfig

        fid = self.fidelity
        return [*super()._parameter_configs(), RangeParameterConfig(
            name=fid.parameter, bounds=(fid.min, fid.max),
            parameter_type="int" if fid.integer else "float", scaling="log")]

    def _fixed_features(self) -> Any:
        from ax.core.observation import ObservationFeatures

        fid = self.fidelity
        return ObservationFeatures(parameters={fid.parameter: fid.max if self.propose_at == "max" else fid.min})

    def _trial_run(self, run: Any) -> Any:
        """A new configuration at the lowest rung (the proposal may hold the fidelity it was scored at).

        A configuration tried before (at any rung) is never started again: it
        goes on by promotion only. Scored at the top rung, the model can still
        see improvement at a configuration observed only at a low one, and
        would propose it again; the farthest quasi-random point replaces it
        (`novelty`, as for repeats while nothing is feasible). With
        `untried.CONTINUE_PAUSED`, except where the configuration is paused (`_paused`: its last trial completed below the
        top rung and was not promoted): then the model's choice continues it, from
        that trial's checkpoint to the next rung, as a promotion would."""
        from ax.core.arm import Arm
        from ax.core.generator_run import GeneratorRun

        earlier = list(self._configs.values())
        config = {k: v for k, v in run.arms[0].parameters.items() if k in self.spec.tunable}
        source = self._paused().get(_key(config)) if untried.CONTINUE_PAUSED else None
        if source is not None:  # the model chose a paused configuration: it goes on from where it stopped
            self._continuing[_key(config)] = source
            params = {**run.arms[0].parameters, self.fidelity.parameter: self.fidelity.rungs[self._rung[source] + 1]}
            return GeneratorRun(arms=[Arm(parameters=params)], generation_node_name=compat.generation_node_name(run))
        if earlier and self.guard.repeats(config, earlier):
            run = self._explore_run(earlier)
        params = {**run.arms[0].parameters, self.fidelity.parameter: self.fidelity.rungs[self._start_rung()]}
        if params == run.arms[0].parameters:
            return run
        return GeneratorRun(arms=[Arm(parameters=params)],
                            generation_node_name=compat.generation_node_name(run))  # kept for `_method`

    def _start_rung(self) -> int:
        """The rung a new configuration starts at (`BRACKETS`): the lowest of the
        brackets whose starts have cost least so far; the top rung once
        `LATE_FULL_FROM` of the budget is spent, where that is set."""
        if LATE_FULL_FROM is not None and self._budget_share() >= LATE_FULL_FROM:
            return len(self.fidelity.rungs) - 1
        chosen = self.fidelity.brackets if self.fidelity.brackets is not None else BRACKETS
        brackets = max(1, min(chosen, len(self.fidelity.rungs)))
        return min(range(brackets), key=lambda k: (self._started.get(k, 0.0), k))

    def _budget_share(self) -> float:
        """The share of the budget spent: the GPU budget's where there is one, else the trials'."""
        gpu_budget = self._gpu_budget_seconds()
        if gpu_budget is not None:
            return self._spent / gpu_budget
        return len(self._configs) / self.spec.budget.max_trials

    def _count_start(self, index: int) -> None:
        rung = self._rung[index]
        self._started[rung] = self._started.get(rung, 0.0) + self.fidelity.rungs[rung]

    # --- bookkeeping ------------------------------------------------------------
    def _paused(self) -> dict[tuple[tuple[str, str], ...], int]:
        """Configurations that stopped below the top rung: for each, the trial it would
        continue from (its highest-rung trial, completed, never promoted)."""
        last: dict[tuple[tuple[str, str], ...], int] = {}
        for i, config in self._configs.items():
            k = _key(config)
            if k not in last or (self._rung[i], i) > (self._rung[last[k]], last[k]):
                last[k] = i
        top = len(self.fidelity.rungs) - 1
        return {k: i for k, i in last.items()
                if i in self._results and i not in self._promoted and self._rung[i] < top}

    def _track(self, index: int, parameters: Mapping[str, ParamValue], promoted_from: int | None) -> None:
        fid = self.fidelity
        self._configs[index] = {k: v for k, v in parameters.items() if k in self.spec.tunable}
        rung = fid.rung_of(float(parameters[fid.parameter]))
        self._rung[index] = 0 if rung is None else rung
        if promoted_from is not None:
            self._promoted.add(promoted_from)
            self._source[index] = promoted_from

    @quietly
    def attach(self, parameters: Mapping[str, ParamValue]) -> int:
        """Add a stored trial (on resume), its fidelity included."""
        keep = {k: v for k, v in parameters.items() if k in self.spec.tunable or k == self.fidelity.parameter}
        index = self.client.attach_trial(parameters=keep)
        self._track(index, keep, None)
        return int(index)

    @quietly
    def restore(self, trials: Sequence[RestoredTrial]) -> None:
        # known before the outcomes are told: a promotion's cost is scaled by its source's rung
        self._source.update({t.index: t.promoted_from for t in trials if t.promoted_from is not None})
        super().restore(trials)
        for t in trials:
            if t.promoted_from is not None:
                self._promoted.add(t.promoted_from)
            elif t.index in self._rung:
                self._count_start(t.index)

    @quietly
    def complete(self, index: int, values: Mapping[str, float], cost: float | None = None) -> None:
        super().complete(index, values, cost)
        self._results[index] = dict(values)

    def _complete(self, index: int, values: Mapping[str, float], cost: float | None = None) -> None:
        super()._complete(index, values, cost)
        if cost is not None and index in self._rung:  # `complete` passes a valid cost or None
            self._top_costs[index] = self._model_cost(index, cost)

    def _end_game(self) -> bool:
        """Whether what is left of `budget.max_gpu_hours` is too little for a new
        configuration to reach the top rung (`END_GAME`)."""
        gpu_budget = self._gpu_budget_seconds()
        if not END_GAME or gpu_budget is None or not self._top_costs:
            return False
        left = gpu_budget - self._spent
        return left <= self.spec.budget.parallelism * statistics.median(self._top_costs.values())

    def _model_cost(self, index: int, cost: float) -> float:
        """A trial's cost as that of its configuration's training to the top rung:
        a promotion that went from fidelity f0 to f cost `cost` for f - f0 (a new
        configuration: for f), so the top rung's costs `cost` * max / (f - f0).
        Every configuration's cost is then comparable, whatever rung it reached."""
        fid = self.fidelity
        done = fid.rungs[self._rung[index]]
        source = self._source.get(index)
        start = fid.rungs[self._rung[source]] if source is not None else 0.0
        return cost * fid.max / done if done <= start else cost * fid.max / (done - start)

    def _carried(self) -> dict[int, list[Constraint]]:
        """The thresholds carried down to each rung (`CARRY_THRESHOLDS`), from every
        configuration's completed results rung by rung."""
        if not CARRY_THRESHOLDS:
            return {}
        ladders: dict[tuple[tuple[str, str], ...], dict[int, Mapping[str, float]]] = {}
        for i, values in self._results.items():
            if i in self._rung:
                ladders.setdefault(_key(self._configs[i]), {})[self._rung[i]] = values
        return carried_thresholds(list(ladders.values()), self.spec.objectives, len(self.fidelity.rungs))

    # --- proposing ----------------------------------------------------------------
    def next_promotion(self) -> int | None:
        """The trial to promote now, or None (see `promotion.choose_promotion`)."""
        results = [RungResult(i, self._rung[i], v) for i, v in self._results.items() if i in self._rung]
        carried = self._carried()
        if self._end_game():
            below = len(self.fidelity.rungs) - 2
            below_top = [r for r in results if r.rung == below]
            ranked = rank_order(below_top, self.spec.objectives,
                                [*self.spec.parsed_constraints, *carried.get(below, ())])
            waiting = next((r for r in ranked if r.index not in self._promoted), None)
            if waiting is not None:
                return waiting.index
        chosen = choose_promotion(results, self._promoted, len(self.fidelity.rungs), self.fidelity.eta,
                                  self.spec.objectives, self.spec.parsed_constraints,
                                  eager=self.fidelity.promotion == "eager",
                                  predict=self.predict_top if self.fidelity.rank == "model" else None,
                                  carried=carried)
        return None if chosen is None else chosen.index

    @quietly
    def predict_top(self, results: Sequence[RungResult]) -> list[RungResult] | None:
        """What the model predicts `results`' configurations would reach at the
        top rung (the `model` rank of `promotion`), None while it cannot predict.

        The model is Ax's, refitted on every result so far: the GP over every
        rung with the fidelity as an input that proposals use, asked for its
        posterior mean of each configuration at the top fidelity. It is fitted
        once per new result (a promotion decision asks for several rungs)."""
        from ax.core.observation import ObservationFeatures
        from ax.utils.common.random import with_rng_seed

        from nasctl.optimizer import logscale

        fid = self.fidelity
        experiment = self.experiment
        gs = self.strategy
        try:
            if self._model is None or self._model[0] != len(self._results):  # one fit per new result
                with self.fits.active(), logscale.proposal(), with_rng_seed(seed=self.spec.optimizer.seed):
                    self._model = (len(self._results), gs.fit(experiment=experiment))
            adapter = self._model[1]
            if adapter is None:
                return None
            mean, _ = adapter.predict([
                ObservationFeatures(parameters={**self._configs[r.index], fid.parameter: fid.max})
                for r in results])
        except (NotImplementedError, AssertionError, ValueError):  # not a model yet (the quasi-random start)
            return None
        out = []
        for i, r in enumerate(results):
            values = {n: float(mean[a][i]) for n, a in self.names.items() if a in mean}
            if any(n not in values or not math.isfinite(values[n]) for n in self.spec.objectives):
                return None
            out.append(RungResult(r.index, r.rung, values))
        return out

    @quietly
    def promote(self, source: int) -> Candidate:
        """The configuration of trial `source` at the next rung, as a new (pending) trial."""
        fid = self.fidelity
        params: dict[str, ParamValue] = {**self._configs[source], fid.parameter: fid.rungs[self._rung[source] + 1]}
        index = self.client.attach_trial(parameters=params)
        self._track(index, params, source)
        return Candidate(int(index), params, PROMOTION, promoted_from=source)

    @quietly
    def generate(self, n: int) -> list[Candidate]:
        """Up to `n` candidates: promotions first, then new configurations at the lowest rung."""
        out: list[Candidate] = []
        while len(out) < n:
            source = self.next_promotion()
            if source is None:
                break
            out.append(self.promote(source))
        if len(out) < n:
            new = super().generate(n - len(out))
            for c in new:
                source = self._continuing.pop(_key({k: v for k, v in c.parameters.items()
                                                    if k in self.spec.tunable}), None)
                if source is not None:
                    c = dataclasses.replace(c, promoted_from=source)
                self._track(c.index, c.parameters, source)
                if source is None:
                    self._count_start(c.index)
                out.append(c)
            self._continuing.clear()
        return out


def _key(config: Mapping[str, ParamValue]) -> tuple[tuple[str, str], ...]:
    """A configuration's identity: its values, numbers compared as floats (8 is 8.0)."""
    return tuple(sorted((k, v if isinstance(v, str) else repr(float(v))) for k, v in config.items()))
