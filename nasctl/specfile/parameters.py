"""The spec's building blocks: the base model, search-space parameters,
objectives and outcome constraints."""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_CHOICES = 1_000

PARAM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
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

