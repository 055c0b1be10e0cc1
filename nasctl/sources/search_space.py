"""`trial.search_space: NAME`: a built-in model family (nasctl/search_spaces/)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasctl.errors import BadInputError
from nasctl.search_spaces import get_search_space
from nasctl.sources.trainer import TrainerSource

if TYPE_CHECKING:
    from nasctl.spec import ExperimentSpec, TrialSpec


class SearchSpaceSource(TrainerSource):
    """A built-in search space: its trainer module takes a known set of
    parameters and logs a known set of metrics, so both are checked up front."""

    key = "search_space"

    def module(self, trial: TrialSpec) -> str:
        assert trial.search_space is not None
        return get_search_space(trial.search_space).module

    def check_runnable(self, spec: ExperimentSpec) -> None:
        """The space exists, takes every parameter and argument name (and the
        fidelity parameter) and logs every metric the spec reads.

        Raises:
            SpecError: an unknown search space or dataset.
            BadInputError: a name it does not take, a metric it does not log.
        """
        assert spec.trial.search_space is not None
        space = get_search_space(spec.trial.search_space)
        names = set(spec.search_space) | set(spec.trial.args)
        if spec.optimizer.fidelity is not None:
            names.add(spec.optimizer.fidelity.parameter)
        unknown = names - space.parameters
        if unknown:
            raise BadInputError(
                f"search space {space.name} does not take parameters {sorted(unknown)}",
                f"it takes: {', '.join(sorted(space.parameters))}",
            )
        missing = [m for m in spec.metric_names if m not in space.metrics]
        if missing:
            raise BadInputError(
                f"search space {space.name} does not log metrics {missing}",
                f"it logs: {', '.join(space.metrics)}",
            )
        super().check_runnable(spec)
