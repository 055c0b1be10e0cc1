"""The optimizer adapter: nasctl's interface to Ax.

`AxOptimizer` wraps an in-memory `ax.api.Client`. Its experiment is an engine,
not a store: it is rebuilt from our SQL store with `attach` on resume, and its
trial indices are kept equal to ours (both count from 0 in proposal order).

Generation: a quasi-random (Sobol) start of `spec.initial_trials` trials, then
Ax's modular BoTorch generator with the model `optimizer.method` names (see
`methods` and `strategies`); for several objectives it uses qLogNEHVI with the
objective thresholds as the reference point. Trials that are proposed
but not yet completed are pending points for the acquisition function.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from nasctl.optimizer import compat, costaware, strategies
from nasctl.optimizer.base import Candidate, RestoredTrial
from nasctl.optimizer.fused_kernel import (
    FUSED_EXTENSION,
    build_extension,
    prebuild_extension,
    use_prebuilt_extension,
)
from nasctl.optimizer.gpfit import FitCache
from nasctl.optimizer.methods import resolve_method
from nasctl.optimizer.novelty import METHOD as EXPLORE
from nasctl.optimizer.novelty import RepeatGuard
from nasctl.optimizer.quasirandom import (
    SOBOL_NODE,
    SobolStart,
    SpaceExhausted,
    set_sobol_position,
    sobol_generator_spec,
    sobol_position,
    sobol_trial_limit,
)
from nasctl.optimizer.quiet import first_import, library_calls, quietly
from nasctl.optimizer.strategies import build_strategy
from nasctl.spec import ChoiceParameter, ExperimentSpec, FloatParameter, IntParameter
from nasctl.types import ParamValue

__all__ = [
    "FUSED_EXTENSION", "AxOptimizer", "Candidate", "RestoredTrial", "ax_metric_names", "build_extension",
    "prebuild_extension", "use_prebuilt_extension",
]


def _limit_blas_threads() -> None:
    """One BLAS thread for scipy/numpy too (L-BFGS-B in every GP fit and
    acquisition optimisation). `OMP_NUM_THREADS=1` only works if set before
    numpy is imported; with other load on a 2-core machine a multi-threaded
    BLAS spin-waits, and a proposal took 4.0 s instead of 1.7 s."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def ax_metric_names(spec: ExperimentSpec) -> dict[str, str]:
    """Our metric names -> names safe inside Ax's objective/constraint strings."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in spec.metric_names:
        safe = re.sub(r"[^A-Za-z0-9_]", "_", name)
        if not safe[0].isalpha():
            safe = "m_" + safe
        base, k = safe, 1
        while safe in used:
            k += 1
            safe = f"{base}_{k}"
        used.add(safe)
        out[name] = safe
    return out


def _params(parameters: Mapping[str, Any], spec: ExperimentSpec | None = None) -> dict[str, ParamValue]:
    """An Ax arm's parameters (every tunable parameter has a value: no `None`); with
    `spec`, a float at one of its bounds up to rounding is that bound (`FloatParameter.at_bound`)."""
    out = dict(parameters)
    if spec is not None:
        for k, v in out.items():
            p = spec.search_space.get(k)
            if isinstance(p, FloatParameter) and isinstance(v, float):
                out[k] = p.at_bound(v)
    return out


class AxOptimizer:
    """Proposes candidates with Ax and learns from completed trials.

    Not thread-safe: exactly one thread (the candidate generator) may call it.

    Quasi-random fast path (`fast_start`, on by default): the Sobol trials are
    drawn by `quasirandom.SobolStart` (the points Ax's strategy would draw,
    without refitting an adapter per trial), and outcomes reported while the
    strategy is still quasi-random are kept and told to Ax, in the order they
    came, when something first needs Ax's data: the first proposal the fast
    path cannot make (the model's, or a Sobol draw past the point where Ax
    might move on), or any use of `client`. The model phase therefore starts
    from the same experiment, in the same state, as without the fast path.
    """

    def __init__(self, spec: ExperimentSpec, fast_start: bool = True) -> None:
        import torch

        with first_import("ax.api"):  # Ax logs at INFO while it is imported
            from ax.api import Client
        torch.set_num_threads(1)
        _limit_blas_threads()
        self.spec = spec
        self.names = ax_metric_names(spec)
        self._fast = fast_start  # the quasi-random fast path may still serve proposals
        self._sobol: SobolStart | None = None
        self._deferred: list[tuple[str, tuple[Any, ...]]] = []  # outcomes not yet told to Ax
        self._failed: set[int] = set()  # trials reported failed (Ax proposes their arms again)
        self._arms: dict[str, set[int]] = {}  # arm signature -> trials, for the fast path's deduplication
        self.fits = FitCache()  # warm starts for the GP fits of successive proposals
        self.guard = RepeatGuard(spec)  # no repeated proposals while nothing is feasible
        self.log_scale: tuple[str, ...] | None = None  # objectives the last model modelled on the log scale
        chosen = spec.optimizer.cost_aware
        self.cost_aware = (costaware.COST_AWARE if chosen is None else chosen) and \
            costaware.COST_METRIC not in self.names.values()
        self._spent = 0.0  # the costs told so far (`_cost_alpha`)
        objective = ", ".join(
            (self.names[n] if o.maximize else f"-{self.names[n]}") for n, o in spec.objectives.items()
        )
        constraints = []
        for n, o in spec.objectives.items():
            if o.threshold is not None:
                constraints.append(f"{self.names[n]} {'>=' if o.maximize else '<='} {o.threshold!r}")
        for c in spec.parsed_constraints:
            constraints.append(f"{self.names[c.metric]} {c.op} {c.bound!r}")
        self.choice = resolve_method(spec)
        # BoTorch's notices ("optimization failed, trying again with new initial conditions")
        # are handled inside Ax: not for the user's terminal
        with library_calls():
            self._client = Client(random_seed=spec.optimizer.seed)
            self._client.configure_experiment(parameters=self._parameter_configs(), name=spec.name)
            self._client.configure_optimization(objective=objective, outcome_constraints=constraints or None)
            if self.cost_aware:  # the model learns log(cost) beside the objectives (`costaware`)
                self._client.configure_tracking_metrics([costaware.COST_METRIC])
            # kept: the client gives its strategy back through private accessors only
            self._strategy = build_strategy(spec, self.choice.method, "cuda" if torch.cuda.is_available() else None)
            self._client.set_generation_strategy(self._strategy)

    def _parameter_configs(self) -> list[Any]:
        """The Ax parameter configs of the search space (subclasses may add their own)."""
        from ax.api.configs import ChoiceParameterConfig, RangeParameterConfig

        params: list[Any] = []
        for name, p in self.spec.tunable.items():
            if isinstance(p, (IntParameter, FloatParameter)):
                params.append(
                    RangeParameterConfig(
                        name=name,
                        bounds=(p.low, p.high),
                        parameter_type="int" if isinstance(p, IntParameter) else "float",
                        scaling="log" if p.log else "linear",
                    )
                )
            elif isinstance(p, ChoiceParameter):
                params.append(
                    ChoiceParameterConfig(
                        name=name,
                        values=list(p.values),  # type: ignore[arg-type] # one type, checked by the spec
                        parameter_type=p.value_type,  # type: ignore[arg-type]
                        is_ordered=p.ordered,
                    )
                )
        return params

    @property
    def client(self) -> Any:
        """The Ax `Client`, with every outcome reported so far told to it."""
        self._flush()
        return self._client

    @property
    def experiment(self) -> Any:
        """The client's Ax `Experiment`, with every outcome reported so far told to it."""
        return compat.client_experiment(self.client)

    @property
    def strategy(self) -> Any:
        """The client's Ax `GenerationStrategy` (see `strategies`)."""
        return self._strategy

    @quietly
    def _flush(self) -> None:
        """Tell Ax the outcomes kept back by the quasi-random fast path, in order."""
        deferred, self._deferred = self._deferred, []
        for kind, args in deferred:
            getattr(self, "_" + kind)(*args)

    def _defer(self, kind: str, *args: Any) -> bool:
        """Keep an outcome back while the fast path draws (True), or not (False)."""
        if not self._fast:
            return False
        self._deferred.append((kind, args))
        return True

    # --- learning -----------------------------------------------------------
    def _raw(self, values: Mapping[str, float]) -> dict[str, float]:
        return {self.names[n]: float(values[n]) for n in self.names if n in values and math.isfinite(values[n])}

    @quietly
    def complete(self, index: int, values: Mapping[str, float], cost: float | None = None) -> None:
        self.guard.observe(index, values)
        if cost is not None and math.isfinite(cost) and cost > 0:
            self._spent += cost
        else:
            cost = None
        if not self._defer("complete", index, dict(values), cost):
            self._complete(index, values, cost)

    def _complete(self, index: int, values: Mapping[str, float], cost: float | None = None) -> None:
        raw = self._raw(values)
        if self.cost_aware and cost is not None:
            raw[costaware.COST_METRIC] = math.log(self._model_cost(index, cost))
        self._client.complete_trial(index, raw_data=raw)

    def _model_cost(self, index: int, cost: float) -> float:
        """The cost the model learns for trial `index`, which cost `cost` (here: that cost)."""
        return cost

    def _cost_alpha(self, recorded: int) -> float | None:
        """The weight of the cost in the next proposal (`costaware.cooling`), None when
        proposals do not weigh cost; `recorded`: the trials recorded so far."""
        if not self.cost_aware:
            return None
        gpu_budget = self._gpu_budget_seconds()
        gpu_share = None if gpu_budget is None else self._spent / gpu_budget
        return costaware.cooling(recorded / self.spec.budget.max_trials, gpu_share)

    def _gpu_budget_seconds(self) -> float | None:
        """`budget.max_gpu_hours` in the unit of the costs told (device-seconds, summed in
        `_spent`), or None without that budget or where trials take no GPU."""
        budget = self.spec.budget
        if budget.max_gpu_hours is None or self.spec.trial.resources.gpu <= 0:
            return None
        return budget.max_gpu_hours * 3600.0

    @quietly
    def fail(self, index: int, reason: str | None = None) -> None:
        self._failed.add(index)
        if not self._defer("fail", index, reason):
            self._fail(index, reason)

    def _fail(self, index: int, reason: str | None = None) -> None:
        self._client.mark_trial_failed(index, failed_reason=reason)

    @quietly
    def abandon(self, index: int) -> None:
        if not self._defer("abandon", index):
            self._abandon(index)

    def _abandon(self, index: int) -> None:
        self._client.mark_trial_abandoned(index)

    @quietly
    def early_stop(self, index: int, values: Mapping[str, float] | None) -> None:
        """An early-stopped trial. `values` are the optimistic final values it was
        judged by (see nasctl/orchestration/early_stopping.py). When they cover
        every metric, the model learns them (Ax EARLY_STOPPED with that data):
        they say "at best this good, and still dominated" without the bias that
        partial, mid-training values would bring. Otherwise (an objective was
        not known yet) the trial is abandoned: the model learns nothing from it,
        and Ax does not propose it again."""
        raw = self._raw(values or {})
        if len(raw) == len(self.names):
            self.guard.observe(index, values or {})
        if not self._defer("early_stop", index, None if values is None else dict(values)):
            self._early_stop(index, values)

    def _early_stop(self, index: int, values: Mapping[str, float] | None) -> None:
        raw = self._raw(values or {})
        if len(raw) == len(self.names):
            self._client.attach_data(index, raw_data=raw)
            self._client.mark_trial_early_stopped(index)
        else:
            self._client.mark_trial_abandoned(index)

    @quietly
    def attach(self, parameters: Mapping[str, ParamValue]) -> int:
        """Add a trial proposed earlier (on resume); it stays pending until completed/failed."""
        tunable = {k: v for k, v in parameters.items() if k in self.spec.tunable}
        return int(self.client.attach_trial(parameters=tunable))

    @quietly
    def restore(self, trials: Sequence[RestoredTrial]) -> None:
        """Rebuild the engine from the store (call before anything else).

        Every trial is attached in index order with its outcome; CANDIDATE and
        RUNNING ones stay pending. The quasi-random generator is fast-forwarded
        past the points already drawn, so the resumed run draws exactly the
        quasi-random points an uninterrupted run would have drawn next, never
        the same points again. (Model-based proposals see the same data; their
        first GP fit after a resume starts cold, see `gpfit`.)
        """
        sobol_drawn = sum(1 for t in trials if t.method == "Sobol")
        self._flush()
        for node in self._strategy.nodes_by_name.values():
            for gspec in node.generator_specs:
                if gspec.generator_enum.value == "Sobol":
                    gspec.generator_kwargs = {**(gspec.generator_kwargs or {}), "init_position": sobol_drawn}
        for t in sorted(trials, key=lambda t: t.index):
            index = self.attach(t.parameters)
            if index != t.index:
                raise RuntimeError(f"rebuilt optimizer gave index {index} to stored trial {t.index}")
            if t.status == "COMPLETED":
                self.complete(t.index, t.values, t.cost)
            elif t.status == "FAILED":
                self.fail(t.index, "failed before resume")
            elif t.status == "EARLY_STOPPED":
                self.early_stop(t.index, t.stopped_values)
            elif t.status == "ABANDONED":
                self.abandon(t.index)
        if trials:
            # Ax advances at most one step (center -> Sobol) on the next proposal;
            # with the initial trials already done it must go on to the model now,
            # or a resumed run would draw one more quasi-random point than an
            # uninterrupted one.
            self._flush()
            compat.advance_strategy(self._strategy)

    # --- proposing ----------------------------------------------------------
    @quietly
    def generate(self, n: int) -> list[Candidate]:
        """Up to `n` new candidates (fewer when the strategy is between steps; none
        while the model waits for results of a quasi-random start that is spent,
        as after a failure before any result with `initial_trials` < `parallelism`).

        What `Client.get_next_trials` does, with one step between Ax's proposal
        and the trial it becomes: while no trial is feasible, a model-based
        proposal that repeats an earlier trial is replaced (see `novelty`).
        Quasi-random trials come from the fast path while it can draw them
        (see the class docstring); a request it can serve only in part gets
        fewer candidates, as one that Ax's strategy moves on in the middle of."""
        from ax.exceptions.core import DataRequiredError
        from ax.utils.common.random import with_rng_seed

        from nasctl.optimizer import logscale  # imports Ax: after __init__ has quietened it

        fast = self._fast_candidates(n)
        if fast:
            return fast
        experiment = self.experiment
        if len(self.spec.objectives) > 1 and len(experiment.trials) >= self.spec.initial_trials:
            use_prebuilt_extension()  # before BoTorch builds its first qLogNEHVI here
        gs = self._strategy
        if not experiment.trials and not strategies.START_WITHIN_REQUEST:
            n = min(n, self.spec.initial_trials)
        if n > 1 and experiment.trials:
            # Ax caps a request at what its current node may still make before it
            # moves on (`gen` moves on only afterwards): at the end of the
            # quasi-random start one, so the model's first batch would be one
            # candidate and the other free slots would wait for another proposal
            compat.advance_strategy(gs)
        # A first request starts at the center point. Where the "Sobol" node is the
        # strategy's last (`method: sobol`) Ax goes on to it within the same request
        # (elsewhere the request ends at the center): then only the center is Ax's
        # and the fast path draws the rest, the same points.
        center_only = self._fast and not experiment.trials and sobol_trial_limit(gs) is None
        # the client's seed (`Client(random_seed=...)`), as `Client.get_next_trials` seeds it
        try:
            alpha = self._cost_alpha(len(experiment.trials))
            with self.fits.active(), logscale.proposal(), costaware.weighting(alpha), \
                    with_rng_seed(seed=self.spec.optimizer.seed):
                runs = gs.gen(experiment=experiment, n=1, num_trials=1 if center_only else n,
                              fixed_features=self._fixed_features())
        except DataRequiredError:
            # the quasi-random start is spent and the model waits for more of its
            # results (`strategies.MIN_OBSERVED_RESULTS`): nothing to propose until then
            if not any(t.status.is_running for t in experiment.trials.values()):
                raise
            return []
        if any(compat.generation_node_name(run) == "MBM" for (run,) in runs):
            self.log_scale = self._fitted_log_scale()
        guarding = self.guard.active  # changes only when a trial completes
        earlier: list[dict[str, ParamValue]] = (
            [_params(arm.parameters) for t in experiment.trials.values() for arm in t.arms] if guarding else []
        )
        out = []
        for (run,) in runs:
            params = _params(run.arms[0].parameters)
            if (
                guarding
                and compat.generation_node_name(run) == "MBM"
                and self.guard.repeats(params, earlier)
            ):
                run = self._explore_run(earlier)
            run = self._trial_run(run)
            params = _params(run.arms[0].parameters)
            trial = experiment.new_trial(generator_run=run)
            trial.mark_running(no_runner_required=True)
            if guarding:
                earlier.append(params)
            out.append(Candidate(trial.index, _params(params, self.spec), self._method(trial.index)))
        if center_only and len(out) < n:
            out += self._fast_candidates(n - len(out))
        return out

    def _fixed_features(self) -> Any:
        """Parameter values held fixed while proposing (Ax `ObservationFeatures`), None for none."""
        return None

    def _trial_run(self, run: Any) -> Any:
        """The generator run a proposal becomes a trial as (the proposal itself here)."""
        return run

    def _fitted_log_scale(self) -> tuple[str, ...]:
        """The objectives that the model just fitted has on the log scale (`logscale`)."""
        from nasctl.optimizer import logscale  # imports Ax: after __init__ has quietened it

        self._flush()
        adapter = self._strategy.adapter  # the model of the last proposal
        logged = logscale.logged_metrics(adapter)
        return tuple(n for n, ax_name in self.names.items() if ax_name in logged)

    def _explore_run(self, earlier: Sequence[Mapping[str, ParamValue]]) -> Any:
        """A generator run holding the Sobol point farthest from every earlier
        trial (seeded by the experiment's seed and the trial's index)."""
        from ax.core.arm import Arm
        from ax.core.generator_run import GeneratorRun

        seed = (self.spec.optimizer.seed or 0) * 100_003 + len(earlier)
        params = self.guard.spread_point(earlier, seed=seed)
        return GeneratorRun(arms=[Arm(parameters=params)], generation_node_name=EXPLORE)

    # --- the quasi-random fast path ---------------------------------------
    def _fast_candidates(self, n: int) -> list[Candidate]:
        """Up to `n` Sobol candidates drawn by `SobolStart` (none once the
        strategy may move past its "Sobol" node: then the kept-back outcomes
        are told to Ax and every later proposal is Ax's own)."""
        from ax.core.arm import Arm
        from ax.core.generator_run import GeneratorRun

        if not self._fast:
            return []
        gs = self._strategy
        experiment = compat.client_experiment(self._client)  # not `experiment`: outcomes stay kept back
        if gs.current_node_name != SOBOL_NODE and experiment.trials:
            compat.advance_strategy(gs)  # as `gen` does first
        if gs.current_node_name != SOBOL_NODE:
            if self._sobol is not None or experiment.trials:
                self._hand_off()
            return []
        limit = sobol_trial_limit(gs)
        if self._sobol is None:
            gspec = sobol_generator_spec(gs)
            if gspec is None or limit == 0:
                self._hand_off()
                return []
            self._sobol = SobolStart(gspec, experiment, sobol_position(gs, gspec))
            self._arms = {}
            for t in experiment.trials.values():
                for arm in t.arms:
                    self._arms.setdefault(arm.signature, set()).add(t.index)
        sobol, arms, failed = self._sobol, self._arms, self._failed

        def taken(params: dict[str, Any]) -> bool:
            # Ax deduplicates against every arm but those of failed trials
            indices = arms.get(Arm(parameters=params).signature) or set()
            return bool(indices) and not (indices & failed)

        out: list[Candidate] = []
        while len(out) < n:
            if limit is not None and len(experiment.trials) >= limit:
                self._hand_off()
                break
            cap = self.spec.budget.max_trials if limit is None else min(limit, self.spec.budget.max_trials)
            try:
                params, position = sobol.draw(taken, chunk=max(n - len(out), cap - len(experiment.trials)))
            except SpaceExhausted:  # Ax's strategy says what happens now (a fallback, or its error)
                self._hand_off()
                break
            arm = Arm(parameters=params)
            run = GeneratorRun(arms=[arm], generation_node_name=SOBOL_NODE, generator_key=SOBOL_NODE,
                               generator_state_after_gen={"init_position": position})
            trial = experiment.new_trial(generator_run=run)
            trial.mark_running(no_runner_required=True)
            arms.setdefault(arm.signature, set()).add(trial.index)
            out.append(Candidate(trial.index, _params(params, self.spec), SOBOL_NODE))
        return out

    def _hand_off(self) -> None:
        """End the fast path: Ax's "Sobol" node goes on from where it stopped
        (as `restore` sets it) and learns the outcomes kept back, in order."""
        self._fast = False
        if self._sobol is not None:
            set_sobol_position(self._strategy, self._sobol.position)
            self._sobol = None
        self._flush()

    def _method(self, index: int) -> str:
        trial = compat.client_experiment(self._client).trials[index]
        runs = getattr(trial, "generator_runs", [])
        if runs:
            name = compat.generation_node_name(runs[0]) or compat.generator_key(runs[0])
            if name:
                return name
        return "unknown"
