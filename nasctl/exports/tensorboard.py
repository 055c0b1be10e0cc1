"""`nasctl export NAME --format tensorboard --out DIR`: a TensorBoard HParams view.

Layout of DIR (open it with `tensorboard --logdir DIR`, HParams tab):

    DIR/                    the experiment's HParams configuration: every
                            parameter with its domain, every metric
    DIR/trial_0000/ ...     one run per trial: its active parameters as
                            hparams, its final metric values as scalars
                            (step 0), and its end state

Besides the search space, three hparams describe each trial, for filtering and
sorting in the dashboard: `nasctl.status` (COMPLETED, FAILED, ...),
`nasctl.method` (how it was proposed) and `nasctl.pareto` (on the observed
front). The names hold a dot, which parameter names cannot, so they never
collide with a parameter.

Everything is written with TensorBoard's own HParams protobufs
(`tensorboard.plugins.hparams.summary_v2`, no TensorFlow needed) into event
files written synchronously (`nasctl.metrics.tensorboard.write_summary`): no
writer thread, no torch import. Learning curves stay in the trials' own logs
(`nasctl status NAME` names the folder).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nasctl.errors import BadInputError
from nasctl.exports import ExportData, epoch_seconds, load_export
from nasctl.metrics.tensorboard import event_files, write_summary
from nasctl.spec import ChoiceParameter, FloatParameter, IntParameter
from nasctl.store import Store
from nasctl.types import TrialStatus

STATUS_HPARAM = "nasctl.status"
METHOD_HPARAM = "nasctl.method"
PARETO_HPARAM = "nasctl.pareto"


def run_name(index: int) -> str:
    """The run (sub-folder) of trial `index`."""
    return f"trial_{index:04d}"


def export_tensorboard(store: Store, name: str, out: str | os.PathLike[str]) -> dict[str, Any]:
    """Write experiment `name` as a TensorBoard HParams view into folder `out`.

    Returns what was written: the folder, the number of runs, the hparams and metrics.

    Raises:
        NotFoundError: no such experiment.
        BadInputError: `out` cannot be created or written, is a file, or already
            holds TensorBoard event files (a second export would mix with them).
    """
    from tensorboard.plugins.hparams import summary_v2 as hp

    data = load_export(store, name)
    root = _prepare(Path(out))
    hparams = _hparams(data)
    by_name = {h.name: h for h in hparams}
    metrics = [hp.Metric(m, display_name=m, description=_describe_metric(data, m)) for m in data.metrics]
    created = epoch_seconds(data.experiment.created_at)
    write_summary(root, hp.hparams_config_pb(hparams, metrics, time_created_secs=created), 0, wall_time=created)
    for t in data.trials:
        run = root / run_name(t.index)
        values: dict[Any, Any] = {by_name[k]: v for k, v in data.parameters(t).items() if k in by_name}
        values[by_name[STATUS_HPARAM]] = t.status.value
        values[by_name[METHOD_HPARAM]] = t.generation_method
        values[by_name[PARETO_HPARAM]] = t.index in data.front
        started = epoch_seconds(t.started_at or t.created_at)
        write_summary(run, hp.hparams_pb(values, trial_id=run.name, start_time_secs=started), 0, wall_time=started)
        ended = epoch_seconds(t.ended_at)
        if t.values:
            write_summary(run, _scalars(t.values), 0, wall_time=ended)
        if t.status.is_terminal:
            write_summary(run, _session_end(t.status, ended), 0, wall_time=ended)
    return {
        "experiment": name,
        "out": str(root),
        "runs": len(data.trials),
        "hparams": [h.name for h in hparams],
        "metrics": data.metrics,
    }


def _prepare(out: Path) -> Path:
    """Create `out` (and its parents); refuse a file, an unwritable place, or earlier event files."""
    if out.exists() and not out.is_dir():
        raise BadInputError(f"--out {out} is a file; --format tensorboard writes a folder",
                            "pass a new or empty folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInputError(f"cannot write --out {out}: {e.strerror}",
                            "pass a folder you can write (it is created if missing)") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise BadInputError(f"cannot write --out {out}: Permission denied",
                            "pass a folder you can write (it is created if missing)")
    if event_files(out):
        raise BadInputError(f"--out {out} already holds TensorBoard event files",
                            "pass a new or empty folder; a second export would mix with the first")
    return out.resolve()


def _hparams(data: ExportData) -> list[Any]:
    """One HParam per search-space parameter (with its domain), then the three trial descriptors."""
    from tensorboard.plugins.hparams import summary_v2 as hp

    out = []
    for name, p in data.spec.search_space.items():
        domain: Any
        if isinstance(p, IntParameter):
            domain = hp.IntInterval(int(p.low), int(p.high))
        elif isinstance(p, FloatParameter):
            domain = hp.RealInterval(float(p.low), float(p.high))
        elif isinstance(p, ChoiceParameter):
            domain = hp.Discrete(list(p.values))
        else:
            domain = hp.Discrete([p.value])
        out.append(hp.HParam(name, domain, description=_describe_parameter(p)))
    statuses = [s.value for s in TrialStatus]
    methods = sorted({t.generation_method for t in data.trials}) or ["none"]
    out += [
        hp.HParam(STATUS_HPARAM, hp.Discrete(statuses), description="the trial's state"),
        hp.HParam(METHOD_HPARAM, hp.Discrete(methods), description="how the trial was proposed"),
        hp.HParam(PARETO_HPARAM, hp.Discrete([False, True]),
                  description="on the observed Pareto front (completed, feasible, non-dominated)"),
    ]
    return out


def _describe_parameter(p: Any) -> str:
    kind = getattr(p, "type", "")
    extra = " (log scale)" if getattr(p, "log", False) else ""
    when = getattr(p, "when", None)
    return f"{kind}{extra}" + (f", active when {when}" if when else "")


def _describe_metric(data: ExportData, metric: str) -> str:
    parts = []
    objective = data.spec.objectives.get(metric)
    if objective is not None:
        parts.append(f"objective: {objective.goal}"
                     + (f", threshold {objective.threshold:g}" if objective.threshold is not None else ""))
    parts += [f"constraint: {c}" for c in data.spec.parsed_constraints if c.metric == metric]
    return "; ".join(parts) or "logged by the trials"


def _scalars(values: dict[str, float]) -> Any:
    """Metric values as TensorBoard scalars. These are 32-bit floats (about 7
    significant digits: 12,345,679 parameters show as 12,345,680): TensorBoard's
    own data server reads no other scalar type."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    return Summary(value=[Summary.Value(tag=m, simple_value=float(v)) for m, v in values.items()])


def _session_end(status: TrialStatus, ended: float | None) -> Any:
    """The HParams plugin's end-of-session record: how the trial ended."""
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    # the plugin knows success, failure, running and unknown; an early-stopped or
    # abandoned trial is "unknown" there, and `nasctl.status` says which
    code = {
        TrialStatus.COMPLETED: api_pb2.STATUS_SUCCESS,
        TrialStatus.FAILED: api_pb2.STATUS_FAILURE,
    }.get(status, api_pb2.STATUS_UNKNOWN)
    info = plugin_data_pb2.SessionEndInfo(status=code, end_time_secs=ended or 0.0)
    meta = metadata.create_summary_metadata(plugin_data_pb2.HParamsPluginData(session_end_info=info))
    return Summary(value=[Summary.Value(tag=metadata.SESSION_END_INFO_TAG, metadata=meta,
                                        tensor=metadata.NULL_TENSOR)])


__all__ = ["METHOD_HPARAM", "PARETO_HPARAM", "STATUS_HPARAM", "export_tensorboard", "run_name"]
