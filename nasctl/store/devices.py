"""Device leases in SQL (revision 0004_device_leases): the statements behind
`Store.place_devices` and friends.

A placement runs in one transaction that first locks its host's row in
`device_hosts`, so placements on one host are decided one at a time on every
database (an UPDATE takes a row lock on PostgreSQL and MySQL, and the write lock
on SQLite, before anything is read). Inside it, leases whose trial ended (or is
gone) are dropped, leases the caller judges stale are dropped, and the caller's
choice among what is left is inserted. The unique key (host, device, slot)
stands behind the lock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import cast

from sqlalchemy import Table, and_, delete, insert, select, update
from sqlalchemy.engine import Connection

from nasctl.store.models import DeviceHostRow, DeviceLeaseRow, TrialRow
from nasctl.types import DeviceLease, Placement, TrialStatus

LEASES = cast(Table, DeviceLeaseRow.__table__)
HOSTS = cast(Table, DeviceHostRow.__table__)
_TRIALS = cast(Table, TrialRow.__table__)


def has_host(c: Connection, host: str) -> bool:
    return c.execute(select(HOSTS.c.host).where(HOSTS.c.host == host)).first() is not None


def add_host(c: Connection, host: str, now: datetime) -> None:
    """Create the host's lock row (IntegrityError when another process was first)."""
    c.execute(insert(HOSTS).values(host=host, updated_at=now))


def lock_host(c: Connection, host: str, now: datetime) -> None:
    c.execute(update(HOSTS).where(HOSTS.c.host == host).values(updated_at=now))


def leases(c: Connection, host: str | None = None, experiment_id: int | None = None) -> list[DeviceLease]:
    """Leases (of one host, or one experiment) with their trial's state, oldest first."""
    q = select(LEASES, _TRIALS.c.status, _TRIALS.c.job_handle, _TRIALS.c.runner_metadata, _TRIALS.c.log_dir).join(
        _TRIALS,
        and_(_TRIALS.c.experiment_id == LEASES.c.experiment_id, _TRIALS.c["index"] == LEASES.c.trial_index),
        isouter=True,
    )
    if host is not None:
        q = q.where(LEASES.c.host == host)
    if experiment_id is not None:
        q = q.where(LEASES.c.experiment_id == experiment_id)
    out = []
    for r in c.execute(q.order_by(LEASES.c.id)).mappings():
        out.append(DeviceLease(
            host=r["host"], device=r["device"], slot=r["slot"], capacity=r["capacity"],
            experiment_id=r["experiment_id"], trial_index=r["trial_index"], owner=r["owner"],
            acquired_at=r["acquired_at"], trial_status=TrialStatus(r["status"]) if r["status"] else None,
            job_handle=r["job_handle"], runner_metadata=dict(r["runner_metadata"] or {}), trial_dir=r["log_dir"],
        ))
    return out


def drop(c: Connection, lease: DeviceLease) -> None:
    c.execute(delete(LEASES).where(LEASES.c.host == lease.host, LEASES.c.device == lease.device,
                                   LEASES.c.slot == lease.slot))


def release(c: Connection, experiment_id: int, trial_index: int) -> None:
    c.execute(delete(LEASES).where(LEASES.c.experiment_id == experiment_id, LEASES.c.trial_index == trial_index))


def place(
    c: Connection, host: str, owner: str, experiment_id: int, trial_index: int, now: datetime,
    choose: Callable[[list[DeviceLease]], Placement | None],
    is_stale: Callable[[DeviceLease], bool],
) -> tuple[list[str] | None, list[DeviceLease]]:
    """Lock the host, drop ended and stale leases, and insert `choose`'s pick.

    Returns (devices, reclaimed): the devices now held by the trial (None when
    `choose` found too few free), and the leases dropped as stale or ended.
    A trial that already holds leases (a retry after a lost commit) gets them back.
    """
    lock_host(c, host, now)
    held: list[DeviceLease] = []
    reclaimed: list[DeviceLease] = []
    mine: list[str] = []
    for lease in leases(c, host=host):
        if lease.experiment_id == experiment_id and lease.trial_index == trial_index:
            mine.append(lease.device)
            continue
        if lease.trial_status is None or lease.trial_status.is_terminal or is_stale(lease):
            drop(c, lease)
            reclaimed.append(lease)
        else:
            held.append(lease)
    if mine:
        return mine, reclaimed
    picked = choose(held)
    if picked is None:
        return None, reclaimed
    c.execute(insert(LEASES), [
        {"host": host, "device": device, "slot": slot, "capacity": capacity, "experiment_id": experiment_id,
         "trial_index": trial_index, "owner": owner, "acquired_at": now}
        for device, slot, capacity in picked
    ])
    return [device for device, _, _ in picked], reclaimed


def adopt(c: Connection, experiment_id: int, trial_index: int, owner: str) -> list[str]:
    """Make `owner` the holder of a trial's leases (a resumed orchestrator re-attaching it)."""
    c.execute(update(LEASES).where(LEASES.c.experiment_id == experiment_id, LEASES.c.trial_index == trial_index)
              .values(owner=owner))
    rows = c.execute(select(LEASES.c.device).where(LEASES.c.experiment_id == experiment_id,
                                                   LEASES.c.trial_index == trial_index).order_by(LEASES.c.id))
    return [r[0] for r in rows]
