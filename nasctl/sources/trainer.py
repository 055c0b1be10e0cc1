"""What the two sources trained by the built-in trainer share (`trial.search_space`, `trial.model`).

Both run `python -m MODULE`, take `trial.dataset` (passed first, as
`--dataset NAME`) and `trial.preload`, and warm-start by default with the
trainer's own imports (`TRAINER_PRELOAD`).
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

from nasctl.runners.base import JobRequest
from nasctl.search_spaces import TRAINER_PRELOAD, check_dataset
from nasctl.sources.base import TrialLaunch, TrialSource, command_arguments, python_request

if TYPE_CHECKING:
    from nasctl.spec import ExperimentSpec, TrialSpec


class TrainerSource(TrialSource):
    """A source whose trials the built-in Lightning trainer runs."""

    @abc.abstractmethod
    def module(self, trial: TrialSpec) -> str:
        """The module a trial runs as `python -m MODULE`."""

    def module_args(self, trial: TrialSpec) -> list[str]:
        """Arguments between the module and the trial's own (none unless overridden)."""
        return []

    def code_dir(self, trial: TrialSpec) -> str | None:
        """A folder put first on the trial's PYTHONPATH (none unless overridden)."""
        return None

    def check_runnable(self, spec: ExperimentSpec) -> None:
        """The dataset, wherever the spec sets it, is one the trainer knows.

        Raises:
            SpecError: an unknown dataset.
        """
        dataset = spec.trial.dataset or spec.trial.args.get("dataset") or spec.fixed.get("dataset")
        if dataset is not None:
            check_dataset(str(dataset))

    def request(self, trial: TrialSpec, launch: TrialLaunch) -> JobRequest:
        argv = command_arguments(launch.arguments)
        if trial.dataset:
            argv = ["--dataset", trial.dataset, *argv]
        return python_request(self, trial, launch, ["-m", self.module(trial), *self.module_args(trial), *argv],
                              self.code_dir(trial))

    def default_preload(self, trial: TrialSpec) -> tuple[str, ...]:
        return (*TRAINER_PRELOAD, self.module(trial))
