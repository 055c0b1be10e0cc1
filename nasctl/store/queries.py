"""Read queries for dashboards and large experiments (they write nothing).

Functions here take a `Store` and read in its `session()`; they return plain
records or tuples, never ORM objects, like the `Store` methods. They exist so
that a page over 100,000 trials reads one page of rows (sorted and filtered by
the database), or only the columns a plot needs, instead of every full record.
Operator requests are in `nasctl.store.requests`; bulk imports of trials in
`nasctl.store.manage`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import and_, case, func, or_, select
from sqlalchemy.sql.elements import ColumnElement

from nasctl.spec import Constraint
from nasctl.store.engine import retrying
from nasctl.store.models import EventRow, TrialRow
from nasctl.store.store import Store, trial_record
from nasctl.types import EventRecord, TrialRecord, TrialStatus

LOG_SCALE = "log_scale"
"""Event kind: the optimizer's model put objectives on (or took them off) the log
scale; `data["metrics"]` holds the objectives on it from then on."""

#: Columns a trial page can be sorted by, besides metric values and parameters.
SORT_COLUMNS = ("index", "status", "generation_method", "created_at", "started_at", "ended_at")


@dataclass(frozen=True)
class SortKey:
    """What to sort a trial page by.

    `field` is one of `SORT_COLUMNS` (kind "column"), a metric name (kind
    "value") or a parameter name (kind "parameter"). `numeric` says whether a
    metric or parameter compares as a number (else as text).
    """

    field: str = "index"
    kind: Literal["column", "value", "parameter"] = "column"
    descending: bool = False
    numeric: bool = True


@dataclass(frozen=True)
class FieldFilter:
    """Keep trials whose metric value (kind "value") or parameter (kind "parameter")
    `field` compares to `bound` with `op`; a trial without the field is left out.

    A string `bound` compares as text (only "=" and "!=" make sense then), a
    number as a number.
    """

    field: str
    kind: Literal["value", "parameter"]
    op: Literal["<", ">", "<=", ">=", "=", "!="]
    bound: float | str


@dataclass(frozen=True)
class TrialPage:
    """One page of trials and how many trials match the filter in all."""

    total: int
    trials: list[TrialRecord]


@retrying
def change_cursor(store: Store, experiment_id: int) -> int:
    """The id of the experiment's latest event (0 if none).

    Every trial change the store records (proposed, submitted, finished) and
    every status change adds an event, so an unchanged cursor means nothing
    to refresh.
    """
    with store.session() as s:
        top = s.scalar(select(func.max(EventRow.id)).where(EventRow.experiment_id == experiment_id))
        return int(top or 0)


@retrying
def changed_trial_indices(store: Store, experiment_id: int, after_id: int) -> tuple[int, set[int], bool]:
    """Trials touched by events after event `after_id`.

    Returns:
        (new cursor, trial indices named by those events, whether any event
        concerned the experiment itself, e.g. a status change).
    """
    with store.session() as s:
        rows = s.execute(
            select(EventRow.id, EventRow.trial_index).where(
                EventRow.experiment_id == experiment_id, EventRow.id > after_id
            )
        ).all()
    cursor = max((r[0] for r in rows), default=after_id)
    indices = {int(r[1]) for r in rows if r[1] is not None}
    return cursor, indices, any(r[1] is None for r in rows)


@retrying
def trial_attempts(
    store: Store, experiment_id: int, indices: Iterable[int] | None = None
) -> list[tuple[int, str, list[dict[str, Any]]]]:
    """(index, status, attempts) of every trial (or of the given ones), in index order:
    what running time, queue waits and GPU-hours are computed from."""
    base = select(TrialRow.index, TrialRow.status, TrialRow.attempts).where(TrialRow.experiment_id == experiment_id)
    out: list[tuple[int, str, list[dict[str, Any]]]] = []
    with store.session() as s:
        if indices is None:
            return [(int(i), str(st), list(a or [])) for i, st, a in s.execute(base.order_by(TrialRow.index))]
        wanted = sorted(set(indices))
        for start in range(0, len(wanted), 900):
            q = base.where(TrialRow.index.in_(wanted[start : start + 900])).order_by(TrialRow.index)
            out.extend((int(i), str(st), list(a or [])) for i, st, a in s.execute(q))
    return out


@retrying
def trial_points(
    store: Store, experiment_id: int, indices: Iterable[int] | None = None
) -> list[tuple[int, str, dict[str, float]]]:
    """(index, status, values) of every trial (or of the given ones), in index order:
    what plots need, nothing more."""
    base = select(TrialRow.index, TrialRow.status, TrialRow.values).where(TrialRow.experiment_id == experiment_id)
    with store.session() as s:
        if indices is None:
            return [(int(i), str(st), dict(v or {})) for i, st, v in s.execute(base.order_by(TrialRow.index))]
        wanted = sorted(set(indices))
        out: list[tuple[int, str, dict[str, float]]] = []
        for start in range(0, len(wanted), 900):
            q = base.where(TrialRow.index.in_(wanted[start : start + 900])).order_by(TrialRow.index)
            out.extend((int(i), str(st), dict(v or {})) for i, st, v in s.execute(q))
        return out


@retrying
def change_cursors(store: Store, experiment_ids: Iterable[int]) -> dict[int, int]:
    """`change_cursor` of many experiments in one query (0 for one without events)."""
    ids = sorted(set(experiment_ids))
    out = dict.fromkeys(ids, 0)
    with store.session() as s:
        for start in range(0, len(ids), 900):
            q = (select(EventRow.experiment_id, func.max(EventRow.id))
                 .where(EventRow.experiment_id.in_(ids[start : start + 900])).group_by(EventRow.experiment_id))
            out.update((int(e), int(top or 0)) for e, top in s.execute(q))
    return out


@dataclass(frozen=True)
class Changes:
    """What changed in one experiment after a cursor (see `changes_after`)."""

    cursor: int  # the latest event id read
    trials: set[int]  # trial indices named by the events
    log_scale: list[str] | None  # objectives on the log scale, if a `LOG_SCALE` event came


@retrying
def changes_after(store: Store, cursors: dict[int, int]) -> dict[int, Changes]:
    """`changed_trial_indices` of many experiments in one query: for each
    experiment id -> cursor in `cursors`, the events after that cursor."""
    out = {e: Changes(c, set(), None) for e, c in cursors.items()}
    items = sorted(cursors.items())
    with store.session() as s:
        for start in range(0, len(items), 200):
            cond = or_(*[and_(EventRow.experiment_id == e, EventRow.id > c) for e, c in items[start : start + 200]])
            q = select(EventRow.experiment_id, EventRow.id, EventRow.trial_index, EventRow.kind, EventRow.data).where(cond)
            for e, eid, index, kind, data in s.execute(q.order_by(EventRow.id)):
                got = out[int(e)]
                log_scale = list((data or {}).get("metrics", [])) if kind == LOG_SCALE else got.log_scale
                trials = got.trials if index is None else got.trials | {int(index)}
                out[int(e)] = Changes(max(got.cursor, int(eid)), trials, log_scale)
    return out


@retrying
def trial_points_many(
    store: Store, wanted: dict[int, Iterable[int] | None]
) -> dict[int, list[tuple[int, str, dict[str, float]]]]:
    """`trial_points` of many experiments in few queries: experiment id -> the
    trial indices to read (None: every trial)."""
    out: dict[int, list[tuple[int, str, dict[str, float]]]] = {e: [] for e in wanted}
    whole = sorted(e for e, idx in wanted.items() if idx is None)
    some = sorted((e, sorted(set(idx))) for e, idx in wanted.items() if idx is not None)
    conds: list[ColumnElement[bool]] = []
    for start in range(0, len(whole), 900):
        conds.append(TrialRow.experiment_id.in_(whole[start : start + 900]))
    for e, idx in some:
        for start in range(0, len(idx), 900):
            conds.append(and_(TrialRow.experiment_id == e, TrialRow.index.in_(idx[start : start + 900])))
    cols = select(TrialRow.experiment_id, TrialRow.index, TrialRow.status, TrialRow.values)
    with store.session() as s:
        for start in range(0, len(conds), 100):
            q = cols.where(or_(*conds[start : start + 100])).order_by(TrialRow.experiment_id, TrialRow.index)
            for e, i, st, v in s.execute(q):
                out[int(e)].append((int(i), str(st), dict(v or {})))
    return out


@retrying
def log_scale_metrics_many(store: Store, experiment_ids: Iterable[int]) -> dict[int, list[str]]:
    """`log_scale_metrics` of many experiments in two queries."""
    ids = sorted(set(experiment_ids))
    out: dict[int, list[str]] = {e: [] for e in ids}
    if not ids:
        return out
    with store.session() as s:
        latest = (select(func.max(EventRow.id)).where(EventRow.experiment_id.in_(ids), EventRow.kind == LOG_SCALE)
                  .group_by(EventRow.experiment_id))
        for e, data in s.execute(select(EventRow.experiment_id, EventRow.data).where(EventRow.id.in_(latest))):
            out[int(e)] = list((data or {}).get("metrics", []))
    return out


def trial_fidelities(store: Store, experiment_id: int) -> dict[int, float | None]:
    """Each trial's fidelity (multi-fidelity search; None elsewhere), by trial index."""
    q = select(TrialRow.index, TrialRow.fidelity).where(TrialRow.experiment_id == experiment_id)
    with store.session() as s:
        return {int(i): (None if f is None else float(f)) for i, f in s.execute(q)}


@retrying
def trial_parameters(store: Store, experiment_id: int, indices: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Parameters of the given trials, by trial index (missing indices are left out)."""
    wanted = sorted(set(indices))
    out: dict[int, dict[str, Any]] = {}
    with store.session() as s:
        for start in range(0, len(wanted), 900):
            chunk = wanted[start : start + 900]
            q = select(TrialRow.index, TrialRow.parameters).where(
                TrialRow.experiment_id == experiment_id, TrialRow.index.in_(chunk)
            )
            for i, p in s.execute(q):
                out[int(i)] = dict(p or {})
    return out


@retrying
def trials_by_index(store: Store, experiment_id: int, indices: Iterable[int]) -> list[TrialRecord]:
    """Full records of the given trials, in index order (missing indices are left out)."""
    wanted = sorted(set(indices))
    out: list[TrialRecord] = []
    with store.session() as s:
        for start in range(0, len(wanted), 900):
            chunk = wanted[start : start + 900]
            q = (
                select(TrialRow)
                .where(TrialRow.experiment_id == experiment_id, TrialRow.index.in_(chunk))
                .order_by(TrialRow.index)
            )
            out.extend(trial_record(r) for r in s.scalars(q))
    return out


def _json_field(column: Any, name: str, numeric: bool) -> ColumnElement[Any]:
    element = column[name]
    field: ColumnElement[Any] = element.as_float() if numeric else element.as_string()
    return field


@retrying
def page_trials(
    store: Store,
    experiment_id: int,
    *,
    offset: int = 0,
    limit: int = 50,
    sort: SortKey = SortKey(),
    statuses: Sequence[TrialStatus] | None = None,
    value_filters: Sequence[Constraint] = (),
    filters: Sequence[FieldFilter] = (),
) -> TrialPage:
    """One page of trials, sorted and filtered by the database.

    Args:
        offset, limit: the page (limit 1..1000).
        sort: the sort key; trials without the sorted metric/parameter come last,
            ties are broken by trial index.
        statuses: keep only trials in these states (None: all).
        value_filters: keep only trials whose metric values satisfy every
            constraint (`val_acc >= 0.9`); a trial without the metric is left out.
        filters: keep only trials that pass every filter (metrics or parameters,
            any comparison).

    Raises:
        ValueError: an unknown sort column or a limit out of range.
    """
    if not 1 <= limit <= 1000 or offset < 0:
        raise ValueError(f"page offset {offset} / limit {limit} out of range (limit 1..1000, offset >= 0)")
    conds: list[ColumnElement[bool]] = [TrialRow.experiment_id == experiment_id]
    if statuses is not None:
        conds.append(TrialRow.status.in_([st.value for st in statuses]))
    for c in value_filters:
        expr = _json_field(TrialRow.values, c.metric, True)
        conds.append(expr <= c.bound if c.op == "<=" else expr >= c.bound)
    for f in filters:
        conds.append(_filter_condition(f))
    if sort.kind == "column":
        if sort.field not in SORT_COLUMNS:
            raise ValueError(f"cannot sort by {sort.field!r}; use one of {', '.join(SORT_COLUMNS)}")
        key: ColumnElement[Any] = getattr(TrialRow, sort.field)
    elif sort.kind == "value":
        key = _json_field(TrialRow.values, sort.field, sort.numeric)
    else:
        key = _json_field(TrialRow.parameters, sort.field, sort.numeric)
    # (key IS NULL) first keeps missing values last on every backend (MySQL has no NULLS LAST)
    order = [case((key.is_(None), 1), else_=0), key.desc() if sort.descending else key.asc(), TrialRow.index.asc()]
    with store.session() as s:
        total = int(s.scalar(select(func.count(TrialRow.id)).where(*conds)) or 0)
        q = select(TrialRow).where(*conds).order_by(*order).offset(offset).limit(limit)
        return TrialPage(total, [trial_record(r) for r in s.scalars(q)])


@retrying
def trial_events(store: Store, experiment_id: int, trial_index: int, limit: int = 1000) -> list[EventRecord]:
    """The events of one trial (its status timeline), oldest first."""
    with store.session() as s:
        q = (
            select(EventRow)
            .where(EventRow.experiment_id == experiment_id, EventRow.trial_index == trial_index)
            .order_by(EventRow.id)
            .limit(limit)
        )
        return [EventRecord(r.id, r.experiment_id, r.time, r.kind, r.message, r.trial_index) for r in s.scalars(q)]


def _filter_condition(f: FieldFilter) -> ColumnElement[bool]:
    column = TrialRow.values if f.kind == "value" else TrialRow.parameters
    expr = _json_field(column, f.field, not isinstance(f.bound, str))
    ops: dict[str, Any] = {
        "<": expr.__lt__, ">": expr.__gt__, "<=": expr.__le__, ">=": expr.__ge__, "=": expr.__eq__, "!=": expr.__ne__,
    }
    cond: ColumnElement[bool] = ops[f.op](f.bound)
    return cond & expr.is_not(None)


@retrying
def trial_columns(
    store: Store, experiment_id: int, indices: Iterable[int] | None = None
) -> list[tuple[int, dict[str, Any], datetime | None]]:
    """(index, parameters, ended_at) of every trial (or of the given ones), in index order."""
    base = select(TrialRow.index, TrialRow.parameters, TrialRow.ended_at).where(
        TrialRow.experiment_id == experiment_id
    )
    with store.session() as s:
        if indices is None:
            return [(int(i), dict(p or {}), e) for i, p, e in s.execute(base.order_by(TrialRow.index))]
        wanted = sorted(set(indices))
        out: list[tuple[int, dict[str, Any], datetime | None]] = []
        for start in range(0, len(wanted), 900):
            q = base.where(TrialRow.index.in_(wanted[start : start + 900])).order_by(TrialRow.index)
            out.extend((int(i), dict(p or {}), e) for i, p, e in s.execute(q))
        return out


@retrying
def latest_events(store: Store, experiment_id: int, limit: int = 200) -> list[EventRecord]:
    """The experiment's `limit` most recent events, oldest first."""
    with store.session() as s:
        q = select(EventRow).where(EventRow.experiment_id == experiment_id).order_by(EventRow.id.desc()).limit(limit)
        rows = list(s.scalars(q))
        return [EventRecord(r.id, r.experiment_id, r.time, r.kind, r.message, r.trial_index) for r in reversed(rows)]


def log_scale_metrics(store: Store, experiment_id: int) -> list[str]:
    """The objectives the optimizer's latest model has on the log scale (none before
    a model, or when the latest model has none)."""
    (latest,) = store.events(experiment_id, kinds=[LOG_SCALE], newest=True, limit=1) or (None,)
    return list((latest.data or {}).get("metrics", [])) if latest is not None else []


@retrying
def completed_durations(store: Store, experiment_ids: Iterable[int]) -> list[float]:
    """Seconds from submission to end of the COMPLETED trials of these experiments
    (two columns read, not whole trial records: the service's /metrics)."""
    ids = list(experiment_ids)
    if not ids:
        return []
    with store.session() as s:
        rows = s.execute(
            select(TrialRow.started_at, TrialRow.ended_at).where(
                TrialRow.experiment_id.in_(ids), TrialRow.status == TrialStatus.COMPLETED.value,
                TrialRow.started_at.is_not(None), TrialRow.ended_at.is_not(None))
        ).all()
    return [(end - start).total_seconds() for start, end in rows if start is not None and end is not None]
