"""Runners: how trials become jobs. A name -> "module:factory" registry, loaded lazily.

Third-party runners register under the entry-point group `nasctl.runners`.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from typing import Any

from nasctl.errors import UnknownRunnerError
from nasctl.runners.base import JobRequest, JobState, JobStatus, Runner, SubmittedJob
from nasctl.runners.polling import ControlSettings, split_control

BUILTIN_RUNNERS: dict[str, str] = {
    "local_cwd": "nasctl.runners.local:create_runner",
    "slurm": "nasctl.runners.slurm:create_runner",
    "kubernetes": "nasctl.runners.kubernetes:create_runner",
    "inprocess": "nasctl.runners.inprocess:create_runner",
    "simulated": "nasctl.runners.simulated:create_runner",
}


def available_runners() -> dict[str, str]:
    """Built-in runners and those registered under the `nasctl.runners` entry points."""
    return dict(_registered())


@functools.cache
def _registered() -> tuple[tuple[str, str], ...]:
    # imported here: every local trial's launcher imports this package, and
    # importlib.metadata alone would add ~0.1 s to each launch; scanning the
    # entry points costs as much again, so a process (the service builds a runner
    # per experiment) does it once
    from importlib.metadata import entry_points

    found = dict(BUILTIN_RUNNERS)
    for ep in entry_points(group="nasctl.runners"):
        found.setdefault(ep.name, ep.value)
    return tuple(found.items())


def get_runner(scheduler: str, cfg: Mapping[str, Any] | None = None) -> Runner:
    """Build the runner for a TorchX scheduler name. The control settings every
    runner takes (`nasctl.runners.polling`) are checked here and not passed on.

    Raises:
        UnknownRunnerError: no runner is registered under that name.
        SpecError: the cfg has options the runner does not take, or a bad control setting.
    """
    registry = available_runners()
    target = registry.get(scheduler)
    if target is None:
        hint = f"use one of: {', '.join(sorted(registry))}"
        if scheduler == "local":
            hint = "TorchX's local scheduler is called local_cwd; " + hint
        raise UnknownRunnerError(f"runner.scheduler {scheduler!r} is not a known scheduler", hint)
    _, rest = split_control(cfg, 1.0)
    module, _, factory = target.partition(":")
    runner: Runner = getattr(importlib.import_module(module), factory)(rest)
    return runner


def runner_settings(runner: Runner, cfg: Mapping[str, Any] | None) -> ControlSettings:
    """The loop's timing toward `runner` from its `runner.cfg` (defaults: the runner's own poll interval).

    Raises:
        SpecError: a bad control setting.
    """
    settings, _ = split_control(cfg, runner.poll_interval)
    return settings


__all__ = ["ControlSettings", "JobRequest", "JobState", "JobStatus", "Runner", "SubmittedJob", "available_runners",
           "get_runner", "runner_settings"]
