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
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

LEASE_STALE_SECONDS = 30.0
"""How old an orchestrator's heartbeat may be before its experiment's lease is stale."""

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

        return cls(socket.gethostname(), os.getpid(), psutil.Process().create_time())

    def __str__(self) -> str:
        """The text stored as the lease's owner (`host:pid:start`, the start to the millisecond)."""
        pid = "" if self.pid is None else str(self.pid)
        if self.started is None:
            return f"{self.host}:{pid}"
        return f"{self.host}:{pid}:{self.started:.3f}"

    @property
    def on_this_host(self) -> bool:
        return self.host == socket.gethostname()

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


__all__ = [
    "LEASE_STALE_SECONDS", "IsAlive", "LeaseOwner", "heartbeat_stale", "lease_stale", "owner_alive", "owner_dead",
    "owner_id", "utcnow",
]
