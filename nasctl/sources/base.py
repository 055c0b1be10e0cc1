"""The trial-source contract, and what the sources that run a Python command share.

A trial's job follows the trial contract: the fixed `trial.args` and the
trial's active parameters reach it (as `--name value` arguments unless the
source says otherwise), and its environment carries NASCTL_EXPERIMENT,
NASCTL_TRIAL_ID and NASCTL_LOG_DIR (the TensorBoard folder nasctl reads).
"""

from __future__ import annotations

import abc
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from nasctl.runners.base import JobRequest
from nasctl.types import ParamValue

if TYPE_CHECKING:
    from nasctl.spec import ExperimentSpec, TrialSpec


@dataclass(frozen=True)
class TrialLaunch:
    """One trial to start, as the orchestrator names it.

    Attributes:
        experiment: the experiment's name (NASCTL_EXPERIMENT).
        index: the trial's index (NASCTL_TRIAL_ID).
        job_name: the deterministic job name the runner submits under.
        trial_dir: the trial's own folder; its TensorBoard logs go to `log_dir`.
        arguments: what the trial receives: the fixed `trial.args`, then its
            active parameters (inactive conditional ones already left out).
    """

    experiment: str
    index: int
    job_name: str
    trial_dir: str
    arguments: Mapping[str, ParamValue]

    @property
    def log_dir(self) -> str:
        return os.path.join(self.trial_dir, "tb")


class TrialSource(abc.ABC):
    """How trials of one source run: one subclass per key of `trial:` (`trial.script`, ...).

    What the spec file says about a source (its keys' shape, its paths) is
    checked when the spec is loaded (`nasctl.spec.SOURCE_KEYS`); a source
    class starts from a loaded spec.

    Contract (every registered source passes tests/unit/test_source_contract.py):

    - `key` is the `trial:` key that selects the source and its registry name.
    - `check_runnable` holds the checks that need registries or user code
      (a built-in search space's parameters and metrics, a user model's or
      function's module, a component's signature) and runs before anything is
      created. User code is looked up only where a spec read as a file put
      it (`trial.model_path`, `trial.code_dir`), never imported. It raises a
      `BadInputError` (or subclass) whose hint names the fix; it changes nothing.
    - `request` builds the job of one trial. It is deterministic: the same
      trial and launch give an equal request (a component's function is called
      each time). Raises `BadInputError` for user code that cannot make a job.
    - `preload` is what a warm server imports before forking a local trial
      (`trial.preload`; nasctl/runners/warm.py): a tuple, empty for none.
    - `uses_trial_resources`: `trial.resources` sets the job's CPUs, memory and
      GPUs (False where the source brings its own, such as a TorchX role's).

    Sources hold no state: `nasctl.sources.get_source` shares one instance.
    """

    key: ClassVar[str]
    uses_trial_resources: ClassVar[bool] = True

    def check_runnable(self, spec: ExperimentSpec) -> None:
        """Checks before anything is created (see the class's contract)."""

    @abc.abstractmethod
    def request(self, trial: TrialSpec, launch: TrialLaunch) -> JobRequest:
        """The job that runs one trial."""

    def preload(self, trial: TrialSpec) -> tuple[str, ...]:
        """Modules a warm server imports for this trial: `trial.preload` when the
        spec sets it (`false`: none), else the source's `default_preload`."""
        if trial.preload is False:
            return ()
        if trial.preload is not None:
            return tuple(trial.preload)
        return self.default_preload(trial)

    def default_preload(self, trial: TrialSpec) -> tuple[str, ...]:
        """What `preload` gives when the spec does not say: nothing, unless overridden."""
        return ()


def command_arguments(values: Mapping[str, ParamValue]) -> list[str]:
    """Values as `--name value` arguments (floats as repr, so they read back exactly)."""
    argv: list[str] = []
    for k, v in values.items():
        argv += [f"--{k}", repr(v) if isinstance(v, float) else str(v)]
    return argv


def trial_env(launch: TrialLaunch, cpu: int, code_dir: str | None) -> dict[str, str]:
    """The trial contract's environment, with thread counts of `cpu` and
    `code_dir` (where user code is imported from) first on PYTHONPATH."""
    env = {
        "NASCTL_EXPERIMENT": launch.experiment,
        "NASCTL_TRIAL_ID": str(launch.index),
        "NASCTL_LOG_DIR": launch.log_dir,
        "OMP_NUM_THREADS": str(cpu),
        "MKL_NUM_THREADS": str(cpu),
        "PYTHONUNBUFFERED": "1",
    }
    if code_dir:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (code_dir, os.environ.get("PYTHONPATH")) if p)
    return env


def python_request(source: TrialSource, trial: TrialSpec, launch: TrialLaunch, args: Sequence[str],
                   code_dir: str | None = None) -> JobRequest:
    """A job that runs this environment's Python with `args`, on `trial.resources`."""
    r = trial.resources
    return JobRequest(launch.job_name, sys.executable, list(args), trial_env(launch, r.cpu, code_dir),
                      launch.trial_dir, r.cpu, r.mem_mb, r.gpu, preload=source.preload(trial), nodes=r.nodes)
