"""Exports of an experiment for the tools people already use.

`nasctl export NAME --format ...`:

- `json`, `csv`: text (nasctl/orchestration/control.py, `export`).
- `tensorboard`: a TensorBoard HParams view, one run per trial (`tensorboard.py`).
- `mlflow`: one MLflow run per trial in an MLflow experiment of the same name
  (`mlflow.py`; needs the `mlflow` extra).

Every format carries each trial's parameters, metric values, state,
generation method and Pareto flag (on the observed front: completed, feasible,
non-dominated). Exporters read the store and write elsewhere; they never
change the experiment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from nasctl.spec import ExperimentSpec, Scalar, spec_from_dict
from nasctl.store import Store
from nasctl.types import ExperimentRecord, TrialRecord

@dataclass(frozen=True)
class ExportData:
    """What every exporter writes: the experiment, its spec, its trials (by
    index), the Pareto flags and the metric names in a stable order."""

    experiment: ExperimentRecord
    spec: ExperimentSpec
    trials: list[TrialRecord]
    front: set[int]
    metrics: list[str]

    def parameters(self, t: TrialRecord) -> dict[str, Scalar]:
        """The trial's active parameters (inactive conditional ones left out)."""
        return self.spec.active_parameters(t.parameters)


def load_export(store: Store, name: str) -> ExportData:
    """Read an experiment for export.

    Raises:
        NotFoundError: no experiment of that name.
    """
    from nasctl.orchestration.control import pareto_indices

    exp = store.get_experiment(name)
    spec = spec_from_dict(exp.spec)
    trials = store.list_trials(exp.id)
    metrics: list[str] = list(spec.metric_names)
    for t in trials:
        metrics += [m for m in t.values if m not in metrics]
    return ExportData(exp, spec, trials, pareto_indices(spec, trials), metrics)


def epoch_seconds(ts: datetime | None) -> float | None:
    """A stored (naive UTC) timestamp as seconds since the epoch."""
    return None if ts is None else ts.replace(tzinfo=timezone.utc).timestamp()


__all__ = ["ExportData", "epoch_seconds", "load_export"]
