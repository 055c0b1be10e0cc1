"""`trial:`: what each trial runs (one trial source), its arguments, resources
and retries, and what the spec file says about each source (`SOURCE_KEYS`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from nasctl.errors import SpecError
from nasctl.specfile.parameters import PARAM_RE, Scalar, _Model
from nasctl.types import FailureClass


class Resources(_Model):
    cpu: int = Field(default=1, ge=1, le=1024)
    mem_mb: int = Field(default=2000, ge=64)
    gpu: int = Field(default=0, ge=0, le=64)
    nodes: int = Field(
        default=1, ge=1, le=1024,
        description="nodes per trial: a multi-node data-parallel trial runs runner.cfg.nproc_per_node processes "
                    "on each (Slurm and Kubernetes; cpu, mem_mb and gpu are per node)",
    )


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
            folder: relative paths made absolute (a script's checked to exist),
            the folder where code is looked up. Resolving a resolved trial changes
            nothing. Raises `SpecError`. Whether the user code found there has
            what the spec names is the source's `check_runnable`.
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
    """`trial.model_path` (default: the spec's folder) becomes absolute; the
    model's module is looked up there by `ModelSource.check_runnable`."""
    where = (folder / (trial.model_path or ".")).resolve()
    return {"model_path": str(where), **_resolve_dataset(trial, folder)}


def _code_dir(trial: TrialSpec, folder: Path) -> dict[str, Any]:
    """The spec's folder becomes `trial.code_dir`, where a function's module or a
    component's file is found (checked by the source's `check_runnable`)."""
    return {"code_dir": str(folder.resolve())}


_TRAINER_OPTIONS = frozenset({"dataset", "preload"})  # the built-in trainer's

SOURCE_KEYS: dict[str, SourceKey] = {
    "search_space": SourceKey("a built-in such as mlp_digits or cnn", _TRAINER_OPTIONS, resolve=_resolve_dataset),
    "script": SourceKey("a training script", frozenset({"preload"}), resolve=_resolve_script),
    "model": SourceKey('"pkg.module:build", a user model for the built-in trainer', _TRAINER_OPTIONS | {"model_path"},
                       target="pkg.module:function",
                       needs=(("dataset", "digits, mnist1d, mnist or idx:/path/to/dir"),), resolve=_resolve_model),
    "function": SourceKey("a Python function pkg.module:fn", target="'package.module:function'", resolve=_code_dir),
    "component": SourceKey("a TorchX component such as utils.python or file.py:fn", resolve=_code_dir),
}
"""The trial sources by key, in the order messages list them. A new source
adds its key here (and a field of `TrialSpec`) and its class to nasctl/sources/."""
