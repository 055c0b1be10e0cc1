"""How a trial becomes a job: the `JobRequest` for one trial of a spec.

Job names and trial directories are deterministic (`<experiment>-<index>`,
`trials/trial_NNNN`), which is what lets a restarted loop recognise a job it
submitted before (see `loop`). What the job runs is its trial source's
business (`nasctl.sources`); what a multi-fidelity trial adds to its
environment is `fidelity`'s.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from nasctl.orchestration.fidelity import checkpoint_env
from nasctl.runners.base import JobRequest, attempt_suffix
from nasctl.sources import source_of
from nasctl.sources.base import TrialLaunch
from nasctl.spec import ExperimentSpec
from nasctl.types import ParamValue


def job_name(experiment: str, index: int) -> str:
    return f"{experiment}-{index}".lower().replace("_", "-").replace(".", "-")


def trial_dir(work_dir: str, index: int) -> str:
    return os.path.join(work_dir, "trials", f"trial_{index:04d}")


def build_request(spec: ExperimentSpec, experiment: str, work_dir: str, index: int,
                  parameters: Mapping[str, ParamValue], resume_from: str | None = None,
                  attempt: int = 1) -> JobRequest:
    """The job for one trial, following the trial contract: the fixed `trial.args`
    and the active parameters reach the trial as its source passes them
    (`nasctl.sources`), NASCTL_* in the environment, with its checkpoint folder
    and the checkpoint to resume from, if any (a retry's own, a promotion's
    source's: nasctl/orchestration/fidelity.py). Attempt N > 1 of a trial is a
    job of its own, named `<job name>-aN`."""
    tdir = trial_dir(work_dir, index)
    launch = TrialLaunch(experiment, index, job_name(experiment, index), tdir,
                         {**spec.trial.args, **spec.active_parameters(dict(parameters))})
    request = source_of(spec.trial).request(spec.trial, launch)
    return dataclasses.replace(request, name=request.name + attempt_suffix(attempt), attempt=attempt,
                               env={**request.env, **checkpoint_env(tdir, resume_from)})


def preload_modules(spec: ExperimentSpec) -> tuple[str, ...]:
    """What a warm server imports for this spec's local trials (`trial.preload`)."""
    return source_of(spec.trial).preload(spec.trial)
