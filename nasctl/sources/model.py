"""`trial.model: pkg.module:build`: a user model trained by the built-in trainer.

The trial runs `python -m nasctl.search_spaces.model --model pkg.module:build`
with the model's folder (`trial.model_path`, default the spec's) first on
PYTHONPATH.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasctl.errors import BadInputError
from nasctl.search_spaces import TRAINER_METRICS, USER_MODEL_MODULE
from nasctl.sources.trainer import TrainerSource

if TYPE_CHECKING:
    from nasctl.spec import ExperimentSpec, TrialSpec


class ModelSource(TrainerSource):
    """A function `build(params)` returning a torch module, for the built-in trainer."""

    key = "model"

    def check_runnable(self, spec: ExperimentSpec) -> None:
        """The trainer logs every metric the spec reads, and knows the dataset.

        Raises:
            BadInputError: a metric the trainer does not log (SpecError: an unknown dataset).
        """
        missing = [m for m in spec.metric_names if m not in TRAINER_METRICS]
        if missing:
            raise BadInputError(
                f"the built-in trainer of trial.model does not log metrics {missing}",
                f"it logs: {', '.join(TRAINER_METRICS)}",
            )
        super().check_runnable(spec)

    def module(self, trial: TrialSpec) -> str:
        return USER_MODEL_MODULE

    def module_args(self, trial: TrialSpec) -> list[str]:
        assert trial.model is not None
        return ["--model", trial.model]

    def code_dir(self, trial: TrialSpec) -> str | None:
        return trial.model_path

