"""Experiment spec: YAML -> validated, immutable objects (pydantic).

The keys documented in docs/spec.md are the public format. Every validation
error is reported on one line naming the field path and what is allowed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from nasctl.errors import BadInputError, SpecError
from nasctl.types import FailureClass

MAX_SPEC_BYTES = 1_000_000
MAX_PARAMETERS = 200
MAX_CHOICES = 1_000

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
PARAM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
METRIC_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]{0,127}$")
CONSTRAINT_RE = re.compile(
    r"^\s*(?P<metric>[A-Za-z_][A-Za-z0-9_./-]*)\s*(?P<op><=|>=)\s*(?P<bound>[-+0-9.eE]+)\s*$"
)

Scalar = Union[bool, int, float, str]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _finite(v: float, what: str) -> float:
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{what} must be a finite number, got {v}")
    return v


class _Conditional(_Model):
    """`when: {parent: [values...]}`: the parameter exists only for those parent values."""

    when: dict[str, list[Scalar]] | None = None

    @field_validator("when")
    @classmethod
    def _check_when(cls, v: dict[str, list[Scalar]] | None) -> dict[str, list[Scalar]] | None:
        if v is not None:
            if len(v) != 1:
                raise ValueError("when must name exactly one parent parameter")
            for values in v.values():
                if not values:
                    raise ValueError("when lists no parent values")
        return v


#: Where a spec error sends the user: the reference of every key.
SPEC_DOCS_HINT = "see the spec format in docs/spec.md"

#: A proposed float this close to a bound (relative) is the bound: rounding from the log scale.
BOUND_ROUNDING = 1e-9


def _check_range(low: float, high: float, log: bool) -> None:
    _finite(low, "low")
    _finite(high, "high")
    if low >= high:
        raise ValueError(f"low ({low}) must be below high ({high})")
    if log and low <= 0:
        raise ValueError(f"log scale needs low > 0, got {low}")


class IntParameter(_Conditional):
    type: Literal["int"]
    low: int
    high: int
    log: bool = False

    @model_validator(mode="after")
    def _check(self) -> IntParameter:
        _check_range(self.low, self.high, self.log)
        return self


class FloatParameter(_Conditional):
    type: Literal["float"]
    low: float
    high: float
    log: bool = False

    @model_validator(mode="after")
    def _check(self) -> FloatParameter:
        _check_range(self.low, self.high, self.log)
        return self

    def at_bound(self, v: float) -> float:
        """`v`, or the bound it lies beyond or within rounding of (relative `BOUND_ROUNDING`).

        An optimizer that models a log-scaled parameter proposes its upper bound
        as 10 ** log10(high), which for `high: 3.0e-2` is 0.029999999999999995:
        the trial's arguments, records and exports should say 0.03.
        """
        for bound in (self.low, self.high):
            if abs(v - bound) <= BOUND_ROUNDING * max(abs(bound), 1e-300):
                return bound
        return min(max(v, self.low), self.high)


class ChoiceParameter(_Conditional):
    type: Literal["choice"]
    values: list[Scalar] = Field(min_length=2, max_length=MAX_CHOICES)
    ordered: bool = False

    @field_validator("values")
    @classmethod
    def _check_values(cls, v: list[Scalar]) -> list[Scalar]:
        kinds = {_kind(x) for x in v}
        if len(kinds) > 1:
            raise ValueError(f"values must all be of one type, got {sorted(kinds)}")
        for x in v:
            if isinstance(x, float):
                _finite(x, "a choice value")
        if len({repr(x) for x in v}) != len(v):
            raise ValueError("values must be distinct")
        return v

    @property
    def value_type(self) -> str:
        return _kind(self.values[0])


class FixedParameter(_Conditional):
    type: Literal["fixed"]
    value: Scalar


def _kind(x: Scalar) -> str:
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "int"
    if isinstance(x, float):
        return "float"
    return "str"


Parameter = Annotated[
    Union[IntParameter, FloatParameter, ChoiceParameter, FixedParameter],
    Field(discriminator="type"),
]


class Objective(_Model):
    """An objective: its direction, its threshold (reference point) and how its
    value is read from the logged curve (`last` logged value or `best`)."""

    goal: Literal["maximize", "minimize"]
    threshold: float | None = None
    value: Literal["last", "best"] = "last"

    @field_validator("threshold")
    @classmethod
    def _check_threshold(cls, v: float | None) -> float | None:
        return None if v is None else _finite(v, "threshold")

    @property
    def maximize(self) -> bool:
        return self.goal == "maximize"


class Constraint(_Model):
    """An outcome constraint `metric <= bound` or `metric >= bound`."""

    metric: str
    op: Literal["<=", ">="]
    bound: float

    def satisfied(self, value: float) -> bool:
        return value <= self.bound if self.op == "<=" else value >= self.bound

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.bound:g}"


def parse_constraint(text: str) -> Constraint:
    m = CONSTRAINT_RE.match(text)
    if not m:
        raise ValueError(f"constraint {text!r} must look like 'metric <= number' or 'metric >= number'")
    try:
        bound = float(m.group("bound"))
    except ValueError:
        raise ValueError(f"constraint {text!r} has a bound that is not a number") from None
    _finite(bound, f"the bound of {text!r}")
    return Constraint(metric=m.group("metric"), op=m.group("op"), bound=bound)  # type: ignore[arg-type]


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


class Resources(_Model):
    cpu: int = Field(default=1, ge=1, le=1024)
    mem_mb: int = Field(default=2000, ge=64)
    gpu: int = Field(default=0, ge=0, le=64)


_MODULE = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
MODULE_RE = re.compile(f"^{_MODULE}$")  # pkg.module
TARGET_RE = re.compile(f"^{_MODULE}:[A-Za-z_][A-Za-z0-9_]*$")  # pkg.module:name

SOURCE_OPTIONS = frozenset({"model_path", "dataset", "preload"})
"""Keys of `trial:` that only some trial sources take."""


@dataclass(frozen=True)
class SourceKey:
    """What the spec file says about one trial source (`trial.<key>`): its part of
    the YAML's shape and of its paths. How the source runs is its class in
    nasctl/sources/ (tests/unit/test_source_contract.py checks that both name
    the same keys).

    Attributes:
        description: what the value is, for the spec's messages.
        options: the keys of `SOURCE_OPTIONS` it takes; the others are refused.
        target: for a `pkg.module:name` value, how its message writes that shape.
        needs: options it cannot do without, with the values they take.
        resolve: the `TrialSpec` fields to replace when the spec is a file in a
            folder (relative paths made absolute, where code is looked up), after
            checking on disk, without importing user code, that they exist.
            Resolving a resolved trial changes nothing. Raises `SpecError`.
    """

    description: str
    options: frozenset[str] = frozenset()
    target: str | None = None
    needs: tuple[tuple[str, str], ...] = ()
    resolve: Callable[[TrialSpec, Path], dict[str, Any]] | None = None


MAX_RETRIES_LIMIT = 100
"""More retries than this is a mistake, not a policy."""
RETRYABLE = tuple(c.value for c in FailureClass if c not in (FailureClass.USER, FailureClass.UNSCHEDULABLE))
"""Failure classes `trial.retry_on` may list: not the trial's own code, and not a job the
scheduler can never run (a retry would wait for the same reason)."""


class TrialSpec(_Model):
    """What each trial runs: exactly one trial source (a key of `SOURCE_KEYS`),
    plus fixed arguments and resources. `code_dir` is set by `load_spec` to the
    spec file's folder, where `function` modules and component files are looked up."""

    search_space: str | None = None
    script: str | None = None
    model: str | None = None
    model_path: str | None = None
    dataset: str | None = None
    function: str | None = None
    component: str | None = None
    args: dict[str, Scalar] = Field(default_factory=dict)
    resources: Resources = Field(default_factory=Resources)
    preload: list[str] | Literal[False] | None = Field(
        default=None,
        description="modules imported once by a warm server that forks each local trial "
                    "(nasctl/runners/warm.py); default: the built-in trainer's own for "
                    "trial.search_space and trial.model, none for a script; false: always start cold",
    )
    code_dir: str | None = None
    max_retries: int = Field(
        default=2, ge=0, le=MAX_RETRIES_LIMIT,
        description="how many times an attempt that ends in a class of retry_on runs again as the same trial",
    )
    retry_on: list[str] = Field(
        default_factory=lambda: [FailureClass.INFRASTRUCTURE.value],
        description="the failure classes that are retried: infrastructure, timeout, cancelled (never user)",
    )

    @field_validator("retry_on")
    @classmethod
    def _check_retry_on(cls, v: list[str]) -> list[str]:
        for name in v:
            if name == FailureClass.USER.value:
                raise ValueError("user failures (the trial's own code) are never retried; "
                                 f"use any of {', '.join(RETRYABLE)}")
            if name not in RETRYABLE:
                raise ValueError(f"unknown failure class {name!r}; use any of {', '.join(RETRYABLE)}")
        return list(dict.fromkeys(v))

    @property
    def source(self) -> str:
        """The key of the trial source that is set (see `SOURCE_KEYS`)."""
        return next(k for k in SOURCE_KEYS if getattr(self, k))

    @model_validator(mode="after")
    def _one_source(self) -> TrialSpec:
        given = [k for k in SOURCE_KEYS if getattr(self, k)]
        if len(given) != 1:
            options = " or ".join(f"trial.{k} ({s.description})" for k, s in SOURCE_KEYS.items())
            raise ValueError(f"set exactly one of {options}; got {given or 'none'}")
        key = given[0]
        source = SOURCE_KEYS[key]
        value = getattr(self, key)
        if source.target is not None and not TARGET_RE.match(value):
            raise ValueError(f"trial.{key} {value!r} must look like {source.target}")
        for option, values in source.needs:
            if not getattr(self, option):
                raise ValueError(f"trial.{key} needs trial.{option} ({values})")
        if self.model_path is not None and "model_path" not in source.options:
            raise ValueError(f"trial.model_path applies only with {_sources_taking('model_path')}")
        if self.dataset is not None and "dataset" not in source.options:
            raise ValueError(f"trial.dataset applies to the built-in trainer, not to trial.{key}")
        if self.dataset is not None and "dataset" in self.args:
            raise ValueError("set the dataset once: trial.dataset or trial.args.dataset, not both")
        for name in self.args:
            if not PARAM_RE.match(name):
                raise ValueError(f"argument name {name!r} must match {PARAM_RE.pattern}")
        for module in self.preload or []:
            if not MODULE_RE.match(module):
                raise ValueError(f"trial.preload entry {module!r} is not a module name like torch or pkg.module")
        if self.preload and "preload" not in source.options:
            raise ValueError(f"trial.preload applies to {_sources_taking('preload')}, not to trial.{key}")
        return self


def _sources_taking(option: str) -> str:
    """The sources that take a `trial:` option, as `trial.a, trial.b and trial.c`."""
    keys = [f"trial.{k}" for k, s in SOURCE_KEYS.items() if option in s.options]
    return " and ".join(filter(None, [", ".join(keys[:-1]), keys[-1]]))


def _resolve_script(trial: TrialSpec, folder: Path) -> dict[str, Any]:
    assert trial.script is not None
    script = Path(trial.script)
    if not script.is_absolute():
        script = (folder / script).resolve()
    if not script.is_file():
        raise SpecError(f"trial.script {trial.script} does not exist (looked at {script})", "fix the path")
    return {"script": str(script)}


def _resolve_dataset(trial: TrialSpec, folder: Path) -> dict[str, Any]:
    """An `idx:` dataset's folder relative to the spec becomes absolute."""
    if trial.dataset and trial.dataset.startswith("idx:"):
        d = Path(trial.dataset[4:]).expanduser()
        return {"dataset": "idx:" + str(d if d.is_absolute() else (folder / d).resolve())}
    return {}


def _resolve_model(trial: TrialSpec, folder: Path) -> dict[str, Any]:
    assert trial.model is not None
    where = (folder / (trial.model_path or ".")).resolve()
    check_model_target(trial.model, where)
    return {"model_path": str(where), **_resolve_dataset(trial, folder)}


def _resolve_function(trial: TrialSpec, folder: Path) -> dict[str, Any]:
    assert trial.function is not None
    code_dir = str(folder.resolve())
    _check_importable(trial.function.partition(":")[0], code_dir, "trial.function")
    return {"code_dir": code_dir}


def _code_dir(trial: TrialSpec, folder: Path) -> dict[str, Any]:
    return {"code_dir": str(folder.resolve())}


_TRAINER_OPTIONS = frozenset({"dataset", "preload"})  # the built-in trainer's

SOURCE_KEYS: dict[str, SourceKey] = {
    "search_space": SourceKey("a built-in such as mlp_digits or cnn", _TRAINER_OPTIONS, resolve=_resolve_dataset),
    "script": SourceKey("a training script", frozenset({"preload"}), resolve=_resolve_script),
    "model": SourceKey('"pkg.module:build", a user model for the built-in trainer', _TRAINER_OPTIONS | {"model_path"},
                       target="pkg.module:function",
                       needs=(("dataset", "digits, mnist1d, mnist or idx:/path/to/dir"),), resolve=_resolve_model),
    "function": SourceKey("a Python function pkg.module:fn", target="'package.module:function'",
                          resolve=_resolve_function),
    "component": SourceKey("a TorchX component such as utils.python or file.py:fn", resolve=_code_dir),
}
"""The trial sources by key, in the order messages list them. A new source
adds its key here (and a field of `TrialSpec`) and its class to nasctl/sources/."""


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


_UNION_MEMBERS = frozenset({"int", "float", "choice", "fixed"})
"""Names pydantic adds to an error's location for the union it went into: a
parameter's `type` tag, or the int and float members of a scalar."""


def _error_path(loc: tuple[int | str, ...], data: Any) -> str:
    """An error location as the spec's key path (`search_space.lr.high`).

    pydantic inserts the union member it validated against into the location
    (`search_space.lr.float.high`). Such a name is dropped only where the spec
    has no key of that name, so a parameter or objective called `int` or
    `float` stays in the path."""
    keys: list[str] = []
    node = data
    for x in loc:
        if isinstance(node, dict) and x in node:
            node = node[x]
        elif isinstance(node, list) and isinstance(x, int) and 0 <= x < len(node):
            node = node[x]
        elif str(x).startswith(("function-", "tagged-union")) or x in _UNION_MEMBERS:
            continue
        else:
            node = None
        keys.append(str(x))
    return ".".join(keys)


def _one_line_errors(e: ValidationError, source: str, data: Any) -> str:
    """The first errors of a validation of `data`, on one line."""
    parts = []
    for err in e.errors()[:5]:
        loc = _error_path(err["loc"], data)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling)"  # the error's hint names docs/spec.md
        elif err["type"] == "union_tag_invalid":
            msg = "type must be one of int, float, choice, fixed"
        elif err["type"] == "union_tag_not_found":
            msg = "missing 'type' (one of int, float, choice, fixed)"
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = len(e.errors()) - len(parts)
    tail = f" (and {more} more)" if more > 0 else ""
    return f"invalid spec {source}: " + "; ".join(parts) + tail


class _NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no type hints
    """Safe YAML without anchors/aliases: rules out "billion laughs" expansion."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise SpecError(
                f"YAML aliases are not allowed in specs (line {event.start_mark.line + 1})",
                "write the values out in full",
            )
        return super().compose_node(parent, index)


def parse_spec(text: str, source: str = "<spec>", overrides: dict[str, Any] | None = None) -> ExperimentSpec:
    """Parse YAML text into an `ExperimentSpec`.

    Raises:
        SpecError: the YAML is malformed or the spec is invalid; the message is one line.
    """
    if len(text.encode("utf-8", "replace")) > MAX_SPEC_BYTES:
        raise SpecError(f"spec {source} is larger than {MAX_SPEC_BYTES} bytes", "a spec is a small YAML file")
    try:
        data = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"spec {source} is not valid YAML{where}: {problem}", "fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise SpecError(
            f"spec {source} must be a YAML mapping with keys name, search_space, objectives, budget, trial",
            "see examples/digits_mlp.yaml",
        )
    if overrides:
        data = {**data, **overrides}
    return _validate(data, source)


def _validate(data: dict[str, Any], source: str) -> ExperimentSpec:
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(_one_line_errors(e, source, data), SPEC_DOCS_HINT) from None


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentSpec:
    """Read and validate a spec file. A relative `trial.script`, `trial.model_path`
    or `idx:` dataset is resolved against the spec's folder; `trial.model`'s module
    is looked up there (default `model_path`) without being imported."""
    p = Path(path)
    return parse_spec_in(read_spec_text(p), p.parent, source=str(path), overrides=overrides)


def read_spec_text(path: str | Path) -> str:
    """A spec file's text.

    Raises:
        SpecError: it does not exist or is not readable UTF-8.
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"spec file {path} does not exist", "check the path") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"spec file {path} cannot be read: {e}", "pass a UTF-8 YAML file") from None


def parse_spec_in(text: str, folder: str | Path, source: str = "<spec>",
                  overrides: dict[str, Any] | None = None) -> ExperimentSpec:
    """Parse a spec's YAML text as if it were a file in `folder`: relative paths
    (`trial.script`, `trial.model_path`, `idx:` datasets) resolve there, and
    `trial.function` / `trial.component` code is looked up there. What `nasctl
    serve` does with a submitted spec, on its own file system.

    Raises:
        SpecError: invalid YAML or spec, or a path that does not exist.
    """
    return _resolve_in(parse_spec(text, source=source, overrides=overrides), Path(folder))


def _resolve_in(spec: ExperimentSpec, folder: Path) -> ExperimentSpec:
    """The spec as a file in `folder`: its trial source's paths resolved there (`SourceKey.resolve`)."""
    trial = spec.trial
    resolve = SOURCE_KEYS[trial.source].resolve
    update = resolve(trial, folder) if resolve is not None else {}
    if update:
        spec = spec.model_copy(update={"trial": trial.model_copy(update=update)})
    return spec


def _check_importable(module: str, code_dir: str, key: str) -> None:
    """The module can be found (next to the spec or on sys.path) without importing it."""
    import importlib.util
    import sys

    sys.path.insert(0, code_dir)
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    finally:
        sys.path.remove(code_dir)
    if found is None:
        raise SpecError(f"{key}: module {module!r} was not found next to the spec ({code_dir}) or on PYTHONPATH",
                        "check the module name, or install the package that provides it")


def check_model_target(target: str, folder: Path) -> None:
    """Check that `pkg.module:function` exists under `folder` (or on sys.path)
    without importing it (importing would pull torch into the CLI): the module
    file is found and parsed, and must define or import `function` at top level.

    Raises:
        SpecError: the module file or the function is missing, or the file does not parse.
    """
    import ast
    import sys

    module, _, func = target.partition(":")
    rel = Path(*module.split("."))
    bases = [folder, *(Path(x) for x in sys.path if x)]
    candidates = [c for base in bases for c in (base / rel.with_suffix(".py"), base / rel / "__init__.py")]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise SpecError(
            f"trial.model {target!r}: module {module} not found (looked for {rel}.py in {folder})",
            "put the module next to the spec or set trial.model_path to its folder",
        )
    try:
        tree = ast.parse(found.read_text(encoding="utf-8"), filename=str(found))
    except (SyntaxError, UnicodeDecodeError, OSError) as e:
        raise SpecError(f"trial.model {target!r}: {found} cannot be parsed: {e}", "fix the module") from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    if func not in names:
        raise SpecError(f"trial.model {target!r}: {found} defines no {func}()", f"define def {func}(params) there")


BUDGET_OVERRIDES = ("max_trials", "parallelism", "trial_timeout", "max_failures", "max_gpu_hours")
"""Overrides that set `budget.<key>` (`nasctl run --max-trials`, `nasctl.run(parallelism=4)`)."""

SPEC_OVERRIDES = ("search_space", "objectives", "constraints", "budget", "trial", "runner", "optimizer",
                  "early_stopping")
"""Overrides that set a top-level spec key: a mapping is merged into the spec's
(`optimizer={"seed": 3}` keeps the other optimizer settings), anything else replaces it."""


def spec_changes(name: str | None = None, **overrides: Any) -> dict[str, Any]:
    """Overrides by name, as changes to the spec's keys for `apply_overrides`:
    `name` sets the experiment's name, a key of `BUDGET_OVERRIDES` sets
    `budget.<key>`, a key of `SPEC_OVERRIDES` that top-level key.

    Raises:
        BadInputError: an override that is neither.
    """
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if key in BUDGET_OVERRIDES:
            changes.setdefault("budget", {})[key] = value
        elif key in SPEC_OVERRIDES:
            changes[key] = merge_changes(changes[key], value) if isinstance(changes.get(key), dict) else value
        else:
            raise BadInputError(
                f"unknown override {key}={value!r}",
                f"pass one of {', '.join(BUDGET_OVERRIDES)} (budget) or a spec key: {', '.join(SPEC_OVERRIDES)}",
            )
    if name is not None:
        changes["name"] = name
    return changes


def merge_changes(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `changes` applied: mappings merged key by key, anything else replaced."""
    out = dict(base)
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_changes(out[key], value)
        else:
            out[key] = value
    return out


def apply_overrides(base: ExperimentSpec | Mapping[str, Any], changes: Mapping[str, Any], *,
                    folder: str | Path | None = None, source: str = "<spec>") -> ExperimentSpec:
    """A spec with overrides (`spec_changes`) merged in, validated again: what
    `nasctl run --name/--max-trials`, `nasctl.run(..., **overrides)` and `nasctl
    serve`'s submissions run.

    Args:
        base: a loaded spec, or a mapping of spec keys not validated yet.
        changes: merged into the base's keys (`merge_changes`).
        folder: validate as a file in this folder (relative paths in the
            changes resolve there, as `load_spec` resolves a file's); None
            resolves nothing.
        source: what the spec is called in error messages.

    Returns:
        `base` itself when it is a spec and nothing changes.

    Raises:
        SpecError: the result is not a valid spec (one line), or a path in it does not exist.
    """
    if isinstance(base, ExperimentSpec):
        if not changes:
            return base
        data = spec_to_dict(base)
    else:
        data = dict(base)
    spec = _validate(merge_changes(data, changes), source)
    return spec if folder is None else _resolve_in(spec, Path(folder))


def spec_to_dict(spec: ExperimentSpec) -> dict[str, Any]:
    """JSON-safe dict of the spec (what the store keeps)."""
    return spec.model_dump(mode="json")


def spec_from_dict(data: dict[str, Any]) -> ExperimentSpec:
    """Rebuild a spec stored by `spec_to_dict`."""
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(_one_line_errors(e, "stored in the database", data), "the stored spec is damaged") from None
