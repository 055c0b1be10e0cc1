"""Read views of experiments: plain dicts and lists for tables and JSON.

What `nasctl status/ls/trials/pareto` print, what `nasctl resume --dryrun`
plans, and the rows the exports, the Python API and the dashboard build on.
Nothing here writes to the store.
"""

from __future__ import annotations

import time
from typing import Any

from nasctl.errors import BadInputError
from nasctl.orchestration.attempts import segments
from nasctl.orchestration.fidelity import front_trials
from nasctl.orchestration.reach import SCHEDULER_EVENT
from nasctl.orchestration.usage import attempt_usage, experiment_usage, queued, trial_usage, usage_row
from nasctl.pareto import compute_front, exclusions
from nasctl.spec import ExperimentSpec, spec_from_dict
from nasctl.store import Store, queries
from nasctl.types import ExperimentRecord, ExperimentStatus, TrialRecord, TrialStatus


def optimizer_label(spec: ExperimentSpec) -> str:
    """The optimizer method a spec runs and why (`optimizer.method`, or what `auto` chose)."""
    from nasctl.optimizer.methods import resolve_method

    return str(resolve_method(spec))


def trial_row(t: TrialRecord, spec: ExperimentSpec, now: float | None = None) -> dict[str, Any]:
    """A trial as `nasctl trials --json` shows it: its active parameters, values,
    state, times (ISO 8601 UTC), job handle, devices, failure class and attempts.

    `duration_s` is the time its jobs ran (all attempts), `queued_s` the time they
    waited in the scheduler's queue; `queued` says that a RUNNING trial's job waits
    now (`running_since` null, `pending_reason` the scheduler's reason);
    `gpu_hours` is devices held x running time, `gpu_hours_lost` the part spent on
    attempts that failed or runs redone from the start (nasctl/orchestration/usage.py)."""
    now = time.time() if now is None else now
    use = trial_usage(t, now)
    last = t.attempts[-1] if t.attempts else {}
    live = t.status == TrialStatus.RUNNING and last.get("ended_at") is None
    duration = None
    if t.attempts and "running_since" in last:
        duration = round(use.run_s, 3) if (t.status.is_terminal or live) else None
    elif t.started_at and t.ended_at:
        duration = round((t.ended_at - t.started_at).total_seconds(), 3)
    return {
        "index": t.index,
        "status": t.status.value,
        "queued": queued(t),
        "running_since": last.get("running_since") if live else None,
        "pending_reason": last.get("pending_reason") if live and queued(t) else None,
        "parameters": spec.active_parameters(t.parameters),
        "values": t.values,
        "generation_method": t.generation_method,
        "job_handle": t.job_handle,
        "log_dir": t.log_dir,
        "started_at": t.started_at.isoformat() + "Z" if t.started_at else None,
        "ended_at": t.ended_at.isoformat() + "Z" if t.ended_at else None,
        "duration_s": duration,
        "queued_s": round(use.queued_s, 3),
        "gpu_hours": round(use.gpu_hours, 6),
        "gpu_hours_lost": round(use.lost_gpu_hours, 6),
        "restarts": sum(len(a.get("restarts") or []) for a in t.attempts),
        "failure_reason": t.failure_reason,
        "info": t.info,
        "devices": t.devices,
        "waiting_for_devices": t.status == TrialStatus.CANDIDATE and t.device_wait_since is not None,
        "fidelity": t.fidelity,
        "promoted_from": t.promoted_from,
        "failure_class": t.failure_class,
        "attempts": attempt_rows(t),
    }


ATTEMPT_KEYS = ("number", "started_at", "ended_at", "failure_class", "reason", "node", "job", "running_since",
                "pending_reason", "restarts")


def attempt_rows(t: TrialRecord, now: float | None = None) -> list[dict[str, Any]]:
    """A trial's attempts as the API shows them: {number, started_at (submitted),
    ended_at, failure_class, reason, node, job, running_since, pending_reason,
    restarts, running_s, queued_s, gpu_hours, segments (its waits and runs)},
    oldest first. A trial stored before
    attempts were recorded shows one attempt from its own times; a candidate that
    never ran, none."""
    if t.attempts:
        now = time.time() if now is None else now
        rows = []
        for a in t.attempts:
            row = {k: a.get(k) for k in ATTEMPT_KEYS}
            row["restarts"] = list(a.get("restarts") or [])
            use = attempt_usage(a, now)
            row.update(running_s=round(use.run_s, 3), queued_s=round(use.queued_s, 3),
                       gpu_hours=round(use.gpu_hours, 6), segments=segments(a, now))
            rows.append(row)
        return rows
    if t.started_at is None:
        return []
    failed = t.status in (TrialStatus.FAILED, TrialStatus.ABANDONED)
    return [{"number": 1, "started_at": t.started_at.isoformat() + "Z",
             "ended_at": t.ended_at.isoformat() + "Z" if t.ended_at else None,
             "failure_class": t.failure_class if failed else None,
             "reason": t.failure_reason if failed else None, "node": None, "job": t.job_handle}]


def _load(store: Store, name: str) -> tuple[ExperimentRecord, ExperimentSpec, list[TrialRecord]]:
    exp = store.get_experiment(name)
    spec = spec_from_dict(exp.spec)
    return exp, spec, store.list_trials(exp.id)


def pareto_view(store: Store, name: str) -> dict[str, Any]:
    """The observed Pareto front, best first by the first objective (`nasctl pareto --json`)."""
    exp, spec, trials = _load(store, name)
    done = front_trials(spec, trials)
    res = compute_front(done, spec.objectives, spec.parsed_constraints)
    by_index = {t.index: t for t in trials}
    first = list(spec.objectives)[0]
    front = sorted(res.indices, key=lambda i: by_index[i].values[first], reverse=spec.objectives[first].maximize)
    return {
        "experiment": exp.name,
        "objectives": {k: o.model_dump() for k, o in spec.objectives.items()},
        "constraints": spec.constraints,
        "reference_point": res.reference,
        "inferred_reference": res.inferred_reference,
        "hypervolume": res.hypervolume,
        "completed": len(done),
        "feasible": len(res.feasible),
        "excluded": exclusions(done, spec.objectives, spec.parsed_constraints, res.reference),
        "front": [trial_row(by_index[i], spec) for i in front],
    }


def status_view(store: Store, name: str) -> dict[str, Any]:
    """What `nasctl status NAME --json` prints."""
    exp, spec, trials = _load(store, name)
    counts = {s.value: 0 for s in TrialStatus}
    for t in trials:
        counts[t.status.value] += 1
    alive = orchestrator_alive(exp)
    done = front_trials(spec, trials)
    res = compute_front(done, spec.objectives, spec.parsed_constraints)
    now = time.time()
    rows = [trial_row(t, spec, now) for t in trials if t.status.is_terminal]
    durations = [r["duration_s"] for r in rows if r["duration_s"] is not None]
    waiting = sum(1 for t in trials if queued(t))
    use = experiment_usage(trials, now)
    status = exp.status.value
    if exp.status == ExperimentStatus.RUNNING and not alive:
        status = "NOT_RUNNING"  # recorded RUNNING, but no orchestrator drives it (killed): resume it
    return {
        "name": exp.name,
        "status": status,
        "recorded_status": exp.status.value,
        "status_reason": exp.status_reason,
        "created_at": exp.created_at.isoformat() + "Z",
        "updated_at": exp.updated_at.isoformat() + "Z",
        "work_dir": exp.work_dir,
        "database": store.display_url,
        "scheduler": spec.runner.scheduler,
        "objectives": {k: o.model_dump() for k, o in spec.objectives.items()},
        "constraints": spec.constraints,
        "budget": spec.budget.model_dump(),
        "optimizer": optimizer_label(spec),
        "log_scale": queries.log_scale_metrics(store, exp.id),
        "trials": counts,
        "queued": waiting,
        "running": counts[TrialStatus.RUNNING.value] - waiting,
        "usage": usage_row(use),
        "gpu_hours": round(use.gpu_hours, 6),
        "hypervolume": res.hypervolume,
        "pareto_size": len(res.indices),
        "mean_trial_seconds": round(sum(durations) / len(durations), 3) if durations else None,
        "early_stopping": early_stopping_view(store, exp, spec, trials),
        "lease_owner": exp.lease_owner,
        "orchestrator_alive": alive,
        "waiting_for_devices": sum(1 for t in trials if t.status == TrialStatus.CANDIDATE
                                   and t.device_wait_since is not None) if alive else 0,
        "devices": {str(t.index): t.devices for t in trials if t.status == TrialStatus.RUNNING and t.devices},
        "scheduler_unreachable": scheduler_unreachable(store, exp, alive),
    }


def scheduler_unreachable(store: Store, exp: ExperimentRecord, alive: bool | None = None) -> dict[str, Any] | None:
    """While a live orchestrator cannot reach the experiment's scheduler: since when
    (`since`, ISO UTC), which scheduler and the last error; else None. Read from the
    outage events of nasctl/orchestration/reach.py."""
    if exp.status != ExperimentStatus.RUNNING or not (orchestrator_alive(exp) if alive is None else alive):
        return None
    last = store.events(exp.id, after_id=0, limit=1, newest=True, kinds=[SCHEDULER_EVENT])
    data = (last[0].data or {}) if last else {}
    since = data.get("unreachable_since")
    if not since:
        return None
    return {"since": str(since) + "Z", "scheduler": data.get("scheduler"), "error": data.get("error")}


def orchestrator_alive(exp: ExperimentRecord) -> bool:
    """Is some orchestrator driving the experiment now (lease held, heartbeat fresh, process alive)?"""
    from nasctl.leases import LEASE_STALE_SECONDS, lease_stale

    return not lease_stale(exp.lease_owner, exp.lease_heartbeat, LEASE_STALE_SECONDS)


def list_view(store: Store) -> list[dict[str, Any]]:
    """Every experiment with its trial counts, newest first (`nasctl ls --json`)."""
    out = []
    for exp, counts in store.list_experiments():
        spec = exp.spec
        out.append(
            {
                "name": exp.name,
                "status": exp.status.value,
                "trials": counts,
                "max_trials": spec.get("budget", {}).get("max_trials"),
                "objectives": list(spec.get("objectives", {})),
                "created_at": exp.created_at.isoformat() + "Z",
            }
        )
    return out


def trials_view(store: Store, name: str, status: str | None = None) -> list[dict[str, Any]]:
    """Every trial (or those in one state) with its note (`nasctl trials --json`).

    Raises:
        BadInputError: `status` is not a trial status.
    """
    exp, spec, trials = _load(store, name)
    if status:
        try:
            wanted = TrialStatus(status.upper())
        except ValueError:
            raise BadInputError(
                f"--status {status!r} is not a trial status", f"use one of: {', '.join(s.value for s in TrialStatus)}"
            ) from None
        trials = [t for t in trials if t.status == wanted]
    return _with_notes(store, exp, [trial_row(t, spec) for t in trials])


def _with_notes(store: Store, exp: ExperimentRecord, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each trial row with its note (markdown), or None."""
    from nasctl.store.manage import trial_notes

    notes = trial_notes(store, exp.id)
    for r in rows:
        r["note"] = notes.get(r["index"])
    return rows


def trial_detail(store: Store, name: str, index: int) -> dict[str, Any]:
    """One trial with its note, log tail and learning curves (`nasctl trials NAME INDEX --json`)."""
    exp, spec, _ = _load(store, name)
    t = store.get_trial(exp.id, index)
    row = trial_row(t, spec)
    row["log_tail"] = t.log_tail
    row["note"] = note_text(store, exp.id, index)
    curves: dict[str, list[tuple[int, float]]] = {}
    for o in store.observations(t.id):
        curves.setdefault(o.metric, []).append((o.step, o.value))
    row["curves"] = curves
    return row


def note_text(store: Store, experiment_id: int, trial_index: int | None) -> str | None:
    from nasctl.store.manage import get_note

    note = get_note(store, experiment_id, trial_index)
    return note.text if note else None


def pareto_indices(spec: ExperimentSpec, trials: list[TrialRecord]) -> set[int]:
    """Indices of the trials on the observed Pareto front (completed, feasible,
    non-dominated; with `optimizer.fidelity`, among the trials `front_trials` keeps)."""
    return set(compute_front(front_trials(spec, trials), spec.objectives, spec.parsed_constraints).indices)


def early_stop_records(store: Store, exp: ExperimentRecord, trials: list[TrialRecord]) -> dict[int, dict[str, Any]]:
    """The recorded stop decision of every EARLY_STOPPED trial, by trial index."""
    from nasctl.orchestration.early_stopping import EARLY_STOPPED_EVENT, stop_records

    stopped = [t.index for t in trials if t.status == TrialStatus.EARLY_STOPPED]
    if not stopped:
        return {}
    return stop_records(store.events(exp.id, limit=1_000_000, kinds=[EARLY_STOPPED_EVENT]), stopped)


def _watched(spec: ExperimentSpec, records: dict[int, dict[str, Any]]) -> str | None:
    """The metric early stopping watches: the spec's, else the one the latest stop was decided on."""
    if spec.early_stopping is not None and spec.early_stopping.metric:
        return spec.early_stopping.metric
    metrics = [str(r["metric"]) for _, r in sorted(records.items()) if r.get("metric")]
    return metrics[-1] if metrics else None


def early_stopping_view(store: Store, exp: ExperimentRecord, spec: ExperimentSpec,
                        trials: list[TrialRecord]) -> dict[str, Any] | None:
    """Trials stopped early and the estimated trial time saved (None without early stopping)."""
    from nasctl.orchestration.early_stopping import seconds_saved

    records = early_stop_records(store, exp, trials)
    stopped = [t.index for t in trials if t.status == TrialStatus.EARLY_STOPPED]
    if spec.early_stopping is None and not stopped:
        return None
    return {
        "metric": _watched(spec, records),
        "trials_stopped": len(stopped),
        "seconds_saved": round(seconds_saved(records), 1),
        "stopped": stopped,
    }


def resume_plan(store: Store, name: str) -> dict[str, Any]:
    """What `nasctl resume` would do, without doing it."""
    exp, spec, trials = _load(store, name)
    by = {s.value: [t.index for t in trials if t.status == s] for s in TrialStatus}
    return {
        "experiment": name,
        "status": exp.status.value,
        "orchestrator": exp.lease_owner,
        "reattach_running": by["RUNNING"],
        "recorded_candidates": by["CANDIDATE"],
        "finished": len(trials) - len(by["RUNNING"]) - len(by["CANDIDATE"]),
        "new_trials_to_propose": max(0, spec.budget.max_trials - len(trials)),
        "max_trials": spec.budget.max_trials,
    }
