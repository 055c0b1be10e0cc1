"""`nasctl export NAME --format mlflow --tracking-uri URI`: one MLflow run per trial.

The runs go into the MLflow experiment named like the nasctl experiment
(created if missing). Each run holds:

- params: the trial's active parameters;
- metrics: its final metric values (step 0, timestamped when the trial ended);
- tags: `nasctl.experiment`, `nasctl.trial_index`, `nasctl.method`,
  `nasctl.status`, `nasctl.pareto` (true/false) and, for a failed trial,
  `nasctl.failure_reason`; the run is named `trial_NNNN`;
- its start and end time, and an MLflow status: FINISHED (COMPLETED), FAILED,
  KILLED (EARLY_STOPPED, ABANDONED), RUNNING, SCHEDULED (CANDIDATE).

Exporting again updates instead of duplicating: a trial's run is found by its
`nasctl.trial_index` tag; what changed since (its state, values, Pareto flag)
is written to it, and new trials get new runs.

Needs the `mlflow` extra (`pip install 'nasctl[mlflow]'`: the MLflow tracking
client, `mlflow-skinny`). MLflow 3 refuses file stores (`file:///...`)
unless `MLFLOW_ALLOW_FILE_STORE=true` is set; database stores
(`sqlite:///mlflow.db`) and tracking servers (`http://...`) need nothing.
"""

from __future__ import annotations

from typing import Any

from nasctl.errors import BadInputError
from nasctl.exports import epoch_seconds, load_export
from nasctl.store import Store
from nasctl.types import TrialRecord, TrialStatus

INSTALL_HINT = "pip install 'nasctl[mlflow]'"
MAX_TAG_CHARS = 1000
RUN_STATUS = {
    TrialStatus.COMPLETED: "FINISHED",
    TrialStatus.FAILED: "FAILED",
    TrialStatus.EARLY_STOPPED: "KILLED",
    TrialStatus.ABANDONED: "KILLED",
    TrialStatus.RUNNING: "RUNNING",
    TrialStatus.CANDIDATE: "SCHEDULED",
}


def mlflow_available() -> bool:
    """Whether the MLflow tracking client can be imported."""
    import importlib.util

    try:
        return importlib.util.find_spec("mlflow") is not None
    except (ImportError, ValueError):  # a module entry set to None counts as not installed
        return False


def export_mlflow(store: Store, name: str, tracking_uri: str) -> dict[str, Any]:
    """Log every trial of experiment `name` as an MLflow run at `tracking_uri`.

    Returns the MLflow experiment id and how many runs were created, updated
    and left unchanged.

    Raises:
        NotFoundError: no such nasctl experiment.
        BadInputError: MLflow is not installed, or refuses the tracking URI.
    """
    data = load_export(store, name)  # an unknown experiment fails before MLflow is imported
    client, errors = _client(tracking_uri)
    try:
        exp_id = _experiment_id(client, name, store.display_url)
        existing = _runs_by_trial(client, exp_id)
        counts = {"created": 0, "updated": 0, "unchanged": 0}
        for t in data.trials:
            tags = _tags(name, t, t.index in data.front)
            run = existing.get(t.index)
            if run is None:
                _create_run(client, exp_id, t, data.parameters(t), tags)
                counts["created"] += 1
            elif _update_run(client, run, t, tags):
                counts["updated"] += 1
            else:
                counts["unchanged"] += 1
    except errors as e:
        raise _bad_uri(tracking_uri, e) from None
    return {"experiment": name, "tracking_uri": tracking_uri, "mlflow_experiment_id": exp_id, **counts}


def _client(tracking_uri: str) -> tuple[Any, tuple[type[BaseException], ...]]:
    if not mlflow_available():
        raise BadInputError("--format mlflow needs MLflow, which is not installed", INSTALL_HINT)
    try:
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException
    except ImportError as e:
        raise BadInputError(f"--format mlflow: MLflow cannot be imported ({e})", INSTALL_HINT) from None
    errors = (MlflowException, OSError)
    try:
        return MlflowClient(tracking_uri=tracking_uri), errors
    except errors as e:
        raise _bad_uri(tracking_uri, e) from None


def _bad_uri(uri: str, e: BaseException) -> BadInputError:
    text = str(e)
    if "MLFLOW_ALLOW_FILE_STORE" in text:
        return BadInputError(f"--tracking-uri {uri}: MLflow refuses file stores unless MLFLOW_ALLOW_FILE_STORE=true",
                             "set MLFLOW_ALLOW_FILE_STORE=true, or use a database store such as sqlite:///mlflow.db")
    first = " ".join(text.split())[:300]
    return BadInputError(f"--tracking-uri {uri}: MLflow refused it: {first}",
                         "pass a reachable tracking URI (http://host:5000, sqlite:///mlflow.db, file:///abs/dir)")


def _experiment_id(client: Any, name: str, database: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is None:
        return str(client.create_experiment(name, tags={"nasctl.experiment": name, "nasctl.database": database}))
    if exp.lifecycle_stage != "active":
        raise BadInputError(f"the MLflow experiment {name!r} is deleted",
                            f"restore it (`mlflow experiments restore --experiment-id {exp.experiment_id}`) "
                            "or delete it for good")
    return str(exp.experiment_id)


def _runs_by_trial(client: Any, exp_id: str) -> dict[int, Any]:
    """This experiment's runs that an earlier export made, by trial index."""
    out: dict[int, Any] = {}
    token = None
    while True:
        page = client.search_runs([exp_id], filter_string="tags.`nasctl.trial_index` != ''",
                                  max_results=1000, page_token=token)
        for run in page:
            index = run.data.tags.get("nasctl.trial_index", "")
            if index.isdigit():
                out.setdefault(int(index), run)
        token = page.token
        if not token:
            return out


def _tags(name: str, t: TrialRecord, pareto: bool) -> dict[str, str]:
    tags = {
        "nasctl.experiment": name,
        "nasctl.trial_index": str(t.index),
        "nasctl.method": t.generation_method,
        "nasctl.status": t.status.value,
        "nasctl.pareto": "true" if pareto else "false",
    }
    if t.failure_reason:
        tags["nasctl.failure_reason"] = t.failure_reason[:MAX_TAG_CHARS]
    return tags


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def _metrics(t: TrialRecord) -> list[Any]:
    from mlflow.entities import Metric

    when = _ms(epoch_seconds(t.ended_at or t.started_at or t.created_at)) or 0
    return [Metric(key, float(value), when, 0) for key, value in t.values.items()]


def _create_run(client: Any, exp_id: str, t: TrialRecord, params: dict[str, Any], tags: dict[str, str]) -> None:
    from mlflow.entities import Param, RunTag

    run = client.create_run(exp_id, start_time=_ms(epoch_seconds(t.started_at or t.created_at)),
                            tags=tags, run_name=f"trial_{t.index:04d}")
    run_id = run.info.run_id
    client.log_batch(run_id, metrics=_metrics(t), params=[Param(k, str(v)) for k, v in params.items()],
                     tags=[RunTag(k, v) for k, v in tags.items()])
    _set_status(client, run_id, t)


def _set_status(client: Any, run_id: str, t: TrialRecord) -> None:
    status = RUN_STATUS[t.status]
    if status in ("RUNNING", "SCHEDULED"):
        client.update_run(run_id, status=status)
    else:
        client.set_terminated(run_id, status=status, end_time=_ms(epoch_seconds(t.ended_at)))


def _update_run(client: Any, run: Any, t: TrialRecord, tags: dict[str, str]) -> bool:
    """Bring an earlier export's run up to date; False when nothing changed."""
    from mlflow.entities import RunTag

    stale_tags = [RunTag(k, v) for k, v in tags.items() if run.data.tags.get(k) != v]
    new_values = dict(t.values) != {k: float(v) for k, v in run.data.metrics.items()}
    if not stale_tags and not new_values and run.info.status == RUN_STATUS[t.status]:
        return False
    client.log_batch(run.info.run_id, metrics=_metrics(t) if new_values else [], tags=stale_tags)
    _set_status(client, run.info.run_id, t)
    return True


__all__ = ["INSTALL_HINT", "RUN_STATUS", "export_mlflow", "mlflow_available"]
