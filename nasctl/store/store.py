"""The SQL store: the source of truth for experiments, trials, observations and events.

Every public method opens a short transaction and returns plain records from
`nasctl.types`, so callers never hold ORM objects or sessions. Connecting,
retrying and telling transient errors apart live in `nasctl.store.engine`; the
store package's query modules (queries, requests, manage) run their own
statements in `Store.session()` and convert rows with `experiment_record` and
`trial_record`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterator, cast

from sqlalchemy import Column, Select, Table, bindparam, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.dml import Update

from nasctl.errors import AlreadyExistsError, LeaseError, NotFoundError
from nasctl.leases import IsAlive, LeaseOwner, lease_stale, utcnow
from nasctl.store import devices as device_sql
from nasctl.store.engine import RETRY_SECONDS, connect, deadlocked, retrying, rowcount
from nasctl.store.models import EventRow, ExperimentRow, ObservationRow, ServiceLeaseRow, TrialRow
from nasctl.types import (
    DeviceLease,
    EventRecord,
    ExperimentRecord,
    ExperimentStatus,
    Observation,
    Placement,
    ServiceLease,
    TrialRecord,
    TrialStatus,
)

# The write paths of a trial's life (add_trial, mark_trial_running,
# add_observations, finish_trial) run once or more per trial, so they use Core
# statements on a plain connection: no identity map, no unit-of-work flush, no
# row loaded only to be changed. Each statement is built once, so its cache key
# and compiled form are reused on every call.
_TRIALS = cast(Table, TrialRow.__table__)
_OBSERVATIONS = cast(Table, ObservationRow.__table__)
_EVENTS = cast(Table, EventRow.__table__)
_INSERT_TRIAL = insert(_TRIALS)
_INSERT_EVENT = insert(_EVENTS)
_INSERT_OBSERVATIONS = insert(_OBSERVATIONS)
_STORED_STEPS = select(_OBSERVATIONS.c.metric, _OBSERVATIONS.c.step).where(
    _OBSERVATIONS.c.trial_id == bindparam("trial_id"),
    _OBSERVATIONS.c.metric.in_(bindparam("metrics", expanding=True)),
)


@functools.cache
def _trial_update(columns: tuple[str, ...], returning: bool) -> Update:
    """UPDATE trials SET `columns` WHERE id = :trial_id, one statement per shape.

    With `returning`, it also returns the other columns of a TrialRecord (those
    the caller does not already know), so that the updated record needs no
    SELECT where the database supports UPDATE ... RETURNING.
    """
    stmt = update(_TRIALS).where(_TRIALS.c.id == bindparam("trial_id")).values({c: bindparam(c) for c in columns})
    if returning:
        stmt = stmt.returning(*_other_trial_columns(columns))
    return stmt


@functools.cache
def _trial_columns_select(columns: tuple[str, ...]) -> Select[Any]:
    """SELECT the trial columns other than `columns` (for databases without UPDATE ... RETURNING)."""
    return select(*_other_trial_columns(columns)).where(_TRIALS.c.id == bindparam("trial_id"))


def _other_trial_columns(columns: tuple[str, ...]) -> list[Column[Any]]:
    """The columns a TrialRecord needs besides `columns` (the reader's state is not in it)."""
    return [c for c in _TRIALS.c if c.name not in columns and c.name != "reader_state"]


_RECORD_COLUMNS = tuple(c.name for c in _other_trial_columns(()))
"""The trial columns a TrialRecord holds."""


def _update_trial(c: Connection, trial_id: int, values: dict[str, Any]) -> dict[str, Any]:
    """Set `values` on a trial and return its columns by name (all that a
    TrialRecord holds), in one statement where the database has
    UPDATE ... RETURNING (else UPDATE, then SELECT). The values just set
    are returned as given, not as read back."""
    columns = tuple(values)
    params = {"trial_id": trial_id, **values}
    if c.dialect.update_returning:
        row = c.execute(_trial_update(columns, True), params).one_or_none()
    else:
        c.execute(_trial_update(columns, False), params)
        row = c.execute(_trial_columns_select(columns), {"trial_id": trial_id}).one_or_none()
    assert row is not None, f"no trial with id {trial_id}"
    return {**row._mapping, **values}


def _insert_observations(c: Connection, trial_id: int, observations: Sequence[Observation]) -> int:
    """Add the finite observations whose (metric, step) is not stored yet; returns how many."""
    rows = [o for o in observations if math.isfinite(o.value)]
    if not rows:
        return 0
    existing = set(c.execute(_STORED_STEPS, {"trial_id": trial_id, "metrics": sorted({o.metric for o in rows})}).all())
    fresh: dict[tuple[str, int], Observation] = {}
    for o in rows:
        key = (o.metric, o.step)
        if key not in existing:
            fresh[key] = o  # a step logged twice keeps its last value
    if fresh:  # one executemany
        c.execute(_INSERT_OBSERVATIONS, [
            {"trial_id": trial_id, "metric": o.metric, "step": o.step, "value": o.value, "wall_time": o.wall_time}
            for o in fresh.values()
        ])
    return len(fresh)


class Store:
    """Access to one nasctl database.

    Args:
        url: SQLAlchemy URL (`sqlite:///path.db`, `postgresql+psycopg://...`).
        create: allow creating the SQLite file and initialise an empty database
            (True for commands that start experiments).
        check: refuse a database at another schema revision (always on outside `nasctl db`).
        initialize: migrate an empty database to the current schema (default: `create`).

    Raises:
        BadInputError: the URL is malformed or names a driver that is not installed.
        NotFoundError: an SQLite file that does not exist, when `create` is False.
        SchemaOutdatedError: the schema is not the one this nasctl needs.
        StorageError: the database cannot be reached.
    """

    def __init__(
        self, url: str | None = None, *, create: bool = False, check: bool = True, initialize: bool | None = None,
        retry_seconds: float | None = None,
    ) -> None:
        initialize = create if initialize is None else initialize
        self.retry_seconds = RETRY_SECONDS if retry_seconds is None else retry_seconds
        db = connect(url, create=create, check=check, initialize=initialize, retry_seconds=self.retry_seconds)
        self.url, self.display_url, self.engine, self.is_sqlite, self.path = (
            db.url, db.display_url, db.engine, db.is_sqlite, db.path)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction on an ORM session: committed on exit, rolled back on error.

        The store package's way for its query modules (queries, requests, manage)
        to read and write in one transaction; run it inside a `retrying` function
        so that a dropped connection is retried. Code outside nasctl.store calls
        the Store's methods and those modules' functions instead.
        """
        with self._sessions.begin() as s:
            yield s

    def lock_before_read(self, s: Session, noop_update: Update) -> None:
        """On SQLite, take the database's write lock before a read that decides a write.

        pysqlite begins a transaction only before a write, so a read on its own
        runs outside any transaction: two processes could both read a free lease
        and both take it, or `nasctl rm` remove an experiment an orchestrator had
        just taken. A write that changes nothing (`noop_update`, which
        takes the lock even when it matches no row) makes the read and the write
        that follows one locked transaction: the second process waits, then reads
        what the first wrote. PostgreSQL and MySQL lock the row with SELECT ... FOR
        UPDATE instead (`with_for_update` on the read).
        """
        if self.is_sqlite:
            s.execute(noop_update.execution_options(synchronize_session=False))

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """One transaction on a Core connection (committed on exit, rolled back on error)."""
        with self.engine.begin() as c:
            yield c

    # --- experiments ------------------------------------------------------
    @retrying
    def create_experiment(self, name: str, spec: dict[str, Any], work_dir: str, owner: str | None = None) -> ExperimentRecord:
        now = utcnow()
        row = ExperimentRow(
            name=name,
            spec=spec,
            status=ExperimentStatus.RUNNING.value,
            work_dir=work_dir,
            created_at=now,
            updated_at=now,
            lease_owner=owner,
            lease_heartbeat=now if owner else None,
        )
        try:
            with self.session() as s:
                s.add(row)
                s.flush()
                s.add(EventRow(experiment_id=row.id, time=now, kind="created", message=f"experiment {name} created"))
                return experiment_record(row)
        except IntegrityError:
            raise AlreadyExistsError(
                f"experiment {name!r} already exists in {self.display_url}",
                f"look at it with `nasctl status {name}`, or pass --name to start a new one",
            ) from None

    @retrying
    def get_experiment(self, name: str) -> ExperimentRecord:
        with self.session() as s:
            row = s.scalar(select(ExperimentRow).where(ExperimentRow.name == name))
            if row is None:
                known = s.scalars(select(ExperimentRow.name).order_by(ExperimentRow.id.desc()).limit(5)).all()
                hint = f"known experiments: {', '.join(known)}" if known else "this database has no experiments yet"
                raise NotFoundError(f"no experiment named {name!r} in {self.display_url}", f"{hint}; see `nasctl ls`")
            return experiment_record(row)

    @retrying
    def list_experiments(self) -> list[tuple[ExperimentRecord, dict[str, int]]]:
        """Every experiment with its trial counts by status, newest first."""
        with self.session() as s:
            rows = s.scalars(select(ExperimentRow).order_by(ExperimentRow.id.desc())).all()
            counts: dict[int, dict[str, int]] = {r.id: {} for r in rows}
            q = select(TrialRow.experiment_id, TrialRow.status, func.count()).group_by(
                TrialRow.experiment_id, TrialRow.status
            )
            for exp_id, status, n in s.execute(q):
                counts.setdefault(exp_id, {})[status] = n
            return [(experiment_record(r), counts[r.id]) for r in rows]

    @retrying
    def set_experiment_status(self, experiment_id: int, status: ExperimentStatus, reason: str | None = None,
                              *, owner: str | None = None) -> bool:
        """Set the experiment's status (and say so in an event). With `owner`, only while
        that owner holds the experiment's lease: an orchestrator whose lease another one
        took over does not overwrite what the new one drives. Returns whether it was set."""
        now = utcnow()
        with self.session() as s:
            q = update(ExperimentRow).where(ExperimentRow.id == experiment_id)
            if owner is not None:
                q = q.where(ExperimentRow.lease_owner == owner)
            res = s.execute(q.values(status=status.value, status_reason=reason, updated_at=now))
            if owner is not None and not rowcount(res):
                return False
            msg = f"experiment {status.value.lower()}" + (f": {reason}" if reason else "")
            s.add(EventRow(experiment_id=experiment_id, time=now, kind="status", message=msg))
            return True

    @retrying
    def restore_running(self, experiment_id: int, reason: str) -> bool:
        """Put a STOPPED experiment back to RUNNING (a service handing back what it
        drove, for the next service to take over); False, and nothing changed, when it
        is no longer STOPPED (it completed, failed or was resumed meanwhile)."""
        now = utcnow()
        with self.session() as s:
            res = s.execute(update(ExperimentRow)
                            .where(ExperimentRow.id == experiment_id,
                                   ExperimentRow.status == ExperimentStatus.STOPPED.value)
                            .values(status=ExperimentStatus.RUNNING.value, status_reason=reason, updated_at=now))
            if not rowcount(res):
                return False
            s.add(EventRow(experiment_id=experiment_id, time=now, kind="status",
                           message=f"experiment running: {reason}"))
            return True

    @retrying
    def set_work_dir(self, experiment_id: int, work_dir: str) -> bool:
        """Move where new trials of the experiment put their files, with a `moved`
        event; True if it moved, False (and no event) if it already was `work_dir`."""
        with self.session() as s:
            res = s.execute(update(ExperimentRow)
                            .where(ExperimentRow.id == experiment_id, ExperimentRow.work_dir != work_dir)
                            .values(work_dir=work_dir, updated_at=utcnow()))
            if not rowcount(res):
                return False
            s.add(EventRow(experiment_id=experiment_id, time=utcnow(), kind="moved",
                           message=f"trial files now go to {work_dir}"))
            return True

    @retrying
    def acquire_lease(
        self, experiment_id: int, owner: str, stale_after: float,
        is_alive: IsAlive | None = None,
    ) -> None:
        """Take the experiment's lease unless another owner holds it: its heartbeat
        is fresh and `is_alive(owner)` does not say it is dead (a dead owner on
        this host is replaced at once; elsewhere only once its heartbeat is stale).

        Raises:
            LeaseError: another live orchestrator holds it.
            NotFoundError: the experiment has been removed.
        """
        now = utcnow()
        with self.session() as s:
            self.lock_before_read(s, update(ExperimentRow).where(ExperimentRow.id == experiment_id)
                                   .values(lease_owner=ExperimentRow.lease_owner))
            row = s.get(ExperimentRow, experiment_id, with_for_update=not self.is_sqlite)
            if row is None:  # removed (`nasctl rm`) since the caller read it
                raise NotFoundError(f"the experiment (id {experiment_id}) no longer exists", "see `nasctl ls`")
            held = row.lease_owner
            if held and held != owner and not lease_stale(held, row.lease_heartbeat, stale_after, now=now,
                                                          is_alive=is_alive):
                assert row.lease_heartbeat is not None  # a lease that is not stale has beaten
                age = (now - row.lease_heartbeat).total_seconds()
                holder = LeaseOwner.parse(held)
                raise LeaseError(
                    f"experiment {row.name!r} is already being driven by process {_pid_text(holder)} on {holder.host} "
                    f"(heartbeat {age:.0f}s ago)",
                    f"stop it with `nasctl stop {row.name}`, or wait {stale_after:.0f}s after it dies",
                )
            row.lease_owner = owner
            row.lease_heartbeat = now

    @retrying
    def heartbeat(self, experiment_id: int, owner: str) -> bool:
        """Renew the lease; False if `owner` no longer holds it (it was taken over)."""
        with self.session() as s:
            res = s.execute(
                update(ExperimentRow)
                .where(ExperimentRow.id == experiment_id, ExperimentRow.lease_owner == owner)
                .values(lease_heartbeat=utcnow())
            )
            return bool(rowcount(res))

    @retrying
    def release_lease(self, experiment_id: int, owner: str) -> None:
        with self.session() as s:
            s.execute(
                update(ExperimentRow)
                .where(ExperimentRow.id == experiment_id, ExperimentRow.lease_owner == owner)
                .values(lease_owner=None, lease_heartbeat=None)
            )

    # --- the service's lease -------------------------------------------------
    @retrying
    def acquire_service_lease(self, owner: str, url: str | None, stale_after: float,
                              is_alive: IsAlive) -> str | None:
        """Become the service driving this database, unless a live one is (fresh
        heartbeat, and `is_alive` does not say its process is gone).

        Returns:
            The owner whose stale lease was taken over; None when the lease was
            free or already `owner`'s.

        Raises:
            LeaseError: another service holds it (naming its host, pid and URL).
        """
        try:
            return self._take_service_lease(owner, url, stale_after, is_alive)
        except (IntegrityError, OperationalError) as e:
            # another service inserted the first lease row at the same moment: on
            # PostgreSQL no lock covers a row that is not there yet (the second
            # insert is a duplicate), on MySQL the two gap locks deadlock and one
            # transaction is rolled back. Decide again, against its row.
            if isinstance(e, OperationalError) and not deadlocked(e):
                raise
            return self._take_service_lease(owner, url, stale_after, is_alive)

    def _take_service_lease(self, owner: str, url: str | None, stale_after: float,
                            is_alive: IsAlive) -> str | None:
        now = utcnow()
        with self.session() as s:
            self.lock_before_read(s, update(ServiceLeaseRow).where(ServiceLeaseRow.name == "service")
                                   .values(owner=ServiceLeaseRow.owner))
            row = s.get(ServiceLeaseRow, "service", with_for_update=not self.is_sqlite)
            if row is None:
                s.add(ServiceLeaseRow(name="service", owner=owner, heartbeat=now, url=url))
                return None
            if row.owner != owner and not lease_stale(row.owner, row.heartbeat, stale_after, now=now,
                                                      is_alive=is_alive):
                holder = LeaseOwner.parse(row.owner)
                raise LeaseError(
                    f"another nasctl serve (pid {_pid_text(holder)} on {holder.host}"
                    + (f", {row.url}" if row.url else "") + ") drives the experiments of this database",
                    "stop it first, or submit to it with `nasctl submit SPEC --server URL`",
                )
            replaced = row.owner if row.owner and row.owner != owner else None
            row.owner, row.heartbeat, row.url = owner, now, url
            return replaced

    @retrying
    def service_heartbeat(self, owner: str) -> bool:
        """Renew the service's lease; False if another service has taken it."""
        with self.session() as s:
            res = s.execute(update(ServiceLeaseRow).where(ServiceLeaseRow.name == "service",
                                                          ServiceLeaseRow.owner == owner).values(heartbeat=utcnow()))
            return bool(rowcount(res))

    @retrying
    def release_service_lease(self, owner: str) -> None:
        with self.session() as s:
            s.execute(delete(ServiceLeaseRow).where(ServiceLeaseRow.name == "service",
                                                    ServiceLeaseRow.owner == owner))

    @retrying
    def service_lease(self) -> ServiceLease | None:
        with self.session() as s:
            row = s.get(ServiceLeaseRow, "service")
            return None if row is None else ServiceLease(row.owner, row.heartbeat, row.url)

    # --- trials -------------------------------------------------------------
    @retrying
    def add_trial(
        self,
        experiment_id: int,
        index: int,
        parameters: dict[str, Any],
        generation_method: str,
        job_name: str,
        log_dir: str,
        *,
        fidelity: float | None = None,
        promoted_from: int | None = None,
    ) -> TrialRecord:
        """Record a CANDIDATE trial (write-ahead: before it is submitted).

        A promotion (`promoted_from` set) is recorded here too, so a crash after
        this commit never promotes the same trial again; the database refuses a
        second promotion of one trial (unique on experiment and promoted_from)."""
        now = utcnow()
        values: dict[str, Any] = {
            "experiment_id": experiment_id,
            "index": index,
            "parameters": parameters,
            "status": TrialStatus.CANDIDATE.value,
            "generation_method": generation_method,
            "job_name": job_name,
            "log_dir": log_dir,
            "runner_metadata": {},
            "reader_state": {},
            "values": {},
            "created_at": now,
            "fidelity": fidelity,
            "promoted_from": promoted_from,
        }
        try:
            with self._transaction() as c:
                key = c.execute(_INSERT_TRIAL, values).inserted_primary_key
                assert key is not None
                c.execute(_INSERT_EVENT, {
                    "experiment_id": experiment_id, "trial_index": index, "time": now, "kind": "candidate",
                    "message": f"trial {index} proposed by {generation_method}" if promoted_from is None
                    else f"trial {promoted_from} promoted to {fidelity:g} as trial {index}",
                })
            return _trial_from({**values, "id": key[0]})
        except IntegrityError:
            # A retry after a lost connection whose commit had gone through: the
            # same trial is already there. Anything else is a real conflict.
            with self.session() as s:
                existing = s.scalar(
                    select(TrialRow).where(TrialRow.experiment_id == experiment_id, TrialRow.index == index)
                )
                if existing is not None and existing.parameters == parameters:
                    return trial_record(existing)
            raise

    @retrying
    def mark_trial_running(
        self, trial_id: int, job_handle: str, scheduler: str, runner_metadata: dict[str, Any],
        devices: Sequence[str] | None = None, attempts: Sequence[Mapping[str, Any]] | None = None,
        at: datetime | None = None,
    ) -> TrialRecord:
        """RUNNING with its job handle (and the devices it was placed on, if any), at `at`
        (naive UTC; default now: a simulated run gives its own clock's time).

        `attempts`, when given, is the trial's attempts with the one just started
        last; the trial's `started_at` is its first attempt's start."""
        now = at or utcnow()
        changes: dict[str, Any] = {
            "status": TrialStatus.RUNNING.value, "job_handle": job_handle, "scheduler": scheduler,
            "runner_metadata": runner_metadata,
        }
        if attempts is not None:
            changes["attempts"] = [dict(a) for a in attempts]
        if attempts is None or len(attempts) <= 1:
            changes["started_at"] = now
        if devices is not None:
            changes.update(devices=list(devices), device_wait_since=None)
        number = len(attempts) if attempts else 1
        with self._transaction() as c:
            row = _update_trial(c, trial_id, changes)
            c.execute(_INSERT_EVENT, {
                "experiment_id": row["experiment_id"], "trial_index": row["index"], "time": now, "kind": "submitted",
                "message": f"trial {row['index']} submitted as {job_handle}"
                + (f" (attempt {number})" if number > 1 else ""),
            })
        return _trial_from(row)

    @retrying
    def set_attempts(self, trial_id: int, attempts: Sequence[Mapping[str, Any]]) -> TrialRecord:
        """Replace a trial's attempts (the loop records an ended attempt before it acts on it)."""
        with self._transaction() as c:
            return _trial_from(_update_trial(c, trial_id, {"attempts": [dict(a) for a in attempts]}))

    @retrying
    def retry_trial(self, trial_id: int, attempts: Sequence[Mapping[str, Any]], message: str) -> TrialRecord:
        """An attempt ended and the trial runs again: back to CANDIDATE with its
        attempts (the ended one last), no job, its devices free, and an event
        (`retry`, `message`) in the same transaction."""
        now = utcnow()
        changes: dict[str, Any] = {
            "status": TrialStatus.CANDIDATE.value, "job_handle": None, "runner_metadata": {},
            "attempts": [dict(a) for a in attempts], "devices": None, "device_wait_since": None,
        }
        with self._transaction() as c:
            row = _update_trial(c, trial_id, changes)
            device_sql.release(c, row["experiment_id"], row["index"])
            c.execute(_INSERT_EVENT, {
                "experiment_id": row["experiment_id"], "trial_index": row["index"], "time": now, "kind": "retry",
                "message": message,
            })
        return _trial_from(row)

    @retrying
    def finish_trial(
        self,
        trial_id: int,
        status: TrialStatus,
        values: dict[str, float] | None = None,
        failure_reason: str | None = None,
        log_tail: str | None = None,
        info: dict[str, Any] | None = None,
        observations: Sequence[Observation] = (),
        reader_state: dict[str, Any] | None = None,
        failure_class: str | None = None,
        attempts: Sequence[Mapping[str, Any]] | None = None,
        ended_at: datetime | None = None,
    ) -> TrialRecord:
        """End a trial (at `ended_at`, naive UTC; default now): status, final values, failure reason and class, log tail
        and the trial's own record of how it ran (`info`, from trial_info.json;
        kept if None), and its attempts (the last one ended; kept if None). The
        metrics read last (`observations`, and the reader's `reader_state`) are
        stored in the same transaction: one commit per finished trial instead of
        three."""
        assert status.is_terminal
        now = ended_at or utcnow()
        changes: dict[str, Any] = {
            "status": status.value,
            "values": {k: float(v) for k, v in (values or {}).items() if math.isfinite(float(v))},
            "failure_reason": failure_reason,
            "failure_class": failure_class,
            "log_tail": log_tail,
            "ended_at": now,
        }
        if attempts is not None:
            changes["attempts"] = [dict(a) for a in attempts]
        if info is not None:
            changes["info"] = info
        if reader_state is not None:
            changes["reader_state"] = reader_state
        with self._transaction() as c:
            row = _update_trial(c, trial_id, changes)
            _insert_observations(c, trial_id, observations)
            device_sql.release(c, row["experiment_id"], row["index"])  # its devices are free again
            msg = f"trial {row['index']} {status.value.lower()}" + (f": {failure_reason}" if failure_reason else "")
            c.execute(_INSERT_EVENT, {
                "experiment_id": row["experiment_id"], "trial_index": row["index"], "time": now, "kind": "finished",
                "message": msg,
            })
        return _trial_from(row)

    # --- device leases (nasctl/store/devices.py) -------------------------------
    @retrying
    def place_devices(
        self, host: str, owner: str, experiment_id: int, trial_index: int,
        choose: Callable[[list[DeviceLease]], Placement | None], is_stale: Callable[[DeviceLease], bool],
    ) -> tuple[list[str] | None, list[DeviceLease]]:
        """Lease devices on `host` for a trial: `choose` picks among the leases
        still held once ended and stale (`is_stale`) ones are dropped.

        Returns (devices, reclaimed): None when too few are free now.
        """
        now = utcnow()
        with self._transaction() as c:
            known = device_sql.has_host(c, host)
        if not known:
            try:
                with self._transaction() as c:
                    device_sql.add_host(c, host, now)
            except IntegrityError:
                pass  # another orchestrator created the host's row at the same moment
        try:
            with self._transaction() as c:
                return device_sql.place(c, host, owner, experiment_id, trial_index, now, choose, is_stale)
        except IntegrityError:
            return None, []  # lost a race the host lock should have prevented: try again next time

    @retrying
    def device_leases(self, host: str | None = None, experiment_id: int | None = None) -> list[DeviceLease]:
        with self._transaction() as c:
            return device_sql.leases(c, host, experiment_id)

    @retrying
    def adopt_devices(self, experiment_id: int, trial_index: int, owner: str) -> list[str]:
        """The devices a re-attached trial holds, now held by `owner`."""
        with self._transaction() as c:
            return device_sql.adopt(c, experiment_id, trial_index, owner)

    @retrying
    def release_devices(self, experiment_id: int, trial_index: int) -> None:
        with self._transaction() as c:
            device_sql.release(c, experiment_id, trial_index)

    @retrying
    def set_device_wait(self, trial_id: int, since: datetime | None) -> None:
        """Mark a candidate as waiting for devices since `since` (None: not waiting)."""
        with self._transaction() as c:
            c.execute(update(_TRIALS).where(_TRIALS.c.id == trial_id).values(device_wait_since=since))

    @retrying
    def save_reader_state(self, trial_id: int, state: dict[str, Any]) -> None:
        with self.session() as s:
            s.execute(update(TrialRow).where(TrialRow.id == trial_id).values(reader_state=state))

    @retrying
    def list_trials(
        self, experiment_id: int, statuses: Iterable[TrialStatus] | None = None
    ) -> list[TrialRecord]:
        with self.session() as s:
            q = select(TrialRow).where(TrialRow.experiment_id == experiment_id)
            if statuses is not None:
                q = q.where(TrialRow.status.in_([st.value for st in statuses]))
            return [trial_record(r) for r in s.scalars(q.order_by(TrialRow.index))]

    @retrying
    def get_trial(self, experiment_id: int, index: int) -> TrialRecord:
        with self.session() as s:
            row = s.scalar(select(TrialRow).where(TrialRow.experiment_id == experiment_id, TrialRow.index == index))
            if row is None:
                raise NotFoundError(f"no trial {index} in this experiment", "see `nasctl trials NAME`")
            return trial_record(row)

    @retrying
    def next_trial_index(self, experiment_id: int) -> int:
        with self.session() as s:
            top = s.scalar(select(func.max(TrialRow.index)).where(TrialRow.experiment_id == experiment_id))
            return 0 if top is None else int(top) + 1

    @retrying
    def reader_state(self, trial_id: int) -> dict[str, Any]:
        with self.session() as s:
            row = s.get(TrialRow, trial_id)
            return dict(row.reader_state or {}) if row else {}

    # --- observations -----------------------------------------------------
    @retrying
    def add_observations(self, trial_id: int, observations: Sequence[Observation],
                         reader_state: dict[str, Any] | None = None) -> int:
        """Insert observations, skipping (metric, step) pairs already stored, and
        save the reader's state with them (one transaction). Returns how many were new."""
        if reader_state is None and not any(math.isfinite(o.value) for o in observations):
            return 0
        with self._transaction() as c:
            n = _insert_observations(c, trial_id, observations)
            if reader_state is not None:
                c.execute(_trial_update(("reader_state",), False), {"trial_id": trial_id, "reader_state": reader_state})
            return n

    @retrying
    def observations(self, trial_id: int, metric: str | None = None) -> list[Observation]:
        with self.session() as s:
            q = select(ObservationRow).where(ObservationRow.trial_id == trial_id)
            if metric is not None:
                q = q.where(ObservationRow.metric == metric)
            return [
                Observation(r.metric, r.step, r.value, r.wall_time)
                for r in s.scalars(q.order_by(ObservationRow.metric, ObservationRow.step))
            ]

    @retrying
    def count_observations(self, experiment_id: int) -> int:
        with self.session() as s:
            return int(
                s.scalar(
                    select(func.count(ObservationRow.id))
                    .join(TrialRow, TrialRow.id == ObservationRow.trial_id)
                    .where(TrialRow.experiment_id == experiment_id)
                )
                or 0
            )

    # --- events -------------------------------------------------------------
    @retrying
    def add_event(self, experiment_id: int, kind: str, message: str, trial_index: int | None = None,
                  data: dict[str, Any] | None = None) -> None:
        with self.session() as s:
            s.add(EventRow(experiment_id=experiment_id, trial_index=trial_index, time=utcnow(), kind=kind,
                           message=message, data=data))

    @retrying
    def events(
        self, experiment_id: int, after_id: int = 0, limit: int = 1000, *,
        kinds: Sequence[str] | None = None, newest: bool = False,
    ) -> list[EventRecord]:
        """Events after `after_id` in id order (or the newest first with `newest`)."""
        with self.session() as s:
            q = select(EventRow).where(EventRow.experiment_id == experiment_id, EventRow.id > after_id)
            if kinds is not None:
                q = q.where(EventRow.kind.in_(list(kinds)))
            q = q.order_by(EventRow.id.desc() if newest else EventRow.id).limit(limit)
            return [
                EventRecord(r.id, r.experiment_id, r.time, r.kind, r.message, r.trial_index, r.data)
                for r in s.scalars(q)
            ]


def _pid_text(owner: LeaseOwner) -> str:
    return "?" if owner.pid is None else str(owner.pid)


def experiment_record(r: ExperimentRow) -> ExperimentRecord:
    """A record from an ORM row (for the store package's query modules too)."""
    return ExperimentRecord(
        id=r.id,
        name=r.name,
        spec=dict(r.spec),
        status=ExperimentStatus(r.status),
        work_dir=r.work_dir,
        created_at=r.created_at,
        updated_at=r.updated_at,
        status_reason=r.status_reason,
        lease_owner=r.lease_owner,
        lease_heartbeat=r.lease_heartbeat,
    )


def _trial_from(m: Mapping[str, Any]) -> TrialRecord:
    """A record from a trial's column values by name (a Core row's mapping, or what was just written)."""
    return TrialRecord(
        id=m["id"],
        experiment_id=m["experiment_id"],
        index=m["index"],
        parameters=dict(m["parameters"]),
        status=TrialStatus(m["status"]),
        generation_method=m["generation_method"],
        created_at=m["created_at"],
        job_name=m.get("job_name"),
        job_handle=m.get("job_handle"),
        scheduler=m.get("scheduler"),
        log_dir=m.get("log_dir"),
        runner_metadata=dict(m.get("runner_metadata") or {}),
        values=dict(m.get("values") or {}),
        started_at=m.get("started_at"),
        ended_at=m.get("ended_at"),
        failure_reason=m.get("failure_reason"),
        log_tail=m.get("log_tail"),
        info=dict(m["info"]) if m.get("info") is not None else None,
        devices=list(m["devices"]) if m.get("devices") is not None else None,
        device_wait_since=m.get("device_wait_since"),
        fidelity=m.get("fidelity"),
        promoted_from=m.get("promoted_from"),
        failure_class=m.get("failure_class"),
        attempts=[dict(a) for a in m.get("attempts") or []],
    )


def trial_record(r: TrialRow) -> TrialRecord:
    """A record from an ORM row (the ORM's attributes are named after the columns;
    for the store package's query modules too)."""
    return _trial_from({name: getattr(r, name) for name in _RECORD_COLUMNS})


__all__ = ["Store", "experiment_record", "trial_record", "utcnow"]
