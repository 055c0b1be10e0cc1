"""The JSON API under /api: read endpoints for every page, and two token-guarded writes.

Every handler calls store, queries, orchestration or analysis functions and
returns `serializers` output. Errors are raised as nasctl errors and become
JSON in `nasctl.web.app` (404 not found, 400 bad input, 401/403 auth, 409
conflict, 503 storage).
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Path, Query, Request, Response
from pydantic import BaseModel

from nasctl import __version__
from nasctl.errors import BadInputError, ConflictError, NasctlError, NotFoundError
from nasctl.spec import ChoiceParameter, spec_from_dict
from nasctl.store import Store
from nasctl.store import manage as store_manage
from nasctl.store import queries, requests
from nasctl.types import TrialStatus
from nasctl.orchestration import control, views
from nasctl.web import logs, serializers
from nasctl.web.analysis import AnalysisCache, ExperimentAnalysis, UsageCache, parallel_sample
from nasctl.web.insights import parse_filters


log = logging.getLogger("nasctl.web")


class AuthError(NasctlError):
    """A write was attempted without the right token (401), or on a read-only dashboard (403)."""

    def __init__(self, message: str, hint: str | None = None, status_code: int = 401) -> None:
        super().__init__(message, hint)
        self.status_code = status_code


#: At most this many trials go into the parallel-coordinates plot (front first).
PARALLEL_DEFAULT = 2000
PARALLEL_MAX = 20000


class WebState:
    """What the handlers share: the store, the analysis cache, the token, the diagnostics cache."""

    def __init__(self, store: Store, token: str | None) -> None:
        self.store = store
        self.token = token
        self.cache = AnalysisCache(store)
        self.usage = UsageCache(store)
        self.diag_lock = threading.Lock()
        # name -> (cursor, the diagnostics or the error computing them raised)
        self.diagnostics: dict[str, tuple[int, dict[str, Any] | NasctlError]] = {}
        self.diag_running: dict[str, int] = {}  # name -> cursor being computed in the background
        self.diag_stage: dict[str, tuple[str, float]] = {}  # name -> (what it is doing, when it started: monotonic)

    def forget(self, name: str) -> None:
        """Drop what is cached for experiment `name` (renamed or deleted)."""
        self.cache.forget(name)
        with self.diag_lock:
            self.diagnostics.pop(name, None)


def state(request: Request) -> WebState:
    return request.app.state.nasctl  # type: ignore[no-any-return]


def require_token(request: Request, authorization: str | None, x_nasctl_token: str | None) -> None:
    """Raise unless the dashboard has a token and the request carries it.

    The token comes as `Authorization: Bearer TOKEN` or `X-Nasctl-Token: TOKEN`.
    """
    expected = state(request).token
    if not expected:
        raise AuthError(
            "this dashboard is read-only",
            "start it with --token TOKEN (`nasctl web`: or NASCTL_WEB_TOKEN; `nasctl serve`: or NASCTL_TOKEN) "
            "to allow stop, cancel, notes, rename and delete",
            status_code=403,
        )
    given = x_nasctl_token or ""
    if authorization and authorization.lower().startswith("bearer "):
        given = authorization[7:].strip()
    if not given or not hmac.compare_digest(given.encode(), expected.encode()):
        raise AuthError("missing or wrong token", "send it as `Authorization: Bearer TOKEN`")


class ErrorBody(BaseModel):
    """Every error answer: what was wrong and what to do."""

    error: str
    hint: str | None = None


router = APIRouter(
    prefix="/api",
    responses={
        400: {"model": ErrorBody, "description": "bad input (unknown sort key, malformed filter, path outside work_dir)"},
        404: {"model": ErrorBody, "description": "no such experiment, trial or log"},
        503: {"model": ErrorBody, "description": "the database cannot be reached"},
    },
)
WRITE_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "missing or wrong token"},
    403: {"model": ErrorBody, "description": "the dashboard is read-only (started without a token)"},
    409: {"model": ErrorBody, "description": "the experiment or trial is already finished"},
}

Name = Annotated[str, "experiment name"]


@router.get("/info", summary="Dashboard information")
def info(request: Request) -> dict[str, Any]:
    """Version, whether writes (stop, cancel, notes, rename, delete) are enabled, and whether
    this is `nasctl serve` (which can also resume experiments)."""
    st = state(request)
    # `nasctl serve` (nasctl.server.create_service_app) puts its supervisor on this app and
    # adds its routes (submit, resume): pages offer resume only there
    service = getattr(request.app.state, "supervisor", None) is not None
    return {"version": __version__, "read_only": not st.token, "database": st.store.display_url, "service": service}


@router.get("/experiments", summary="Experiments with status, progress, counts and hypervolume")
def experiments(request: Request) -> dict[str, Any]:
    st = state(request)
    analyses = st.cache.get_many([exp for exp, _ in st.store.list_experiments()])
    return {"experiments": [serializers.experiment_list_item(a) for a in analyses]}


@router.get("/experiments/{name}", summary="One experiment's summary")
def experiment(request: Request, name: Name) -> dict[str, Any]:
    """With the experiment's note (markdown) as `note`."""
    st = state(request)
    a = st.cache.get(name)
    note = store_manage.get_note(st.store, a.experiment.id)
    return {**serializers.experiment_summary(a), **st.usage.summary(a.experiment), "note": serializers.note(note),
            "scheduler_unreachable": views.scheduler_unreachable(st.store, a.experiment)}


@router.get("/experiments/{name}/points", summary="Every trial's values and Pareto category, as columns")
def points(request: Request, name: Name) -> dict[str, Any]:
    return serializers.points(state(request).cache.get(name))


@router.get("/experiments/{name}/hypervolume", summary="Hypervolume after each completed trial (sampled on large experiments)")
def hypervolume(
    request: Request, name: Name, from_index: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None
) -> dict[str, Any]:
    return serializers.hypervolume_trace(state(request).cache.get(name), from_index)


def _sort_key(a: ExperimentAnalysis, sort: str, desc: bool) -> queries.SortKey:
    if sort in queries.SORT_COLUMNS:
        return queries.SortKey(sort, "column", desc)
    kind, _, field = sort.partition(".")
    if kind == "values" and field in a.metrics:
        return queries.SortKey(field, "value", desc, True)
    if kind == "parameters" and field in a.spec.search_space:
        p = a.spec.search_space[field]
        numeric = not (isinstance(p, ChoiceParameter) and p.value_type == "str")
        return queries.SortKey(field, "parameter", desc, numeric)
    raise BadInputError(
        f"cannot sort by {sort!r}",
        f"use one of {', '.join(queries.SORT_COLUMNS)}, values.METRIC or parameters.NAME",
    )


@router.get("/experiments/{name}/trials", summary="A page of trials, sorted and filtered on the server")
def trials(
    request: Request,
    name: Name,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    sort: str = "index",
    desc: bool = False,
    status: Annotated[list[TrialStatus] | None, Query()] = None,
    where: Annotated[list[str] | None, Query(description="filters on metrics or parameters such as `val_acc >= 0.9`, "
                                                         "`width < 64`, `act = relu` (<, >, <=, >=, =, !=)")] = None,
) -> dict[str, Any]:
    st = state(request)
    a = st.cache.get(name)
    page = queries.page_trials(
        st.store,
        a.experiment.id,
        offset=offset,
        limit=limit,
        sort=_sort_key(a, sort, desc),
        statuses=status or None,
        filters=parse_filters(a, where or []),
    )
    return serializers.trial_page(page, a.spec, offset, limit)


@router.get("/experiments/{name}/parallel", summary="Parameters vs objectives of completed trials (front first)")
def parallel(
    request: Request, name: Name, limit: Annotated[int, Query(ge=1, le=PARALLEL_MAX)] = PARALLEL_DEFAULT
) -> dict[str, Any]:
    st = state(request)
    a = st.cache.get(name)
    chosen = parallel_sample(a, limit)
    return serializers.parallel(a, queries.trial_parameters(st.store, a.experiment.id, chosen), chosen)


@router.get("/experiments/{name}/changes", summary="What changed since a cursor (for live pages)")
def changes(
    request: Request, name: Name, since: Annotated[int, Query(ge=0, le=2**62)] = 0
) -> dict[str, Any]:
    """Trials changed after event `since`, with the new front, summary and hypervolume tail.

    Unchanged experiments answer `{"changed": false}` from one indexed query.
    """
    st = state(request)
    exp = st.store.get_experiment(name)
    if queries.change_cursor(st.store, exp.id) <= since:
        return {"changed": False, "cursor": since}
    a = st.cache.get(name)
    _, indices, _ = queries.changed_trial_indices(st.store, exp.id, since)
    pts = serializers.points(a)
    pos = {i: k for k, i in enumerate(a.indices)}
    rows = [pos[i] for i in sorted(indices) if i in pos]
    return {
        "changed": True,
        "cursor": a.cursor,
        "experiment": {**serializers.experiment_summary(a), **st.usage.summary(exp)},
        "trials": {
            "index": [a.indices[k] for k in rows],
            "status": [a.statuses[k] for k in rows],
            "category": [pts["category"][k] for k in rows],
            "values": {m: [col[k] for k in rows] for m, col in a.values.items()},
        },
        "front": pts["front"],
        "reference_point": pts["reference_point"],
        "hypervolume": serializers.hypervolume_trace(a, min(indices) if indices else None),
        "events": [
            serializers.event(e) for e in st.store.events(exp.id, after_id=since, limit=200) if e.id <= a.cursor
        ],
    }


@router.get("/experiments/{name}/events", summary="The experiment's audit trail")
def events(
    request: Request,
    name: Name,
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    latest: bool = False,
) -> dict[str, Any]:
    """Events after event `after`, oldest first; with `latest`, the `limit` most recent ones instead."""
    st = state(request)
    exp = st.store.get_experiment(name)
    found = (
        queries.latest_events(st.store, exp.id, limit)
        if latest
        else st.store.events(exp.id, after_id=after, limit=limit)
    )
    return {"events": [serializers.event(e) for e in found]}


@router.get("/experiments/{name}/trials/{index}", summary="One trial: parameters, curves, timeline, job handle")
def trial(request: Request, name: Name, index: Annotated[int, Path(ge=0, le=2**31 - 1)]) -> dict[str, Any]:
    st = state(request)
    exp = st.store.get_experiment(name)
    spec = spec_from_dict(exp.spec)
    t = st.store.get_trial(exp.id, index)
    curves: dict[str, list[tuple[int, float]]] = {}
    for o in st.store.observations(t.id):
        curves.setdefault(o.metric, []).append((o.step, o.value))
    detail = serializers.trial_detail(t, spec, curves, queries.trial_events(st.store, exp.id, index))
    # the logs `/log` can serve now: a page asks for no other (an in-process trial has none, a queued one none yet)
    detail["log_streams"] = [s for s in ("stderr", "stdout") if logs.available(exp.work_dir, t.runner_metadata.get(s))]
    return {**detail, "note": serializers.note(store_manage.get_note(st.store, exp.id, index))}


@router.get("/experiments/{name}/trials/{index}/log", summary="The tail of a trial's job log")
def trial_log(
    request: Request,
    name: Name,
    index: Annotated[int, Path(ge=0, le=2**31 - 1)],
    stream: Literal["stdout", "stderr"] = "stderr",
    lines: Annotated[int, Query(ge=1, le=5000)] = 200,
) -> dict[str, Any]:
    """Only files inside the experiment's work_dir are read."""
    st = state(request)
    exp = st.store.get_experiment(name)
    t = st.store.get_trial(exp.id, index)
    path = t.runner_metadata.get(stream)
    if not isinstance(path, str) or not path:
        raise NotFoundError(f"trial {index} has no {stream} log recorded", "the job may not have been submitted")
    return {"stream": stream, "path": path, "text": logs.tail(exp.work_dir, path, lines)}


@router.get(
    "/experiments/{name}/diagnostics", summary="Leave-one-out cross-validation of the optimizer's model",
    responses={202: {"description": "computing in the background: ask again (`state` is `computing`)"}},
)
def diagnostics(request: Request, response: Response, name: Name) -> dict[str, Any]:
    """Predicted vs observed with 95% intervals per metric.

    Fitting the model takes seconds, so it runs in the background: the first
    request answers 202 `{"state": "computing", "stage": ..., "elapsed_s": ...}`
    at once (what it is doing, and for how long) and a later one the result. Results are kept by the experiment's change cursor; once the
    experiment has changed, the last result comes back with `stale: true`
    while the new one is computed.
    """
    st = state(request)
    a = st.cache.get(name)
    with st.diag_lock:
        hit = st.diagnostics.get(name)
        fresh = hit is not None and hit[0] == a.cursor
        if not fresh and name not in st.diag_running:
            st.diag_running[name] = a.cursor
            st.diag_stage[name] = ("reading the trials", time.monotonic())
            threading.Thread(target=_compute_diagnostics, args=(st, name, a), daemon=True,
                             name=f"diagnostics-{name}").start()
    if hit is not None and (fresh or isinstance(hit[1], dict)):
        if isinstance(hit[1], NasctlError):
            raise hit[1]
        return {**hit[1], "state": "done", "stale": not fresh}
    response.status_code = 202
    with st.diag_lock:
        stage, since = st.diag_stage.get(name, ("reading the trials", time.monotonic()))
    return {"state": "computing", "experiment": name, "cursor": a.cursor, "stage": stage,
            "elapsed_s": round(time.monotonic() - since, 1)}


def _compute_diagnostics(st: WebState, name: str, a: ExperimentAnalysis) -> None:
    """Fit and cross-validate in a background thread; keep the result, or the error, by cursor."""
    from nasctl.optimizer.diagnostics import loo_cross_validation

    outcome: dict[str, Any] | NasctlError | None = None
    with st.diag_lock:
        started = st.diag_stage.get(name, ("", time.monotonic()))[1]

    def stage(text: str) -> None:
        with st.diag_lock:
            st.diag_stage[name] = (text, started)

    try:
        completed = [i for i, s in zip(a.indices, a.statuses) if s == TrialStatus.COMPLETED.value]
        records = queries.trials_by_index(st.store, a.experiment.id, completed[-1000:])
        result = loo_cross_validation(a.spec, records, progress=stage)
        outcome = {**serializers.diagnostics(name, result), "cursor": a.cursor}
    except NasctlError as e:
        outcome = e
    except Exception as e:  # the web API's catch-all: logged, shown as a 500 on the next request
        log.exception("diagnostics of %s failed", name)
        outcome = NasctlError(f"computing the diagnostics failed: {type(e).__name__}: {e}", "see the server log")
    finally:
        with st.diag_lock:
            st.diag_running.pop(name, None)
            st.diag_stage.pop(name, None)
            if outcome is not None:
                st.diagnostics[name] = (a.cursor, outcome)


@router.post("/experiments/{name}/stop", summary="Ask the orchestrator to stop the experiment (token)", responses=WRITE_RESPONSES)
def stop(
    request: Request,
    name: Name,
    body: Annotated[dict[str, Any] | None, Body()] = None,
    authorization: Annotated[str | None, Header()] = None,
    x_nasctl_token: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    """Stops the experiment as `nasctl stop` does: its orchestrator, if one runs it, stops
    within a second (a `stop_requested` event); with none (queued, or its orchestrator is
    gone), it is marked STOPPED here. Running trials keep running for `nasctl resume`,
    unless the body says `{"cancel": true}`."""
    require_token(request, authorization, x_nasctl_token)
    st = state(request)
    exp = st.store.get_experiment(name)
    if exp.status.value not in ("RUNNING", "QUEUED"):
        raise ConflictError(f"experiment {name!r} is {exp.status.value}, not RUNNING", "nothing to stop")
    reason = _reason(body, "requested from the dashboard")
    cancel = bool((body or {}).get("cancel", False)) if isinstance(body, dict) else False
    done = control.request_stop(st.store, name, cancel, reason=reason)
    return {"kind": requests.STOP_REQUESTED if done["requested"] else "stopped", "event_id": done.get("event_id"),
            "experiment": name, "requested": done["requested"], "cancelled": done.get("cancelled", [])}


@router.post("/experiments/{name}/trials/{index}/cancel", summary="Ask the orchestrator to cancel a trial (token)", responses=WRITE_RESPONSES)
def cancel(
    request: Request,
    name: Name,
    index: Annotated[int, Path(ge=0, le=2**31 - 1)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
    authorization: Annotated[str | None, Header()] = None,
    x_nasctl_token: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    """Cancels the trial's job: its orchestrator, if one runs the experiment, does it within a
    second (a `cancel_requested` event); with none, it is cancelled here and ends ABANDONED."""
    require_token(request, authorization, x_nasctl_token)
    st = state(request)
    reason = _reason(body, "requested from the dashboard")
    done = control.request_cancel(st.store, name, index, reason)
    return {"kind": requests.CANCEL_REQUESTED if done["requested"] else "cancelled", "event_id": done["event_id"],
            "experiment": name, "trial_index": index, "requested": done["requested"]}


def _reason(body: dict[str, Any] | None, default: str) -> str:
    reason = (body or {}).get("reason")
    if reason is None:
        return default
    if not isinstance(reason, str) or len(reason) > 500:
        raise BadInputError("reason must be a string of at most 500 characters")
    return reason
