"""Lease owners and the rules that say whether a lease is still held.

Three kinds of lease live in the store: an experiment's (one orchestrator
drives it), the service's (one `nasctl serve` per database) and a device's
(one trial per device slot). Each names its owner as `host:pid:start`, the
process that holds it: the host name, its pid and its start time (pids are
reused, the pair is not). This module is the one place that makes, reads and
judges that text; the store keeps it as a plain string.

A lease is stale (free to take over) when its owner's heartbeat is older than
the lease's limit, or when its owner runs on this host and is known to be
dead. An owner on another host cannot be checked from here: only its
heartbeat can free its lease.

The host part is the machine's host name, or `NASCTL_HOSTNAME` when set: the
name this process gives itself in leases (for containers or pods whose host
names collide, and for tests that play two hosts on one machine). Owners
whose host part differs from this process's are on "another host".
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

LEASE_STALE_SECONDS = 30.0
"""How old an orchestrator's heartbeat may be before its experiment's lease is stale."""

SERVICE_STALE_SECONDS = 15.0
"""How old the service's heartbeat (renewed each second) may be before a standby takes
its lease, and how old the heartbeat of an experiment that service drove may then be
before its lease is stale too (`experiment_stale_after`)."""

HOSTNAME_ENV = "NASCTL_HOSTNAME"

IsAlive = Callable[[str], bool | None]
"""Says of an owner: True alive, False known dead, None cannot tell from here."""


@dataclass(frozen=True)
class LeaseOwner:
    """A lease owner, parsed from its `host:pid:start` text.

    Attributes:
        host: the host name the owner ran on.
        pid: its process id; None when the text holds none that can be read
            (then its process cannot be checked).
        started: the process's start time in seconds since the epoch; None
            when the text records none (an older `host:pid` owner: any
            process with that pid counts as the owner); NaN when it records
            one that cannot be read (no process matches it).
    """

    host: str
    pid: int | None
    started: float | None

    @classmethod
    def parse(cls, text: str) -> LeaseOwner:
        """Read an owner's text. Never raises: parts it cannot read become None (or NaN, see `started`)."""
        host, _, rest = text.partition(":")
        pid_text, _, started_text = rest.partition(":")
        pid = int(pid_text) if pid_text.isdecimal() else None
        started: float | None = None
        if started_text:
            try:
                started = float(started_text)
            except ValueError:
                started = float("nan")
        return cls(host, pid, started)

    @classmethod
    def current(cls) -> LeaseOwner:
        """This process."""
        import psutil

        return cls(host_name(), os.getpid(), psutil.Process().create_time())

    def __str__(self) -> str:
        """The text stored as the lease's owner (`host:pid:start`, the start to the millisecond)."""
        pid = "" if self.pid is None else str(self.pid)
        if self.started is None:
            return f"{self.host}:{pid}"
        return f"{self.host}:{pid}:{self.started:.3f}"

    @property
    def on_this_host(self) -> bool:
        return self.host == host_name()

    def alive(self) -> bool | None:
        """True when the owner's process runs, False when it is known dead (on this
        host: no such pid, a zombie, or another process under a reused pid); None
        when it cannot be checked from here (another host, or no readable pid)."""
        import psutil

        if not self.on_this_host or self.pid is None:
            return None
        try:
            proc = psutil.Process(self.pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return False
            return self.started is None or abs(proc.create_time() - self.started) < 0.01
        except psutil.Error:
            return False


def host_name() -> str:
    """The host part of this process's lease owners: `NASCTL_HOSTNAME` when set, else the host name."""
    return os.environ.get(HOSTNAME_ENV) or socket.gethostname()


def owner_id() -> str:
    """This process as a lease owner: host, pid and process start time."""
    return str(LeaseOwner.current())


def owner_alive(owner: str) -> bool | None:
    """True/False for an owner on this host; None when it cannot be checked from here."""
    return LeaseOwner.parse(owner).alive()


def utcnow() -> datetime:
    """Now, as the store keeps times (naive UTC)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def heartbeat_stale(heartbeat: datetime | None, stale_after: float, now: datetime | None = None) -> bool:
    """Is a heartbeat (naive UTC) `stale_after` seconds old or more, or missing?"""
    if heartbeat is None:
        return True
    return (now or utcnow()) - heartbeat >= timedelta(seconds=stale_after)


def owner_dead(owner: str, is_alive: IsAlive | None = owner_alive) -> bool:
    """Is the owner known dead? Only `is_alive` returning False says so (by default,
    `owner_alive`: a process on this host that is gone); None (cannot tell) is not dead,
    and without `is_alive` nobody is known dead."""
    return is_alive is not None and is_alive(owner) is False


def lease_stale(
    owner: str | None, heartbeat: datetime | None, stale_after: float, *,
    now: datetime | None = None, is_alive: IsAlive | None = owner_alive,
) -> bool:
    """May the lease be taken over? Yes when nobody holds it, its heartbeat is stale
    (`heartbeat_stale`), or its owner is known dead (`owner_dead`; asked only of a
    fresh heartbeat's owner).

    Args:
        owner: the lease's owner text (None or empty: not held).
        heartbeat: its last heartbeat, naive UTC (None: never beat).
        stale_after: seconds after which a heartbeat is stale.
        now: naive UTC; default now.
        is_alive: tells whether an owner lives (default `owner_alive`); None skips that check.
    """
    return not owner or heartbeat_stale(heartbeat, stale_after, now) or owner_dead(owner, is_alive)


def service_lease_stale(owner: str | None, heartbeat: datetime | None, *, now: datetime | None = None,
                        is_alive: IsAlive | None = owner_alive) -> bool:
    """May a standby take the service's lease? `lease_stale` with `SERVICE_STALE_SECONDS`:
    nobody holds it, its heartbeat is that old, or its owner is known dead."""
    return lease_stale(owner, heartbeat, SERVICE_STALE_SECONDS, now=now, is_alive=is_alive)


def experiment_stale_after(owner: str | None, replaced_services: Collection[str] = ()) -> float:
    """After how many seconds without a heartbeat is an experiment lease held by `owner` stale?

    `LEASE_STALE_SECONDS`, except for an owner that is a service this one replaced
    because its service lease went stale (`replaced_services`): that process had
    stopped beating as a service, so its experiments' heartbeats (every 5 s) need to
    be missing for only `SERVICE_STALE_SECONDS` too. A takeover after the active
    service died on another host then takes about `SERVICE_STALE_SECONDS` in all,
    not that plus `LEASE_STALE_SECONDS`; an orchestrator of that process that
    still beats keeps its lease.
    """
    return SERVICE_STALE_SECONDS if owner and owner in replaced_services else LEASE_STALE_SECONDS


def experiment_lease_stale(owner: str | None, heartbeat: datetime | None, *,
                           replaced_services: Collection[str] = (), now: datetime | None = None,
                           is_alive: IsAlive | None = owner_alive) -> bool:
    """May a service take over an experiment whose lease this is? `lease_stale` with
    `experiment_stale_after(owner, replaced_services)`."""
    return lease_stale(owner, heartbeat, experiment_stale_after(owner, replaced_services), now=now,
                       is_alive=is_alive)


__all__ = [
    "HOSTNAME_ENV", "LEASE_STALE_SECONDS", "SERVICE_STALE_SECONDS", "IsAlive", "LeaseOwner", "experiment_lease_stale",
    "experiment_stale_after", "heartbeat_stale", "host_name", "lease_stale", "owner_alive", "owner_dead", "owner_id",
    "service_lease_stale", "utcnow",
]
