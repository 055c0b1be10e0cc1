"""Every trial of an experiment as one table: `nasctl export --format json|csv`
and the Python API's `Experiment.trials_dataframe()`.

All three take their rows from `ExportData.rows()` (what `nasctl trials --json`
shows, plus the Pareto flag and the note) and their metric columns from
`ExportData.metrics`, so they agree on every value and on the column order.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from nasctl.errors import BadInputError
from nasctl.exports import ExportData, load_export
from nasctl.orchestration.views import note_text, status_view
from nasctl.store import Store

if TYPE_CHECKING:
    import pandas as pd

def export_text(store: Store, name: str, fmt: str) -> str:
    """All trials of an experiment as JSON (with the experiment's status and
    spec) or CSV (one row per trial), each with its Pareto flag (`pareto`: on
    the observed front).

    Raises:
        NotFoundError: no such experiment.
        BadInputError: a format other than json or csv.
    """
    data = load_export(store, name)
    if fmt == "json":
        return json_text(store, data)
    if fmt == "csv":
        return csv_text(data)
    raise BadInputError(f"--format {fmt!r} is not supported", "use json or csv")


def json_text(store: Store, data: ExportData) -> str:
    """The experiment (`nasctl status --json` and its note), its spec and its trials' rows."""
    exp = data.experiment
    summary = {**status_view(store, exp.name), "note": note_text(store, exp.id, None)}
    return json.dumps({"experiment": summary, "spec": exp.spec, "trials": data.rows()}, indent=2)


def csv_text(data: ExportData) -> str:
    """One row per trial: index, state, method, every parameter (with
    `optimizer.fidelity`, the fidelity parameter too), every metric, the Pareto
    flag, duration (running time), queue wait, GPU-hours (and the part lost),
    restarts, devices, failure reason and class, attempts (how many times it ran)
    and note; with `optimizer.fidelity`,
    also the fidelity and the trial a promotion continued. Missing values are
    empty cells."""
    fid = data.spec.optimizer.fidelity
    pnames = list(data.spec.search_space) + ([fid.parameter] if fid is not None else [])
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["index", "status", "generation_method", *pnames, *data.metrics, "pareto", "duration_s",
                "queued_s", "gpu_hours", "gpu_hours_lost", "restarts", "devices",
                "failure_reason", "failure_class", "attempts", "note",
                *(["fidelity", "promoted_from"] if fid is not None else [])])
    for r in data.rows():
        w.writerow(
            [r["index"], r["status"], r["generation_method"]]
            + [r["parameters"].get(p, "") for p in pnames]
            + [r["values"].get(m, "") for m in data.metrics]
            + [str(r["pareto"]).lower(), r["duration_s"] if r["duration_s"] is not None else "",
               r["queued_s"], r["gpu_hours"], r["gpu_hours_lost"], r["restarts"],
               ",".join(r["devices"] or []), r["failure_reason"] or "", r["failure_class"] or "",
               len(r["attempts"]), r["note"] or ""]
            + ([r["fidelity"], "" if r["promoted_from"] is None else r["promoted_from"]] if fid is not None else [])
        )
    return buf.getvalue()


def trials_frame(data: ExportData) -> pd.DataFrame:
    """One row per trial, indexed by trial number (`trial`), with columns
    `status`, `method`, `params.<name>` for every search-space parameter,
    `metrics.<name>` for every metric, `pareto`, `started_at`, `ended_at`
    (UTC), `duration_s` (running time), `queued_s`, `gpu_hours`, `gpu_hours_lost`,
    `restarts`, `failure_reason`, `failure_class`, `attempts` (how
    many times it ran) and `note`; with
    `optimizer.fidelity`, also `fidelity` and `promoted_from`. A value a trial
    does not have is missing (NaN/None)."""
    import pandas as pd

    pnames = list(data.spec.search_space)
    rows = []
    for t, r in zip(data.trials, data.rows()):
        rows.append({
            "trial": t.index,
            "status": t.status.value,
            "method": t.generation_method,
            **{f"params.{p}": r["parameters"].get(p) for p in pnames},
            **{f"metrics.{m}": t.values.get(m, float("nan")) for m in data.metrics},
            "pareto": r["pareto"],
            "started_at": _utc(t.started_at),
            "ended_at": _utc(t.ended_at),
            "duration_s": r["duration_s"],
            "queued_s": r["queued_s"],
            "gpu_hours": r["gpu_hours"],
            "gpu_hours_lost": r["gpu_hours_lost"],
            "restarts": r["restarts"],
            "failure_reason": t.failure_reason,
            "failure_class": t.failure_class,
            "attempts": len(r["attempts"]),
            "note": r["note"],
            "fidelity": t.fidelity,
            "promoted_from": t.promoted_from,
        })
    fid = ["fidelity", "promoted_from"] if data.spec.optimizer.fidelity is not None else []
    columns = ["trial", "status", "method", *(f"params.{p}" for p in pnames),
               *(f"metrics.{m}" for m in data.metrics), "pareto", "started_at", "ended_at", "duration_s",
               "queued_s", "gpu_hours", "gpu_hours_lost", "restarts", "failure_reason", "failure_class", "attempts", "note", *fid]
    frame = pd.DataFrame(rows, columns=columns)
    for col in ("started_at", "ended_at"):
        frame[col] = pd.to_datetime(frame[col], utc=True)
    frame["duration_s"] = frame["duration_s"].astype("float64")
    frame["pareto"] = frame["pareto"].astype(bool)
    return frame.set_index("trial")


def _utc(ts: datetime | None) -> datetime | None:
    return None if ts is None else ts.replace(tzinfo=timezone.utc)
