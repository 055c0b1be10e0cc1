"""`trial.component: file.py:fn` (or a TorchX builtin such as `utils.python`).

The component is called once per trial and its single role becomes the job
(nasctl/runners/components.py); the role's resources replace `trial.resources`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from nasctl.runners.base import JobRequest
from nasctl.runners.components import check_component, component_job, resolve_component_name
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
                          job.gpu)
