"""Per-experiment derived data (points, Pareto front, hypervolume history), cached.

Deriving the front of 100,000 trials takes a fraction of a second; the pages
ask for it every few seconds while an experiment runs. The cache key is the
experiment's change cursor (its latest event id, see
`nasctl.store.queries.change_cursor`), so the data is recomputed only after
the store recorded something new, and then incrementally: only the trials
named by the events since the cached cursor are read again.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import datetime
from dataclasses import dataclass, field
from typing import Any

from nasctl.orchestration.usage import Usage, attempts_usage, usage_row, waiting
from nasctl.pareto import FrontResult, compute_front, hypervolume_history
from nasctl.spec import ExperimentSpec, spec_from_dict
from nasctl.store import Store
from nasctl.store import queries
from nasctl.types import ExperimentRecord, TrialStatus

#: The hypervolume history holds at most this many points (exact values at sampled trials).
HISTORY_POINTS = 1000


@dataclass
class ExperimentAnalysis:
    """Everything the experiment page plots, for one state of the store.

    `indices`, `statuses` and `values` are columns over all trials in index
    order; `values[metric][k]` is None where trial k has no finite value.
    """

    experiment: ExperimentRecord
    spec: ExperimentSpec
    cursor: int
    indices: list[int]
    statuses: list[str]
    values: dict[str, list[float | None]]
    front: FrontResult
    counts: dict[str, int] = field(default_factory=dict)
    seconds_saved: float = 0.0  # estimated trial time saved by early stopping
    log_scale: list[str] = field(default_factory=list)  # objectives the optimizer's latest model has on the log scale
    rows: list[tuple[int, str, dict[str, float]]] = field(default_factory=list, repr=False)
    _hv_history: list[tuple[int, float]] | None = field(default=None, repr=False, compare=False)

    @property
    def metrics(self) -> list[str]:
        return list(self.values)

    @property
    def hv_history(self) -> list[tuple[int, float]]:
        """The hypervolume after each completed trial (at most HISTORY_POINTS of
        them), computed when first asked for: it is most of an analysis's cost,
        and the experiment list, which analyses every changed experiment on each
        refresh, does not show it."""
        if self._hv_history is None:
            done = [(i, v) for i, st, v in self.rows if st == TrialStatus.COMPLETED.value]
            self._hv_history = hypervolume_history(done, self.spec.objectives, self.spec.parsed_constraints,
                                                   max_points=HISTORY_POINTS, reference=self.front.reference)
        return self._hv_history


def _finite(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def analyze(
    store: Store,
    experiment: ExperimentRecord,
    cursor: int,
    rows: list[tuple[int, str, dict[str, float]]] | None = None,
    log_scale: list[str] | None = None,
) -> ExperimentAnalysis:
    """Derive the columns, front and hypervolume history (no cache).

    `rows` are the trials' (index, status, values) in index order as of
    `cursor`, and `log_scale` the objectives the optimizer's latest model has
    on the log scale; each is read from the store when not given.
    """
    spec = spec_from_dict(experiment.spec)
    if rows is None:
        rows = queries.trial_points(store, experiment.id)
    metrics: list[str] = list(spec.metric_names)
    for _, _, vals in rows:
        for m in vals:
            if m not in metrics:
                metrics.append(m)
    values: dict[str, list[float | None]] = {m: [_finite(v.get(m)) for _, _, v in rows] for m in metrics}
    counts = {s.value: 0 for s in TrialStatus}
    for _, st, _ in rows:
        counts[st] = counts.get(st, 0) + 1
    done = [(i, v) for i, st, v in rows if st == TrialStatus.COMPLETED.value]
    fid = spec.optimizer.fidelity
    if fid is not None and fid.front == "top":  # multi-fidelity: the front is made of top-rung results
        fidelities = queries.trial_fidelities(store, experiment.id)
        done = [(i, v) for i, v in done if fid.in_front(fidelities.get(i))]
    front = compute_front(done, spec.objectives, spec.parsed_constraints)
    stopped = [i for i, st, _ in rows if st == TrialStatus.EARLY_STOPPED.value]
    saved = 0.0
    if stopped:
        from nasctl.orchestration.early_stopping import EARLY_STOPPED_EVENT, seconds_saved, stop_records

        events = store.events(experiment.id, limit=1_000_000, kinds=[EARLY_STOPPED_EVENT])
        saved = seconds_saved(stop_records(events, stopped))
    return ExperimentAnalysis(
        experiment=experiment,
        spec=spec,
        cursor=cursor,
        indices=[i for i, _, _ in rows],
        statuses=[st for _, st, _ in rows],
        values=values,
        front=front,
        counts=counts,
        seconds_saved=saved,
        log_scale=queries.log_scale_metrics(store, experiment.id) if log_scale is None else log_scale,
        rows=rows,
    )


def refresh(store: Store, experiment: ExperimentRecord, previous: ExperimentAnalysis) -> ExperimentAnalysis:
    """`previous` brought up to date by reading only the trials changed since its cursor."""
    cursor, changed, _ = queries.changed_trial_indices(store, experiment.id, previous.cursor)
    rows = previous.rows
    if changed:
        fresh = queries.trial_points(store, experiment.id, changed)
        by_index = {r[0]: r for r in rows}
        by_index.update((r[0], r) for r in fresh)
        rows = [by_index[i] for i in sorted(by_index)]
    return analyze(store, experiment, cursor, rows)


class AnalysisCache:
    """Thread-safe cache of `ExperimentAnalysis` by experiment name, keyed by change cursor."""

    def __init__(self, store: Store, max_entries: int = 64) -> None:
        # the experiment list walks every experiment in turn: a bound below their
        # number evicts each entry before it is asked for again, and every request
        # then recomputes them all (20 running experiments of `nasctl serve`)
        self.store = store
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: dict[str, ExperimentAnalysis] = {}
        self._building: dict[str, threading.Lock] = {}

    def forget(self, name: str) -> None:
        """Drop what is cached for `name` (the experiment was renamed or deleted)."""
        with self._lock:
            self._entries.pop(name, None)

    def get(self, name: str) -> ExperimentAnalysis:
        """The analysis of experiment `name` as the store holds it now.

        Raises:
            NotFoundError: no experiment of that name.
        """
        experiment = self.store.get_experiment(name)
        cursor = queries.change_cursor(self.store, experiment.id)
        with self._lock:
            hit = self._entries.get(name)
            if hit is not None and hit.cursor == cursor and hit.experiment.id == experiment.id:
                return hit
            build_lock = self._building.setdefault(name, threading.Lock())
        with build_lock:
            with self._lock:
                hit = self._entries.get(name)
                if hit is not None and hit.cursor == cursor and hit.experiment.id == experiment.id:
                    return hit
            if hit is not None and hit.experiment.id == experiment.id and hit.cursor < cursor:
                result = refresh(self.store, experiment, hit)
            else:
                result = analyze(self.store, experiment, cursor)
            with self._lock:
                self._entries.pop(name, None)
                self._entries[name] = result
                while len(self._entries) > self.max_entries:
                    self._entries.pop(next(iter(self._entries)))
            return result


    def get_many(self, experiments: list[ExperimentRecord]) -> list[ExperimentAnalysis]:
        """The analyses of many experiments (records as just read from the
        store, e.g. by `list_experiments`), in their order, with the store read
        in a few set-based queries whatever their number: one for the change
        cursors, then, for the experiments changed since cached, one for the
        events since, one for the changed trials and one for the log scales of
        those without a cached analysis."""
        cursors = queries.change_cursors(self.store, [e.id for e in experiments])
        out: dict[int, ExperimentAnalysis] = {}
        cached: dict[int, ExperimentAnalysis] = {}
        with self._lock:
            for e in experiments:
                hit = self._entries.get(e.name)
                if hit is not None and hit.experiment.id == e.id and hit.cursor <= cursors[e.id]:
                    if hit.cursor == cursors[e.id]:
                        out[e.id] = hit
                    else:
                        cached[e.id] = hit
        stale = [e for e in experiments if e.id not in out]
        changes = queries.changes_after(self.store, {i: hit.cursor for i, hit in cached.items()})
        new_ids = [e.id for e in stale if e.id not in cached]
        wanted: dict[int, Any] = {i: c.trials for i, c in changes.items() if c.trials}
        wanted.update(dict.fromkeys(new_ids))
        points = queries.trial_points_many(self.store, wanted)
        log_scales = queries.log_scale_metrics_many(self.store, new_ids)
        for e in stale:
            if e.id in cached:
                previous, change = cached[e.id], changes[e.id]
                rows = previous.rows
                if change.trials:
                    by_index = {r[0]: r for r in rows}
                    by_index.update((r[0], r) for r in points[e.id])
                    rows = [by_index[i] for i in sorted(by_index)]
                log_scale = previous.log_scale if change.log_scale is None else change.log_scale
                result = analyze(self.store, e, change.cursor, rows, log_scale)
            else:
                result = analyze(self.store, e, cursors[e.id], points[e.id], log_scales[e.id])
            out[e.id] = result
            with self._lock:
                current = self._entries.get(e.name)
                if current is None or current.experiment.id != e.id or current.cursor <= result.cursor:
                    self._entries.pop(e.name, None)
                    self._entries[e.name] = result
                while len(self._entries) > self.max_entries:
                    self._entries.pop(next(iter(self._entries)))
        return [out[e.id] for e in experiments]


def parallel_sample(a: ExperimentAnalysis, limit: int) -> list[int]:
    """Up to `limit` completed trial indices for parallel coordinates, sorted:
    every Pareto-optimal trial first (up to the limit), then the others evenly sampled."""
    completed = [i for i, s in zip(a.indices, a.statuses) if s == TrialStatus.COMPLETED.value]
    chosen = list(a.front.indices)[:limit]
    taken = set(chosen)
    rest = [i for i in completed if i not in taken]
    room = limit - len(chosen)
    if room > 0 and rest:
        step = max(1, -(-len(rest) // room))
        chosen += rest[::step][:room]
    return sorted(chosen)


class UsageCache:
    """Queue and GPU-hours of experiments for the dashboard, kept by change cursor.

    The trials that ended are summed once and read again only when an event after
    the cached cursor names them; those still waiting or running are counted at
    every request (their time grows without events)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        # experiment id -> (cursor, index -> (status, attempts) of unfinished trials, sum over finished ones,
        #                   index -> usage of each finished one)
        # (keyed by id and creation time: a deleted experiment's id may be given to a new one)
        self._entries: dict[tuple[int, datetime], tuple[int, dict[int, tuple[TrialStatus, list[dict[str, Any]]]],
                                                          Usage, dict[int, Usage]]] = {}

    def summary(self, experiment: ExperimentRecord) -> dict[str, Any]:
        """{queued, running, usage: {running_s, queued_s, gpu_hours, gpu_hours_lost}} as of now."""
        now = time.time()
        with self._lock:
            hit = self._entries.get((experiment.id, experiment.created_at))
        if hit is None:
            cursor = queries.change_cursor(self.store, experiment.id)
            rows = queries.trial_attempts(self.store, experiment.id)
            live: dict[int, tuple[TrialStatus, list[dict[str, Any]]]] = {}
            done: dict[int, Usage] = {}
            total = Usage()
        else:
            cursor, changed, _ = queries.changed_trial_indices(self.store, experiment.id, hit[0])
            rows = queries.trial_attempts(self.store, experiment.id, changed) if changed else []
            live, total, done = dict(hit[1]), hit[2], dict(hit[3])
        for index, status_text, attempts in rows:
            status = TrialStatus(status_text)
            if index in done:
                total = total - done.pop(index)
            live.pop(index, None)
            if status.is_terminal:
                done[index] = attempts_usage(status, attempts, now)
                total = total + done[index]
            else:
                live[index] = (status, attempts)
        with self._lock:
            self._entries[(experiment.id, experiment.created_at)] = (cursor, live, total, done)
        use = total
        for status, attempts in live.values():
            use = use + attempts_usage(status, attempts, now)
        waits = sum(1 for status, attempts in live.values() if waiting(status, attempts))
        running = sum(1 for status, _ in live.values() if status == TrialStatus.RUNNING)
        return {"queued": waits, "running": running - waits, "usage": usage_row(use)}
