"""Experiment spec: YAML -> validated, immutable objects (pydantic).

The keys documented in docs/spec.md are the public format. Every validation
error is reported on one line naming the field path and what is allowed.

The parts, in `nasctl/specfile/`: `parameters` (the search space's parameters, objectives,
constraints), `trial` (`trial:` and each trial source's keys and paths),
`experiment` (`ExperimentSpec` and its other sections), `loading` (YAML and
files, one-line errors, the stored form) and `overrides`. Import from
`nasctl.spec`.
"""

from __future__ import annotations

from nasctl.specfile.experiment import (
    DEFAULT_INITIAL_TRIALS, MAX_PARAMETERS, METRIC_RE, NAME_RE, REDUCED_PRECISIONS, Budget, EarlyStoppingSpec,
    ExperimentSpec, FidelitySpec, OptimizerSpec, RunnerSpec,
)
from nasctl.specfile.loading import (
    MAX_SPEC_BYTES, SPEC_DOCS_HINT, load_spec, parse_spec, parse_spec_in, read_spec_text, spec_from_dict, spec_to_dict,
)
from nasctl.specfile.overrides import BUDGET_OVERRIDES, SPEC_OVERRIDES, apply_overrides, merge_changes, spec_changes
from nasctl.specfile.parameters import (
    BOUND_ROUNDING, CONSTRAINT_RE, MAX_CHOICES, PARAM_RE, ChoiceParameter, Constraint, FixedParameter, FloatParameter,
    IntParameter, Objective, Parameter, Scalar, parse_constraint,
)
from nasctl.specfile.trial import (
    MAX_RETRIES_LIMIT, MODULE_RE, RETRYABLE, SOURCE_KEYS, SOURCE_OPTIONS, TARGET_RE, Resources, SourceKey, TrialSpec,
)

__all__ = [
    "BOUND_ROUNDING", "BUDGET_OVERRIDES", "CONSTRAINT_RE", "DEFAULT_INITIAL_TRIALS", "MAX_CHOICES", "MAX_PARAMETERS",
    "MAX_RETRIES_LIMIT", "MAX_SPEC_BYTES", "METRIC_RE", "MODULE_RE", "NAME_RE", "PARAM_RE", "REDUCED_PRECISIONS",
    "RETRYABLE", "SOURCE_KEYS", "SOURCE_OPTIONS", "SPEC_DOCS_HINT", "SPEC_OVERRIDES", "TARGET_RE",
    "Budget", "ChoiceParameter", "Constraint", "EarlyStoppingSpec", "ExperimentSpec", "FidelitySpec",
    "FixedParameter", "FloatParameter", "IntParameter", "Objective", "OptimizerSpec", "Parameter", "Resources",
    "RunnerSpec", "Scalar", "SourceKey", "TrialSpec",
    "apply_overrides", "load_spec", "merge_changes", "parse_constraint", "parse_spec", "parse_spec_in",
    "read_spec_text", "spec_changes", "spec_from_dict", "spec_to_dict",
]
