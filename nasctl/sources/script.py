"""`trial.script: train.py`: a training script, run as `python train.py --name value ...`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from nasctl.errors import SpecError
from nasctl.runners.base import JobRequest
from nasctl.sources.base import TrialLaunch, TrialSource, command_arguments, python_request

if TYPE_CHECKING:
    from nasctl.spec import TrialSpec


class ScriptSource(TrialSource):
    """A script that follows the trial contract (docs/trials.md)."""

    key = "script"
    description = "a training script"
    options: ClassVar[frozenset[str]] = frozenset({"preload"})

    def resolve(self, trial: TrialSpec, folder: Path) -> dict[str, Any]:
        """The script's path, relative to the spec's folder, made absolute.

        Raises:
            SpecError: no such file.
        """
        assert trial.script is not None
        script = Path(trial.script)
        if not script.is_absolute():
            script = (folder / script).resolve()
        if not script.is_file():
            raise SpecError(f"trial.script {trial.script} does not exist (looked at {script})", "fix the path")
        return {"script": str(script)}

    def request(self, trial: TrialSpec, launch: TrialLaunch) -> JobRequest:
        assert trial.script is not None
        return python_request(self, trial, launch, [trial.script, *command_arguments(launch.arguments)])
