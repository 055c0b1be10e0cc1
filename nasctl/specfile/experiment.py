"""The experiment spec: budget, runner, optimizer, early stopping, and the
`ExperimentSpec` that holds them with the search space, objectives and trial."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from nasctl.specfile.parameters import (
    PARAM_RE,
    ChoiceParameter,
    Constraint,
    FixedParameter,
    FloatParameter,
    IntParameter,
    Objective,
    Parameter,
    Scalar,
    _finite,
    _Model,
    parse_constraint,
)
from nasctl.specfile.trial import TrialSpec

MAX_PARAMETERS = 200

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
METRIC_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]{0,127}$")


class Budget(_Model):
    max_trials: int = Field(ge=1, le=100_000)
    parallelism: int = Field(default=1, ge=1, le=1_000)
    trial_timeout: float | None = Field(default=None, gt=0, description="seconds")
    max_failures: int = Field(default=5, ge=0)
    # stop once this many trials in a row failed the same way while none has
    # completed (a misconfiguration, not bad luck); 0: never (a flaky script)
    fail_fast: int = Field(default=3, ge=0, le=100_000)
    # with optimizer.fidelity: the total fidelity (epochs, say) all trials may
    # train; a promotion counts what it adds to the trial it continues
    max_fidelity: float | None = Field(default=None, gt=0)
    # device-hours (GPUs held x running time, every attempt counted): once spent, no
    # new trial starts and the experiment ends when the running ones have
    max_gpu_hours: float | None = Field(default=None, gt=0)


class RunnerSpec(_Model):
    scheduler: str = "local_cwd"
    cfg: dict[str, Any] = Field(default_factory=dict)


class FidelitySpec(_Model):
    """`optimizer.fidelity:` multi-fidelity search (nasctl/optimizer/promotion.py).

    Every new configuration trains to `min` of `parameter` (epochs, say); the
    promising ones are promoted rung by rung, `eta` times more each time, up to
    `max`. `front` says which results the Pareto front and hypervolume use:
    `top` (default) only those trained to `max`, `all` every completed trial.
    """

    parameter: str = "epochs"
    min: int | float = Field(gt=0)
    max: int | float = Field(gt=0)
    eta: int = 3
    front: Literal["top", "all"] = "top"
    # `eager`: a rung with fewer than eta results promotes its best; `strict`: it
    # waits for eta results (classic ASHA). See nasctl/optimizer/promotion.py.
    promotion: Literal["eager", "strict"] = "eager"
    # how a rung's trials are ranked for promotion: `rung`, by the values they
    # reached there; `model`, by the model's prediction of them at the top rung
    rank: Literal["rung", "model"] = "rung"
    # how many of the lowest rungs a new configuration may start at (asynchronous
    # Hyperband's brackets); None: nasctl's default (`multifidelity.BRACKETS`)
    brackets: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check(self) -> FidelitySpec:
        _finite(self.min, "min")
        _finite(self.max, "max")
        if not self.min < self.max:
            raise ValueError(f"min ({self.min}) must be below max ({self.max})")
        if self.eta < 2:
            raise ValueError(f"eta ({self.eta}) must be >= 2 (each rung trains eta times longer)")
        rungs = self.rungs
        if len(rungs) < 2:
            raise ValueError(f"min ({self.min}) to max ({self.max}) with eta {self.eta} gives a single rung; "
                             "lower min or raise max")
        if self.brackets is not None and self.brackets > len(rungs):
            raise ValueError(f"brackets ({self.brackets}) must be at most the number of rungs ({len(rungs)}: "
                             f"{', '.join(f'{r:g}' for r in rungs)})")
        return self

    @property
    def integer(self) -> bool:
        return isinstance(self.min, int) and isinstance(self.max, int)

    @property
    def rungs(self) -> tuple[float, ...]:
        """The fidelities trials train to: min * eta**k below max, then max itself
        (rounded down for integer fidelities; equal values merged)."""
        out: list[float] = []
        k = 0
        while True:
            v = self.min * self.eta**k
            if self.integer:
                v = int(v)
            if v >= self.max:
                break
            if not out or v > out[-1]:
                out.append(v)
            k += 1
        out.append(self.max)
        return tuple(out)

    def rung_of(self, value: float) -> int | None:
        """The rung a fidelity value belongs to, None for a value that is no rung."""
        for k, r in enumerate(self.rungs):
            if math.isclose(float(value), float(r), rel_tol=1e-9):
                return k
        return None

    def in_front(self, value: Any) -> bool:
        """Whether a completed trial at fidelity `value` counts for the Pareto front."""
        if self.front == "all":
            return True
        try:
            return value is not None and math.isclose(float(value), float(self.max), rel_tol=1e-9)
        except (TypeError, ValueError):
            return False


class OptimizerSpec(_Model):
    initial_trials: int | None = Field(default=None, ge=1)
    method: Literal["auto", "botorch", "categorical", "saasbo", "sobol"] = "auto"
    seed: int | None = 0
    fidelity: FidelitySpec | None = None
    cost_aware: bool | None = Field(default=None, description="rank new configurations by expected improvement "
                                    "per unit of training cost, cooled over the budget (default: nasctl's)")


DEFAULT_INITIAL_TRIALS = 5
"""Quasi-random trials before the model, unless the spec or the parallelism asks for more."""

REDUCED_PRECISIONS = frozenset({"bf16", "fp16", "bfloat16", "float16", "half", "bf16-mixed", "16-mixed"})


class EarlyStoppingSpec(_Model):
    """`early_stopping:` stop running trials whose learning curve shows they cannot
    reach the Pareto front (the rule is in nasctl/orchestration/early_stopping.py).

    Progress is measured in `progress` units: `points` counts the distinct steps at
    which the watched metric was logged (epochs, for a metric validated once per
    epoch; comparable across batch sizes), `steps` uses the logged step itself.
    """

    metric: str | None = Field(default=None, description="objective whose curve is watched; default: the first "
                               "objective that completed trials logged at several steps")
    progress: Literal["points", "steps"] = "points"
    min_progress: int = Field(default=2, ge=0, description="no decision before this much progress")
    min_fraction: float = Field(default=0.25, ge=0.0, le=1.0,
                                description="no decision before this fraction of the expected final progress")
    min_completed: int = Field(default=3, ge=1, description="completed trials with a curve needed to decide")
    margin: float = Field(default=0.0, ge=0.0, description="added to the optimistic projection, in metric units")
    length_parameter: str | None = Field(default="epochs",
                                         description="parameter holding a trial's final progress (points only)")
    precision_parameter: str = "precision"
    reduced_precision_grace: float = Field(default=2.0, ge=1.0, le=100.0,
                                           description="minimum progress multiplier for bf16/fp16 trials")

    @field_validator("margin")
    @classmethod
    def _check_margin(cls, v: float) -> float:
        return _finite(v, "margin")


class ExperimentSpec(_Model):
    """A validated experiment spec. Build it with `load_spec` or `parse_spec`."""

    name: str
    search_space: dict[str, Parameter]
    objectives: dict[str, Objective] = Field(min_length=1, max_length=8)
    constraints: list[str] = Field(default_factory=list)
    budget: Budget
    trial: TrialSpec
    runner: RunnerSpec = Field(default_factory=RunnerSpec)
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    early_stopping: EarlyStoppingSpec | None = None

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(
                f"name {v!r} must be 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit"
            )
        return v

    @field_validator("search_space")
    @classmethod
    def _check_space(cls, v: dict[str, Any]) -> dict[str, Any]:
        if len(v) > MAX_PARAMETERS:
            raise ValueError(f"at most {MAX_PARAMETERS} parameters are allowed, got {len(v)}")
        for key in v:
            if not PARAM_RE.match(key):
                raise ValueError(f"parameter name {key!r} must match {PARAM_RE.pattern} (it becomes --{key})")
        if not any(not isinstance(p, FixedParameter) for p in v.values()):
            raise ValueError("needs at least one parameter that is not fixed")
        return v

    @field_validator("objectives")
    @classmethod
    def _check_objectives(cls, v: dict[str, Objective]) -> dict[str, Objective]:
        for key in v:
            if not METRIC_RE.match(key):
                raise ValueError(f"metric name {key!r} must match {METRIC_RE.pattern}")
        return v

    @field_validator("constraints")
    @classmethod
    def _check_constraints(cls, v: list[str]) -> list[str]:
        for text in v:
            parse_constraint(text)
        return v

    @field_validator("early_stopping", mode="before")
    @classmethod
    def _early_stopping_mapping(cls, v: Any) -> Any:
        if v is not None and not isinstance(v, dict):
            raise ValueError("must be null or a mapping such as {metric: val_acc, min_completed: 3}")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> ExperimentSpec:
        params = self.search_space
        for name, p in params.items():
            if p.when:
                (parent, values), = p.when.items()
                if parent not in params:
                    raise ValueError(f"search_space.{name}.when names unknown parameter {parent!r}")
                if parent == name:
                    raise ValueError(f"search_space.{name}.when cannot name itself")
                pp = params[parent]
                if not isinstance(pp, (ChoiceParameter, IntParameter, FixedParameter)):
                    raise ValueError(
                        f"search_space.{name}.when: parent {parent!r} must be a choice, int or fixed parameter"
                    )
                if pp.when:
                    raise ValueError(f"search_space.{name}.when: parent {parent!r} is itself conditional")
        for text in self.constraints:
            c = parse_constraint(text)
            if c.metric in self.objectives:
                raise ValueError(
                    f"constraint {text!r} is on objective {c.metric!r}: use objectives.{c.metric}.threshold instead"
                )
        es = self.early_stopping
        if es is not None and es.metric is not None and es.metric not in self.objectives:
            raise ValueError(
                f"early_stopping.metric {es.metric!r} is not an objective; use one of {sorted(self.objectives)}"
            )
        overlap = set(self.trial.args) & set(params)
        if overlap:
            raise ValueError(f"trial.args repeats search_space parameters {sorted(overlap)}")
        fid = self.optimizer.fidelity
        if fid is not None:
            if fid.parameter in params:
                raise ValueError(f"optimizer.fidelity.parameter {fid.parameter!r} is also in search_space; "
                                 "remove it there (nasctl sets it per rung)")
            if fid.parameter in self.trial.args:
                raise ValueError(f"optimizer.fidelity.parameter {fid.parameter!r} is also in trial.args; "
                                 "remove it there (nasctl sets it per rung)")
            if not PARAM_RE.match(fid.parameter):
                raise ValueError(f"optimizer.fidelity.parameter {fid.parameter!r} must match {PARAM_RE.pattern}")
            if self.early_stopping is not None:
                raise ValueError("early_stopping and optimizer.fidelity cannot be combined (promotion already "
                                 "stops weak trials at each rung); remove one of them")
        budget = self.budget.max_fidelity
        if budget is not None:
            _finite(budget, "budget.max_fidelity")
            if fid is None:
                raise ValueError("budget.max_fidelity needs optimizer.fidelity (it counts the fidelity trials "
                                 "train to); add optimizer.fidelity or remove budget.max_fidelity")
            if budget < fid.max:
                raise ValueError(f"budget.max_fidelity ({budget:g}) is below optimizer.fidelity.max ({fid.max:g}), "
                                 "so no trial could reach the top rung; raise it")
        return self

    # --- derived views -------------------------------------------------
    @property
    def parsed_constraints(self) -> list[Constraint]:
        return [parse_constraint(c) for c in self.constraints]

    @property
    def tunable(self) -> dict[str, IntParameter | FloatParameter | ChoiceParameter]:
        """Parameters the optimizer chooses (everything but `fixed`)."""
        return {k: p for k, p in self.search_space.items() if not isinstance(p, FixedParameter)}

    @property
    def fixed(self) -> dict[str, Scalar]:
        return {k: p.value for k, p in self.search_space.items() if isinstance(p, FixedParameter)}

    @property
    def metric_names(self) -> list[str]:
        """Metrics every completed trial must report: objectives, then constrained metrics."""
        names = list(self.objectives)
        for c in self.parsed_constraints:
            if c.metric not in names:
                names.append(c.metric)
        return names

    @property
    def initial_trials(self) -> int:
        """Quasi-random trials before the model takes over, never more than the budget.

        Default: 5 (Ax's own default), or `parallelism` when more trials than
        that start together (they start before anything is observed). The
        earlier default of 2 per tunable parameter (5..16) left a 20-trial
        budget with only 4 model-based trials on 8 parameters; measured over
        10 seeds, 5 gave a higher mean hypervolume at 20 trials on every
        benchmark problem with more than 2 parameters, and at 30 on all but
        NAS-Bench-201 3-obj (docs/benchmarks.md).
        """
        if self.optimizer.initial_trials is not None:
            return min(self.optimizer.initial_trials, self.budget.max_trials)
        return min(self.budget.max_trials, max(DEFAULT_INITIAL_TRIALS, self.budget.parallelism))

    def active_parameters(self, params: dict[str, Scalar]) -> dict[str, Scalar]:
        """Drop conditional parameters whose parent value does not activate them.
        The fidelity parameter (`optimizer.fidelity`), when given, is kept."""
        out: dict[str, Scalar] = {}
        full = {**self.fixed, **params}
        for name, p in self.search_space.items():
            if name not in full:
                continue
            if p.when:
                (parent, values), = p.when.items()
                if full.get(parent) not in values:
                    continue
            out[name] = full[name]
        fid = self.optimizer.fidelity
        if fid is not None and fid.parameter in params:
            out[fid.parameter] = params[fid.parameter]
        return out

