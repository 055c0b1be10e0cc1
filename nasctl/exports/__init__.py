"""Exports of an experiment for the tools people already use.

`nasctl export NAME --format ...` (and the Python API's `Experiment` methods):

- `json`, `csv`: text (`table.py`), whose rows are also the columns of
  `Experiment.trials_dataframe()`.
- `tensorboard`: a TensorBoard HParams view, one run per trial (`tensorboard.py`).
- `mlflow`: one MLflow run per trial in an MLflow experiment of the same name
  (`mlflow.py`; needs the `mlflow` extra).

Every format carries each trial's parameters, metric values, state,
generation method and Pareto flag (on the observed front: completed, feasible,
non-dominated), all read once by `load_export`. Exporters read the store and
write elsewhere; they never change the experiment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from nasctl.orchestration.views import pareto_indices, trial_row
from nasctl.spec import ExperimentSpec, Scalar, spec_from_dict
from nasctl.store import Store
from nasctl.types import ExperimentRecord, TrialRecord


@dataclass(frozen=True)
class ExportData:
    """What every exporter writes: the experiment, its spec, its trials (by
    index), the Pareto flags, the metric names in a stable order (objectives,
    then constrained metrics, then any other metric a trial logged) and the
    trials' notes."""

    experiment: ExperimentRecord
    spec: ExperimentSpec
    trials: list[TrialRecord]
    front: set[int]
    metrics: list[str]
    notes: dict[int, str] = field(default_factory=dict)

    def parameters(self, t: TrialRecord) -> dict[str, Scalar]:
        """The trial's active parameters (inactive conditional ones left out)."""
        return self.spec.active_parameters(t.parameters)

    def rows(self) -> list[dict[str, Any]]:
        """Each trial as `nasctl trials --json` shows it, with its Pareto flag
        (`pareto`) and its note (`note`, None without one)."""
        return [{**trial_row(t, self.spec), "pareto": t.index in self.front, "note": self.notes.get(t.index)}
                for t in self.trials]


def load_export(store: Store, name: str) -> ExportData:
    """Read an experiment for export.

    Raises:
        NotFoundError: no experiment of that name.
    """
    from nasctl.store.manage import trial_notes

    exp = store.get_experiment(name)
    spec = spec_from_dict(exp.spec)
    trials = store.list_trials(exp.id)
    metrics: list[str] = list(spec.metric_names)
    for t in trials:
        metrics += [m for m in t.values if m not in metrics]
    return ExportData(exp, spec, trials, pareto_indices(spec, trials), metrics, trial_notes(store, exp.id))


def epoch_seconds(ts: datetime | None) -> float | None:
    """A stored (naive UTC) timestamp as seconds since the epoch."""
    return None if ts is None else ts.replace(tzinfo=timezone.utc).timestamp()


__all__ = ["ExportData", "epoch_seconds", "load_export"]
