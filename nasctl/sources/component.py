"""`trial.component: file.py:fn`: TorchX components as trials.

A TorchX component is a function that returns an `AppDef`: a builtin such as
`utils.python`, one registered under the `torchx.components` entry point, or
`path/to/file.py:fn`. nasctl calls it once per trial and launches the app's
single role through the experiment's runner, so the job keeps everything a
trial gets (launcher, re-attach, logs in the trial directory, status from
files) and the same component runs on any scheduler. The role's resources
replace `trial.resources`.

How the call is made, from the component's signature:
- every trial parameter and `trial.args` entry the function declares is passed
  by name, converted to the declared type by the function's own code;
- `log_dir` / `log_path` (when declared and not a parameter) get the trial's
  TensorBoard directory, `trial_index` gets the trial index;
- everything else is passed as `--name value` program arguments through the
  function's `*args` (as `utils.python` takes them), or refused if it has none.
"""

from __future__ import annotations

import inspect
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from nasctl.errors import BadInputError
from nasctl.runners.base import JobRequest
from nasctl.sources.base import TrialLaunch, TrialSource, trial_env

if TYPE_CHECKING:
    from nasctl.spec import ExperimentSpec, TrialSpec


class ComponentSource(TrialSource):
    """A TorchX component: a function that returns an AppDef with one role."""

    key = "component"
    uses_trial_resources: ClassVar[bool] = False  # the role says its CPUs, memory and GPUs

    def check_runnable(self, spec: ExperimentSpec) -> None:
        """The component exists and takes every parameter and argument name.

        Raises:
            BadInputError: it is not found, TorchX rejects it, or a name has no place in its signature.
        """
        assert spec.trial.component is not None
        target = resolve_component_name(spec.trial.component, spec.trial.code_dir)
        check_component(target, [*spec.search_space, *spec.trial.args])

    def request(self, trial: TrialSpec, launch: TrialLaunch) -> JobRequest:
        """The job the component describes for this trial; its role's resources apply."""
        assert trial.component is not None
        target = resolve_component_name(trial.component, trial.code_dir)
        job = component_job(target, launch.arguments, launch.log_dir, launch.index)
        env = {**job.env, **trial_env(launch, job.cpu, trial.code_dir)}
        return JobRequest(launch.job_name, job.entrypoint, job.args, env, launch.trial_dir, job.cpu, job.mem_mb,
                          job.gpu, nodes=trial.resources.nodes)


LOG_DIR_ARGS = ("log_dir", "log_path")
INDEX_ARG = "trial_index"


@dataclass(frozen=True)
class ComponentJob:
    """The parts of a component's AppDef a `JobRequest` carries."""

    entrypoint: str
    args: list[str]
    env: dict[str, str]
    cpu: int
    gpu: int
    mem_mb: int


def resolve_component_name(target: str, code_dir: str | None) -> str:
    """`file.py:fn` relative to the spec's folder becomes absolute; other names are kept."""
    path, sep, fn = target.rpartition(":")
    if sep and path.endswith(".py") and code_dir and not os.path.isabs(path):
        return f"{os.path.normpath(os.path.join(code_dir, path))}:{fn}"
    return target


def load_component(target: str) -> Callable[..., Any]:
    """The component function, validated by TorchX's own component checks.

    Raises:
        BadInputError: not found, or TorchX's linter rejects it.
    """
    from torchx.specs.finder import ComponentNotFoundException, ComponentValidationException, get_component

    path = target.rpartition(":")[0]
    if path.endswith(".py") and not os.path.isfile(path):
        raise BadInputError(f"trial.component {target}: file {path} does not exist", "fix the path")
    try:
        fn: Callable[..., Any] = get_component(target).fn
        return fn
    except (ComponentNotFoundException, ComponentValidationException, ValueError) as e:
        msg = " ".join(str(e).split())
        raise BadInputError(f"trial.component {target}: {msg}",
                            "see `torchx builtins`, or write file.py:function returning an AppDef") from None


def _split(fn: Callable[..., Any], values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    sig = inspect.signature(fn)
    named = {n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    has_varargs = any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())
    kwargs: dict[str, Any] = {}
    extra: list[str] = []
    refused: list[str] = []
    for k, v in values.items():
        if k in named:
            kwargs[k] = v
        elif has_varargs:
            extra += [f"--{k}", repr(v) if isinstance(v, float) else str(v)]
        else:
            refused.append(k)
    return kwargs, extra, refused


def check_component(target: str, names: list[str]) -> None:
    """Spec-time check: the component exists and can take every parameter name.

    Raises:
        BadInputError: with the component's own parameter names as the hint.
    """
    fn = load_component(target)
    _, _, refused = _split(fn, {n: 0 for n in names})
    if refused:
        takes = [n for n in inspect.signature(fn).parameters]
        raise BadInputError(
            f"trial.component {target} takes no parameters {refused} and has no *args for them",
            f"it takes: {', '.join(takes)}",
        )


def component_job(target: str, values: Mapping[str, Any], log_dir: str, index: int) -> ComponentJob:
    """Call the component for one trial and take its single role apart.

    Raises:
        BadInputError: the component fails, returns no AppDef, or has several
            roles or replicas (use the runner's `nproc_per_node` and `trial.resources.nodes`
            for those).
    """
    fn = load_component(target)
    kwargs, extra, refused = _split(fn, values)
    if refused:
        raise BadInputError(f"trial.component {target} takes no parameters {refused}", "rename them or add *args")
    declared = inspect.signature(fn).parameters
    for name in LOG_DIR_ARGS:
        if name in declared and name not in kwargs:
            kwargs[name] = log_dir
    if INDEX_ARG in declared and INDEX_ARG not in kwargs:
        kwargs[INDEX_ARG] = index
    try:
        app = fn(*extra, **kwargs)
    except Exception as e:  # the user's component code
        raise BadInputError(f"trial.component {target} raised {type(e).__name__}: {e}",
                            "fix the component; it runs once per trial") from e
    roles = getattr(app, "roles", None)
    if not roles or len(roles) != 1:
        raise BadInputError(f"trial.component {target} returned {len(roles or [])} roles",
                            "a trial is one role; return an AppDef with exactly one")
    role = roles[0]
    if role.num_replicas != 1:
        raise BadInputError(f"trial.component {target} asks for {role.num_replicas} replicas",
                            "use 1 replica; for multi-process trials set runner.cfg.nproc_per_node, "
                            "for multi-node ones trial.resources.nodes")
    entrypoint = role.entrypoint
    if entrypoint in ("python", "python3"):
        entrypoint = sys.executable  # the orchestrator's environment, where nasctl and the trainer live
    elif not os.path.isabs(entrypoint):
        entrypoint = shutil.which(entrypoint) or entrypoint
    res = role.resource
    cpu = max(1, int(res.cpu)) if res.cpu and res.cpu > 0 else 1
    mem = int(res.memMB) if res.memMB and res.memMB > 0 else 2000
    return ComponentJob(entrypoint, [str(a) for a in role.args], {k: str(v) for k, v in role.env.items()},
                        cpu, max(0, int(res.gpu or 0)), mem)
