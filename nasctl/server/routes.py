"""What `nasctl serve` adds to the dashboard's API: submission, resume, health, metrics.

- `POST /api/experiments` (token): `{"spec": YAML text, "spec_dir": folder the
  spec's relative paths resolve in, on the server, "name"?, "max_trials"?}`.
  201 with the queued experiment; 400 for a spec that `nasctl run` would refuse
  (same one-line message), 409 for a name in use.
- `POST /api/experiments/{name}/resume` (token): queue a stopped or failed one.
- `GET /api/service`: the service's host, pid, role, database, slots, driven
  experiments, and the active service (itself, or the one a standby waits for).
- `GET /healthz`: 200 while the supervisor ticks and the database answers, else
  503; says the role (`active` or `standby`) and the active service's URL.
- `GET /metrics`: Prometheus text format (see `metrics_text`).

A standby answers every write (any of the above, and the dashboard's stop,
cancel, notes, rename, delete) with 503 and the active service's URL
(`create_service_app`).
"""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime, timezone
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from nasctl.errors import BadInputError, LeaseError, NasctlError
from nasctl.leases import LeaseOwner
from nasctl.orchestration import views
from nasctl.orchestration.usage import experiment_usage, queued
from nasctl.server.supervisor import Supervisor
from nasctl.spec import apply_overrides, parse_spec_in, spec_changes
from nasctl.store import queries
from nasctl.types import ExperimentRecord, ExperimentStatus, TrialStatus
from nasctl.errors import ConflictError
from nasctl.web.api import WRITE_RESPONSES, ErrorBody, require_token
from nasctl.web.app import _status_of

router = APIRouter()


def supervisor(request: Request) -> Supervisor:
    return request.app.state.supervisor  # type: ignore[no-any-return]


@router.post("/api/experiments", status_code=201, summary="Submit an experiment spec to the service (token)",
             responses={**WRITE_RESPONSES, 400: {"model": ErrorBody, "description": "the spec cannot run"}})
def submit(
    request: Request,
    body: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header()] = None,
    x_nasctl_token: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    require_token(request, authorization, x_nasctl_token)
    text, folder = body.get("spec"), body.get("spec_dir") or os.getcwd()
    if not isinstance(text, str) or not isinstance(folder, str):
        raise BadInputError("the body needs \"spec\": the spec's YAML text (and \"spec_dir\": a folder)",
                            "use `nasctl submit SPEC.yaml --server URL`")
    if not os.path.isdir(folder):
        raise BadInputError(f"spec_dir {folder} is not a folder on the server",
                            "submit from a folder the server's machine also has, or use absolute paths")
    source = str(body.get("source") or "submitted spec")
    budget = {"max_trials": body["max_trials"]} if body.get("max_trials") is not None else {}
    changes = spec_changes(body.get("name") or None, **budget)
    spec = apply_overrides(parse_spec_in(text, folder, source=source), changes, folder=folder, source=source)
    try:
        exp = supervisor(request).submit(spec)
    except LeaseError as e:  # stopping (a standby's writes never get here)
        raise ConflictError(e.message, e.hint) from None
    return {"name": exp.name, "status": exp.status.value, "work_dir": exp.work_dir}


@router.post("/api/experiments/{name}/resume", summary="Queue a stopped or failed experiment again (token)",
             responses=WRITE_RESPONSES)
def resume(
    request: Request,
    name: str,
    authorization: Annotated[str | None, Header()] = None,
    x_nasctl_token: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    require_token(request, authorization, x_nasctl_token)
    try:
        exp = supervisor(request).requeue(name)
    except LeaseError as e:
        raise ConflictError(e.message, e.hint) from None
    return {"name": exp.name, "status": exp.status.value}


@router.get("/api/service", summary="The service: host, pid, role, database, slots and what it drives")
def service_info(request: Request) -> dict[str, Any]:
    sup = supervisor(request)
    return {"host": socket.gethostname(), "pid": os.getpid(), "owner": sup.owner, "role": sup.role,
            "active_service": _active_view(sup), "database": sup.store.display_url,
            "max_experiments": sup.max_experiments, "driven": sup.driven(), "work_root": sup.work_root,
            "started_at": _iso(sup.started_at), "active_since": _iso(sup.active_since)}


@router.get("/healthz", summary="200 while the service ticks and its database answers; its role", include_in_schema=True)
def healthz(request: Request) -> JSONResponse:
    sup = supervisor(request)
    try:
        sup.store.service_lease()
    except NasctlError as e:
        return JSONResponse({"status": "unhealthy", "role": sup.role, "error": e.message}, status_code=_status_of(e))
    if not sup.healthy:
        return JSONResponse({"status": "unhealthy", "role": sup.role, "error": "the supervisor is not running"},
                            status_code=503)
    active = _active_view(sup)
    return JSONResponse({"status": "ok", "role": sup.role, "active": active["url"] if active else None,
                         "driven": len(sup.driven())})


def _active_view(sup: Supervisor) -> dict[str, Any] | None:
    """The active service as this one last read the lease (None: no service holds it)."""
    lease = sup.active_lease
    if lease is None:
        return None
    holder = LeaseOwner.parse(lease.owner)
    return {"url": lease.url, "host": holder.host, "pid": holder.pid, "owner": lease.owner,
            "heartbeat": lease.heartbeat.replace(tzinfo=timezone.utc).isoformat()}


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat()


@router.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
def metrics(request: Request) -> PlainTextResponse:
    return PlainTextResponse(metrics_text(supervisor(request)), media_type="text/plain; version=0.0.4")


def metrics_text(sup: Supervisor) -> str:
    """The service's state in Prometheus text exposition format 0.0.4."""
    experiments = sup.store.list_experiments()
    by_state = {s.value: 0 for s in ExperimentStatus}
    trials = {s.value: 0 for s in TrialStatus}
    driven = set(sup.driven())
    active = []
    for exp, counts in experiments:
        by_state[exp.status.value] += 1
        for k, n in counts.items():
            trials[k] = trials.get(k, 0) + n
        if exp.status in (ExperimentStatus.RUNNING, ExperimentStatus.QUEUED) or exp.name in driven:
            active.append(exp.id)
    durations = queries.completed_durations(sup.store, active)
    proposals = sup.generation_seconds()
    leases = sup.store.device_leases()
    lines = [
        "# HELP nasctl_experiments Experiments in the database by state.",
        "# TYPE nasctl_experiments gauge",
        *[f'nasctl_experiments{{state="{k}"}} {v}' for k, v in by_state.items()],
        "# HELP nasctl_trials Trials in the database by state.",
        "# TYPE nasctl_trials gauge",
        *[f'nasctl_trials{{state="{k}"}} {v}' for k, v in trials.items()],
        "# HELP nasctl_service_active 1 while this service holds the lease and drives, 0 while it is a standby.",
        "# TYPE nasctl_service_active gauge",
        f"nasctl_service_active {int(sup.active)}",
        "# HELP nasctl_driven_experiments Experiments this service drives now.",
        "# TYPE nasctl_driven_experiments gauge",
        f"nasctl_driven_experiments {len(sup.driven())}",
        "# HELP nasctl_proposal_seconds Seconds of each proposal since the service started.",
        "# TYPE nasctl_proposal_seconds summary",
        *_quantiles("nasctl_proposal_seconds", proposals),
        "# HELP nasctl_trial_duration_seconds Submission to end of completed trials of active experiments.",
        "# TYPE nasctl_trial_duration_seconds summary",
        *_quantiles("nasctl_trial_duration_seconds", durations),
        "# HELP nasctl_devices_busy Devices (GPUs) leased to running trials, by host.",
        "# TYPE nasctl_devices_busy gauge",
        *[f'nasctl_devices_busy{{host="{_label(h)}"}} {n}' for h, n in _busy(leases).items()],
        "# HELP nasctl_scheduler_unreachable_since_seconds When the scheduler of a running experiment stopped "
        "answering (Unix time); absent while it answers.",
        "# TYPE nasctl_scheduler_unreachable_since_seconds gauge",
        *_unreachable(sup, [exp for exp, _ in experiments]),
        "# HELP nasctl_trials_queued RUNNING trials of an active experiment whose jobs wait in the scheduler's queue.",
        "# TYPE nasctl_trials_queued gauge",
        "# HELP nasctl_gpu_hours Device-hours (GPUs held x running time) of an active experiment; "
        "part=lost: attempts that failed or runs redone.",
        "# TYPE nasctl_gpu_hours gauge",
        *_usage(sup, [exp for exp, _ in experiments if exp.id in active]),
        "# HELP nasctl_service_start_time_seconds When this service started (Unix time).",
        "# TYPE nasctl_service_start_time_seconds gauge",
        f"nasctl_service_start_time_seconds {sup.started_at:.3f}",
    ]
    return "\n".join(lines) + "\n"


def _quantiles(name: str, values: list[float]) -> list[str]:
    """Nearest-rank median and p95 over the raw values, with sum and count."""
    out = []
    if values:
        ordered = sorted(values)
        for q in (0.5, 0.95):
            out.append(f'{name}{{quantile="{q}"}} {ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.6g}')
    out += [f"{name}_sum {sum(values):.6g}", f"{name}_count {len(values)}"]
    return out


def _usage(sup: Supervisor, experiments: list[ExperimentRecord]) -> list[str]:
    """Queued trials and GPU-hours of each active experiment."""
    out = []
    now = time.time()
    for exp in experiments:
        trials = sup.store.list_trials(exp.id)
        use = experiment_usage(trials, now)
        name = _label(exp.name)
        out += [f'nasctl_trials_queued{{experiment="{name}"}} {sum(1 for t in trials if queued(t))}',
                f'nasctl_gpu_hours{{experiment="{name}",part="total"}} {use.gpu_hours:.6g}',
                f'nasctl_gpu_hours{{experiment="{name}",part="lost"}} {use.lost_gpu_hours:.6g}']
    return out


def _unreachable(sup: Supervisor, experiments: list[ExperimentRecord]) -> list[str]:
    out = []
    for exp in experiments:
        u = views.scheduler_unreachable(sup.store, exp)
        if u is not None:
            since = datetime.fromisoformat(u["since"].rstrip("Z")).replace(tzinfo=timezone.utc).timestamp()
            out.append(f'nasctl_scheduler_unreachable_since_seconds{{experiment="{_label(exp.name)}",'
                       f'scheduler="{_label(str(u["scheduler"]))}"}} {since:.0f}')
    return out


def _busy(leases: list[Any]) -> dict[str, int]:
    hosts: dict[str, set[str]] = {}
    for lease in leases:
        if lease.trial_status is not None and not lease.trial_status.is_terminal:
            hosts.setdefault(lease.host, set()).add(lease.device)
    return {h: len(d) for h, d in hosts.items()}


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

