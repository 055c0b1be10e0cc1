"""The one place records and analyses become JSON-ready dicts for the API (and the report).

Contract: everything returned is made of dict, list, str, int, float (finite),
bool and None; times are ISO 8601 UTC strings ending in "Z". User-supplied
strings are passed through as data: the pages insert them as text, never as
markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from nasctl.orchestration.views import optimizer_label, trial_row
from nasctl.spec import ExperimentSpec
from nasctl.store.queries import TrialPage
from nasctl.types import EventRecord, Note, TrialRecord, TrialStatus
from nasctl.web.analysis import ExperimentAnalysis

TERMINAL = {s.value for s in TrialStatus if s.is_terminal}


def iso(t: datetime | None) -> str | None:
    return t.isoformat() + "Z" if t else None


def num(v: Any) -> float | None:
    """A finite float, or None (JSON has no NaN or infinity)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def objectives(spec: ExperimentSpec) -> list[dict[str, Any]]:
    return [
        {"name": n, "goal": o.goal, "threshold": num(o.threshold), "value": o.value} for n, o in spec.objectives.items()
    ]


def experiment_summary(a: ExperimentAnalysis) -> dict[str, Any]:
    """Status, progress, counts by state, objectives, reference point and hypervolume."""
    e, spec = a.experiment, a.spec
    finished = sum(n for s, n in a.counts.items() if s in TERMINAL)
    return {
        "name": e.name,
        "status": e.status.value,
        "status_reason": e.status_reason,
        "created_at": iso(e.created_at),
        "updated_at": iso(e.updated_at),
        "work_dir": e.work_dir,
        "scheduler": spec.runner.scheduler,
        "objectives": objectives(spec),
        "constraints": list(spec.constraints),
        "metrics": a.metrics,
        "parameters": list(spec.search_space),
        "budget": spec.budget.model_dump(),
        "optimizer": optimizer_label(spec),
        "initial_trials": spec.initial_trials,
        "log_scale": a.log_scale,
        "trials": dict(a.counts),
        "total_trials": len(a.indices),
        "finished_trials": finished,
        "progress": min(1.0, finished / spec.budget.max_trials) if spec.budget.max_trials else None,
        "hypervolume": num(a.front.hypervolume),
        "reference_point": {k: num(v) for k, v in a.front.reference.items()},
        "inferred_reference": list(a.front.inferred_reference),
        "pareto_size": len(a.front.indices),
        "feasible": len(a.front.feasible),
        "early_stopping": None if spec.early_stopping is None and not a.counts.get(TrialStatus.EARLY_STOPPED.value)
        else {"metric": spec.early_stopping.metric if spec.early_stopping else None, "trials_stopped": a.counts.get(TrialStatus.EARLY_STOPPED.value, 0),
              "seconds_saved": num(round(a.seconds_saved, 1))},
        "lease_owner": e.lease_owner,
        "cursor": a.cursor,
    }


def experiment_list_item(a: ExperimentAnalysis) -> dict[str, Any]:
    s = experiment_summary(a)
    keys = ("name", "status", "created_at", "updated_at", "objectives", "trials", "total_trials",
            "finished_trials", "progress", "hypervolume", "pareto_size", "budget")
    return {k: s[k] for k in keys}


def points(a: ExperimentAnalysis) -> dict[str, Any]:
    """Every trial as columns, with its category for the Pareto plot.

    `category[k]` is "front" (non-dominated among feasible completed trials, over
    all objectives), "dominated", "infeasible" (completed but violating a
    constraint or beyond an objective's threshold), "early_stopped" (stopped on
    its learning curve; its values are partial), "failed" (failed or abandoned),
    or "pending" (candidate or running).
    """
    front = set(a.front.indices)
    feasible = set(a.front.feasible)
    category = []
    for i, st in zip(a.indices, a.statuses):
        if st == TrialStatus.COMPLETED.value:
            category.append("front" if i in front else "dominated" if i in feasible else "infeasible")
        elif st == TrialStatus.EARLY_STOPPED.value:
            category.append("early_stopped")
        elif st in TERMINAL:
            category.append("failed")
        else:
            category.append("pending")
    return {
        "cursor": a.cursor,
        "index": a.indices,
        "status": a.statuses,
        "category": category,
        "values": a.values,
        "objectives": objectives(a.spec),
        "reference_point": {k: num(v) for k, v in a.front.reference.items()},
        "front": sorted(front),
    }


def hypervolume_trace(a: ExperimentAnalysis, from_index: int | None = None) -> dict[str, Any]:
    """Hypervolume after each completed trial (trial-index order; sampled to at most
    `analysis.HISTORY_POINTS` exact values on large experiments), from `from_index` on."""
    rows = [(i, h) for i, h in a.hv_history if from_index is None or i >= from_index]
    return {"trial_index": [i for i, _ in rows], "hypervolume": [num(h) for _, h in rows]}


def trial_summary(t: TrialRecord, spec: ExperimentSpec) -> dict[str, Any]:
    """A trial as a table row: the CLI's `trial_row` with finite numbers only."""
    row = trial_row(t, spec)
    row.pop("info", None)  # tables stay light; the trial page has it
    row["values"] = {k: num(v) for k, v in row["values"].items()}
    row["created_at"] = iso(t.created_at)
    return row


def trial_page(page: TrialPage, spec: ExperimentSpec, offset: int, limit: int) -> dict[str, Any]:
    return {
        "total": page.total,
        "offset": offset,
        "limit": limit,
        "trials": [trial_summary(t, spec) for t in page.trials],
    }


def event(e: EventRecord) -> dict[str, Any]:
    return {"id": e.id, "time": iso(e.time), "kind": e.kind, "message": e.message, "trial_index": e.trial_index}


def trial_detail(
    t: TrialRecord, spec: ExperimentSpec, curves: dict[str, list[tuple[int, float]]], events: Sequence[EventRecord]
) -> dict[str, Any]:
    """Everything the trial page shows: parameters, values, curves, timeline, job handle."""
    row = trial_summary(t, spec)
    row.update(
        {
            "job_name": t.job_name,
            "scheduler": t.scheduler,
            "log_tail": t.log_tail,
            "info": _json_safe(t.info) if t.info is not None else None,
            "runner_metadata": {k: v for k, v in t.runner_metadata.items() if isinstance(v, (str, int, float, bool))},
            "curves": {m: {"step": [s for s, _ in pts], "value": [num(v) for _, v in pts]} for m, pts in curves.items()},
            "timeline": [event(e) for e in events],
            "objectives": objectives(spec),
            "terminal": t.status.is_terminal,
        }
    )
    return row


def parallel(a: ExperimentAnalysis, params: dict[int, dict[str, Any]], chosen: Sequence[int]) -> dict[str, Any]:
    """Parameters and metric values of the chosen completed trials, as columns."""
    pos = {i: k for k, i in enumerate(a.indices)}
    names = list(a.spec.search_space)
    front = set(a.front.indices)
    cols: dict[str, list[Any]] = {n: [] for n in names}
    for i in chosen:
        p = params.get(i, {})
        for n in names:
            v = p.get(n)
            cols[n].append(v if isinstance(v, (str, bool)) or v is None else num(v))
    return {
        "index": list(chosen),
        "pareto": [i in front for i in chosen],
        "parameters": cols,
        "values": {m: [a.values[m][pos[i]] for i in chosen] for m in a.metrics},
        "objectives": objectives(a.spec),
        "total_completed": sum(1 for s in a.statuses if s == TrialStatus.COMPLETED.value),
    }


def diagnostics(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """The JSON of a leave-one-out cross-validation (`loo_cross_validation`'s result)."""
    return {
        "experiment": name,
        "trials_used": result["trials_used"],
        "model": result["model"],
        "log_scale": result["log_scale"],
        "metrics": {
            m: [{k: num(v) if k != "trial_index" else v for k, v in r.items()} for r in rows]
            for m, rows in result["metrics"].items()
        },
    }


def note(n: Note | None) -> dict[str, Any]:
    """A note as the API shows it: its markdown (`text`, None without a note) and when it was edited."""
    return {"text": n.text if n else None, "updated_at": iso(n.updated_at) if n else None}


def _json_safe(v: Any) -> Any:
    """A stored trial info with non-finite floats as null (the API emits strict JSON)."""
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_safe(x) for x in v]
    if isinstance(v, float):
        return num(v)
    return v
