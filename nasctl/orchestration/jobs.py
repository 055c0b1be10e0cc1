"""How a trial becomes a job: the `JobRequest` for one trial of a spec.

The trial contract: active parameters and fixed `trial.args` as `--name value`
arguments, NASCTL_* in the environment. Job names and trial directories are
deterministic (`<experiment>-<index>`, `trials/trial_NNNN`), which is what lets
a restarted loop recognise a job it submitted before (see `loop`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Mapping

from nasctl.orchestration.fidelity import fidelity_env
from nasctl.runners.base import JobRequest
from nasctl.runners.components import component_job, resolve_component_name
from nasctl.search_spaces import TRAINER_PRELOAD, USER_MODEL_MODULE, get_search_space
from nasctl.search_spaces.function import FUNCTION_ENTRY_MODULE
from nasctl.spec import ExperimentSpec
from nasctl.types import ParamValue


def job_name(experiment: str, index: int) -> str:
    return f"{experiment}-{index}".lower().replace("_", "-").replace(".", "-")


def trial_dir(work_dir: str, index: int) -> str:
    return os.path.join(work_dir, "trials", f"trial_{index:04d}")


def build_request(spec: ExperimentSpec, experiment: str, work_dir: str, index: int,
                  parameters: Mapping[str, ParamValue], resume_from: str | None = None) -> JobRequest:
    """The job for one trial, following the trial contract: active parameters and
    fixed `trial.args` as `--name value`, NASCTL_* in the environment. A user
    model runs the built-in trainer with `--model pkg.module:build --dataset NAME`
    and the model's folder on PYTHONPATH. With `optimizer.fidelity`, the trial
    also gets its checkpoint folder and, for a promotion, `resume_from`
    (nasctl/orchestration/fidelity.py)."""
    tdir = trial_dir(work_dir, index)
    tb = os.path.join(tdir, "tb")
    active = {**spec.trial.args, **spec.active_parameters(dict(parameters))}
    argv: list[str] = []
    for k, v in active.items():
        argv += [f"--{k}", repr(v) if isinstance(v, float) else str(v)]
    trial = spec.trial
    if trial.dataset:
        argv = ["--dataset", trial.dataset, *argv]
    if trial.source == "search_space":
        assert trial.search_space is not None
        args = ["-m", get_search_space(trial.search_space).module, *argv]
    elif trial.source == "model":
        assert trial.model is not None
        args = ["-m", USER_MODEL_MODULE, "--model", trial.model, *argv]
    elif trial.source == "function":
        # one JSON argument keeps every value's type exact (a choice "1" stays a string)
        args = ["-m", FUNCTION_ENTRY_MODULE, str(trial.function), "--parameters", json.dumps(active)]
    elif trial.source == "component":
        req = _component_request(spec, experiment, index, tdir, tb, active)
        return dataclasses.replace(req, env={**req.env, **fidelity_env(spec, tdir, resume_from)})
    else:
        assert trial.script is not None
        args = [trial.script, *argv]
    env = _trial_env(experiment, index, tb, trial.resources.cpu, trial.model_path or trial.code_dir)
    env.update(fidelity_env(spec, tdir, resume_from))
    r = trial.resources
    return JobRequest(job_name(experiment, index), sys.executable, args, env, tdir, r.cpu, r.mem_mb, r.gpu,
                      preload=preload_modules(spec))


def preload_modules(spec: ExperimentSpec) -> tuple[str, ...]:
    """What a warm server imports for this spec's local trials (`trial.preload`)."""
    trial = spec.trial
    if trial.preload is False:
        return ()
    if trial.preload is not None:
        return tuple(trial.preload)
    if trial.source == "search_space":
        assert trial.search_space is not None
        return (*TRAINER_PRELOAD, get_search_space(trial.search_space).module)
    if trial.source == "model":
        return (*TRAINER_PRELOAD, USER_MODEL_MODULE)
    return ()


def _trial_env(experiment: str, index: int, tb: str, cpu: int, code_dir: str | None) -> dict[str, str]:
    env = {
        "NASCTL_EXPERIMENT": experiment,
        "NASCTL_TRIAL_ID": str(index),
        "NASCTL_LOG_DIR": tb,
        "OMP_NUM_THREADS": str(cpu),
        "MKL_NUM_THREADS": str(cpu),
        "PYTHONUNBUFFERED": "1",
    }
    if code_dir:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (code_dir, os.environ.get("PYTHONPATH")) if p)
    return env


def _component_request(spec: ExperimentSpec, experiment: str, index: int, tdir: str, tb: str,
                       values: Mapping[str, ParamValue]) -> JobRequest:
    """The job a TorchX component describes for this trial; its role's resources apply."""
    assert spec.trial.component is not None
    target = resolve_component_name(spec.trial.component, spec.trial.code_dir)
    job = component_job(target, values, tb, index)
    env = {**job.env, **_trial_env(experiment, index, tb, job.cpu, spec.trial.code_dir)}
    return JobRequest(job_name(experiment, index), job.entrypoint, job.args, env, tdir, job.cpu, job.mem_mb, job.gpu)
