"""Notes, renaming, removal and bulk imports of experiments: the store's side of managing them.

Functions take a `Store` and run one transaction each in its `session()`. Whether
an experiment is being driven needs the orchestrator's liveness rules, which
live in `nasctl.orchestration`; callers hand them in as `is_busy`, and it is
asked about the row as read (and, outside SQLite, locked) inside the same
transaction that changes it, so no orchestrator can take the experiment over
between the check and the change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from nasctl.errors import AlreadyExistsError, BadInputError, ExperimentBusyError, NotFoundError
from nasctl.leases import utcnow
from nasctl.store.engine import retrying, rowcount
from nasctl.store.models import (
    EXPERIMENT_NOTE,
    DeviceLeaseRow,
    EventRow,
    ExperimentRow,
    NoteRow,
    ObservationRow,
    TrialRow,
)
from nasctl.store.store import Store, experiment_record
from nasctl.types import ExperimentRecord, Note, TrialStatus

MAX_NOTE_CHARS = 100_000
"""A note is prose, not a data store: longer text is refused."""

RENAMED = "renamed"
"""Event kind: the experiment got a new name; `data` holds {"old": ..., "new": ...}."""

NOTE_CHANGED = "note"
"""Event kind: a note was set or cleared (so pages following the experiment see it)."""


def _key(trial_index: int | None) -> int:
    if trial_index is not None and trial_index < 0:
        raise BadInputError(f"trial index {trial_index} is negative", "trial indices start at 0")
    return EXPERIMENT_NOTE if trial_index is None else trial_index


def _note(r: NoteRow) -> Note:
    return Note(r.experiment_id, None if r.trial_index == EXPERIMENT_NOTE else r.trial_index, r.text, r.updated_at)


@retrying
def get_note(store: Store, experiment_id: int, trial_index: int | None = None) -> Note | None:
    """The note on the experiment (`trial_index` None) or on one of its trials, if any."""
    with store.session() as s:
        row = s.scalar(select(NoteRow).where(NoteRow.experiment_id == experiment_id,
                                             NoteRow.trial_index == _key(trial_index)))
        return None if row is None else _note(row)


@retrying
def trial_notes(store: Store, experiment_id: int) -> dict[int, str]:
    """Every trial's note of an experiment, by trial index."""
    with store.session() as s:
        rows = s.execute(select(NoteRow.trial_index, NoteRow.text).where(
            NoteRow.experiment_id == experiment_id, NoteRow.trial_index != EXPERIMENT_NOTE))
        return {int(i): str(t) for i, t in rows}


@retrying
def set_note(store: Store, experiment_id: int, text: str, trial_index: int | None = None) -> Note | None:
    """Set the note on the experiment or on trial `trial_index`; empty (or blank) text removes it.
    Returns the note as stored (None once removed). Records a `note` event.

    Raises:
        BadInputError: the text is longer than MAX_NOTE_CHARS.
        NotFoundError: the experiment has no trial `trial_index`.
    """
    if len(text) > MAX_NOTE_CHARS:
        raise BadInputError(f"the note is {len(text)} characters long, more than {MAX_NOTE_CHARS}",
                            "shorten it, or link to a longer document from it")
    key = _key(trial_index)
    now = utcnow()
    where = "the experiment" if trial_index is None else f"trial {trial_index}"
    with store.session() as s:
        if trial_index is not None and s.scalar(select(TrialRow.id).where(
                TrialRow.experiment_id == experiment_id, TrialRow.index == trial_index)) is None:
            raise NotFoundError(f"no trial {trial_index} in this experiment", "see `nasctl trials NAME`")
        row = s.scalar(select(NoteRow).where(NoteRow.experiment_id == experiment_id, NoteRow.trial_index == key))
        if not text.strip():
            if row is not None:
                s.delete(row)
                s.add(EventRow(experiment_id=experiment_id, trial_index=trial_index, time=now, kind=NOTE_CHANGED,
                               message=f"note on {where} removed"))
            return None
        if row is None:
            row = NoteRow(experiment_id=experiment_id, trial_index=key, text=text, updated_at=now)
            s.add(row)
        else:
            row.text, row.updated_at = text, now
        s.add(EventRow(experiment_id=experiment_id, trial_index=trial_index, time=now, kind=NOTE_CHANGED,
                       message=f"note on {where} updated"))
        s.flush()
        return _note(row)


def _locked(s: Session, store: Store, experiment_id: int, is_busy: Callable[[ExperimentRecord], bool],
            action: str) -> ExperimentRow:
    store.lock_before_read(s, update(ExperimentRow).where(ExperimentRow.id == experiment_id)
                           .values(lease_owner=ExperimentRow.lease_owner))
    row = s.get(ExperimentRow, experiment_id, with_for_update=not store.is_sqlite)
    if row is None:
        raise NotFoundError(f"the experiment (id {experiment_id}) no longer exists", "see `nasctl ls`")
    if is_busy(experiment_record(row)):
        raise ExperimentBusyError(
            f"experiment {row.name!r} is {row.status.lower()}: it cannot be {action} while it is driven",
            f"stop it first with `nasctl stop {row.name}`",
        )
    return row


@retrying
def rename_experiment(store: Store, experiment_id: int, new_name: str,
                      is_busy: Callable[[ExperimentRecord], bool]) -> ExperimentRecord:
    """Give the experiment a new name (its spec's `name` too), with a `renamed` event.
    Its work directory stays where it is recorded; its trials keep their job names.

    Raises:
        ExperimentBusyError: `is_busy` says some process drives it.
        AlreadyExistsError: another experiment has that name.
    """
    now = utcnow()
    try:
        with store.session() as s:
            row = _locked(s, store, experiment_id, is_busy, "renamed")
            old = row.name
            if old == new_name:
                return experiment_record(row)
            row.name, row.spec, row.updated_at = new_name, {**row.spec, "name": new_name}, now
            s.add(EventRow(experiment_id=experiment_id, time=now, kind=RENAMED,
                           message=f"experiment renamed from {old} to {new_name}", data={"old": old, "new": new_name}))
            s.flush()
            return experiment_record(row)
    except IntegrityError:
        raise AlreadyExistsError(
            f"experiment {new_name!r} already exists in {store.display_url}",
            "pick another name, or remove that experiment first with `nasctl rm`",
        ) from None


@retrying
def delete_experiment(store: Store, experiment_id: int,
                      is_busy: Callable[[ExperimentRecord], bool]) -> dict[str, int]:
    """Remove the experiment and every row that belongs to it (observations, trials,
    events, device leases, notes) in one transaction. Files are not touched.
    Returns how many rows of each kind went.

    Raises:
        ExperimentBusyError: `is_busy` says some process drives it.
    """
    with store.session() as s:
        _locked(s, store, experiment_id, is_busy, "removed")
        trial_ids = select(TrialRow.id).where(TrialRow.experiment_id == experiment_id).scalar_subquery()
        counts = {}
        for label, stmt in (
            ("observations", delete(ObservationRow).where(ObservationRow.trial_id.in_(trial_ids))),
            ("trials", delete(TrialRow).where(TrialRow.experiment_id == experiment_id)),
            ("events", delete(EventRow).where(EventRow.experiment_id == experiment_id)),
            ("device_leases", delete(DeviceLeaseRow).where(DeviceLeaseRow.experiment_id == experiment_id)),
            ("notes", delete(NoteRow).where(NoteRow.experiment_id == experiment_id)),
            ("experiments", delete(ExperimentRow).where(ExperimentRow.id == experiment_id)),
        ):
            counts[label] = rowcount(s.execute(stmt.execution_options(synchronize_session=False)))
        return counts


@retrying
def trial_count(store: Store, experiment_id: int) -> int:
    with store.session() as s:
        return int(s.scalar(select(func.count(TrialRow.id)).where(TrialRow.experiment_id == experiment_id)) or 0)


@retrying
def work_dir_users(store: Store, work_dir: str) -> list[str]:
    """Names of the experiments whose recorded work directory is `work_dir`."""
    with store.session() as s:
        return list(s.scalars(select(ExperimentRow.name).where(ExperimentRow.work_dir == work_dir)))


@retrying
def work_dirs(store: Store) -> dict[str, str]:
    """Every experiment's recorded work directory, by experiment name."""
    with store.session() as s:
        return {str(n): str(w) for n, w in s.execute(select(ExperimentRow.name, ExperimentRow.work_dir))}


@retrying
def import_finished_trials(
    store: Store,
    experiment_id: int,
    trials: Sequence[tuple[int, dict[str, Any], str, dict[str, float]]],
    generation_method: str = "imported",
) -> int:
    """Insert finished trials in bulk: (index, parameters, status, values) each.

    For importing results produced elsewhere and for scale benchmarks: one
    transaction per call, with the same three events per trial (candidate,
    submitted, finished) the loop records, so the dashboard's change cursor and
    timelines see them. Returns the number of trials inserted.

    Raises:
        ValueError: a status that is not terminal.
    """
    now = utcnow()
    trial_rows: list[dict[str, Any]] = []
    event_rows: list[dict[str, Any]] = []
    for index, params, status, values in trials:
        if not TrialStatus(status).is_terminal:
            raise ValueError(f"trial {index}: status {status} is not terminal")
        trial_rows.append(
            {
                "experiment_id": experiment_id, "index": index, "parameters": params, "status": status,
                "generation_method": generation_method, "runner_metadata": {}, "reader_state": {},
                "values": values, "created_at": now, "started_at": now, "ended_at": now,
            }
        )
        for kind, msg in (("candidate", "proposed"), ("submitted", "imported"), ("finished", status.lower())):
            event_rows.append(
                {"experiment_id": experiment_id, "trial_index": index, "time": now, "kind": kind,
                 "message": f"trial {index} {msg}"}
            )
    with store.session() as s:
        for start in range(0, len(trial_rows), 5000):
            s.execute(insert(TrialRow), trial_rows[start : start + 5000])
        for start in range(0, len(event_rows), 5000):
            s.execute(insert(EventRow), event_rows[start : start + 5000])
    return len(trial_rows)


__all__ = ["MAX_NOTE_CHARS", "RENAMED", "NOTE_CHANGED", "get_note", "trial_notes", "set_note",
           "rename_experiment", "delete_experiment", "work_dirs", "work_dir_users", "trial_count",
           "import_finished_trials"]
