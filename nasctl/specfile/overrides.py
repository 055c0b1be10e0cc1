"""Spec overrides (`nasctl run --name/--max-trials`, `nasctl.run(**overrides)`,
`nasctl serve`'s submissions): changes by name, merged into a spec and validated again."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nasctl.errors import BadInputError
from nasctl.specfile.experiment import ExperimentSpec
from nasctl.specfile.loading import _resolve_in, _validate, spec_to_dict


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

