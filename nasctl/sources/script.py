"""`trial.script: train.py`: a training script, run as `python train.py --name value ...`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasctl.runners.base import JobRequest
from nasctl.sources.base import TrialLaunch, TrialSource, command_arguments, python_request

if TYPE_CHECKING:
    from nasctl.spec import TrialSpec


class ScriptSource(TrialSource):
    """A script that follows the trial contract (docs/trials.md); the spec made its path absolute."""

    key = "script"

    def request(self, trial: TrialSpec, launch: TrialLaunch) -> JobRequest:
        assert trial.script is not None
        return python_request(self, trial, launch, [trial.script, *command_arguments(launch.arguments)])
