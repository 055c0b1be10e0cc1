"""Two orchestrators (or two services) that start at the same instant: exactly one
gets the lease, the other is refused with a LeaseError, on every database.

Each contender has its own Store (its own engine and connections), as two
processes would. To make the race happen every time rather than now and then,
the first contender is held right after it has read the lease, until the second
has finished its own attempt (or a second has passed: the second cannot finish
while the first holds the lock, which is the point). Without the lock taken
before the read, both read a free lease and both take it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, text

from nasctl.errors import LeaseError
from nasctl.leases import utcnow
from nasctl.store import Store
from nasctl.store import manage as store_manage
from nasctl.types import ExperimentRecord

HOLD_SECONDS = 1.0
"""How long the first contender waits, after its read, for the second to finish."""


def dead(owner: str) -> bool | None:
    """The owners named `gone:...` are dead processes; the contenders cannot be checked."""
    return False if owner.startswith("gone:") else None


def race(url: str, table: str, attempt: Callable[[Store, str], None],
         second: Callable[[Store, str], None] | None = None) -> dict[str, str]:
    """Run `attempt` as contender `a` (held after its read of `table`) and `second`
    (default: `attempt` too) as contender `b`. Returns each one's outcome ("won", or
    the name of the error it raised) and under "b waited" whether `b` ended only
    after `a` had gone on ("yes"), or while `a` was still held ("no")."""
    stores = {name: Store(url) for name in ("a", "b")}
    attempts = {"a": attempt, "b": second or attempt}
    a_read, a_held, b_done = threading.Event(), threading.Event(), threading.Event()

    def hold_after_read(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        s = statement.lstrip().upper()
        if s.startswith("SELECT") and table.upper() in s and not a_read.is_set():
            a_held.set()
            a_read.set()
            b_done.wait(HOLD_SECONDS)
            a_held.clear()

    event.listen(stores["a"].engine, "after_cursor_execute", hold_after_read)
    outcome: dict[str, str] = {}

    def contend(name: str) -> None:
        try:
            attempts[name](stores[name], f"host:{name}")
            outcome[name] = "won"
        except Exception as e:  # recorded, and checked by the caller
            outcome[name] = type(e).__name__
        if name == "b":
            outcome["b waited"] = "no" if a_held.is_set() else "yes"
            b_done.set()

    a = threading.Thread(target=contend, args=("a",))
    a.start()
    assert a_read.wait(30), "contender a never read the lease"
    b = threading.Thread(target=contend, args=("b",))
    b.start()
    a.join(60)
    b.join(60)
    for s in stores.values():
        s.close()
    return outcome


def one_winner(outcome: dict[str, str]) -> str:
    assert sorted((outcome["a"], outcome["b"])) == ["LeaseError", "won"], outcome
    return next(name for name, result in outcome.items() if result == "won")


def test_experiment_lease_one_of_two_simultaneous_orchestrators(db_url: str) -> None:
    store = Store(db_url, create=True)
    exp = store.create_experiment("e", {}, "/tmp/e")
    starts = {  # the lease as a crash left it: (owner, heartbeat)
        "free": (None, None),
        "held by a dead orchestrator": ("gone:1:0", utcnow()),  # a fresh heartbeat: only the owner check frees it
        "stale": ("gone:1:0", utcnow() - timedelta(hours=1)),
    }
    for start, (owner, beat) in starts.items():
        with store.engine.begin() as c:
            c.execute(text("UPDATE experiments SET lease_owner = :o, lease_heartbeat = :t WHERE id = :i"),
                      {"o": owner, "t": beat, "i": exp.id})
        outcome = race(db_url, "experiments",
                       lambda s, owner: s.acquire_lease(exp.id, owner, stale_after=60, is_alive=dead))
        winner = one_winner(outcome)
        assert outcome["b waited"] == "yes", outcome  # for a's decision: the row was locked
        assert store.get_experiment("e").lease_owner == f"host:{winner}", start
        assert store.heartbeat(exp.id, f"host:{winner}")
    store.close()


def test_service_lease_one_of_two_simultaneous_services(db_url: str) -> None:
    store = Store(db_url, create=True)
    for start in ("never taken", "held by a dead service"):
        if start != "never taken":
            with store.engine.begin() as c:
                c.execute(text("DELETE FROM service_leases"))
                c.execute(text("INSERT INTO service_leases (name, owner, heartbeat) VALUES ('service', :o, :t)"),
                          {"o": "gone:1:0", "t": utcnow()})
        outcome = race(db_url, "service_leases",
                       lambda s, owner: s.acquire_service_lease(owner, None, stale_after=60, is_alive=dead))
        winner = one_winner(outcome)
        if start != "never taken":  # no lock covers a row that is not there yet, except SQLite's
            assert outcome["b waited"] == "yes", outcome
        lease = store.service_lease()
        assert lease is not None and lease.owner == f"host:{winner}", start
        assert store.service_heartbeat(f"host:{winner}")
    store.close()


@pytest.mark.parametrize("action", ["rename", "rm"])
def test_no_rename_or_removal_of_an_experiment_an_orchestrator_just_took(db_url: str, action: str) -> None:
    """`nasctl rename`/`rm` checks that nobody drives the experiment, then changes it:
    an orchestrator that takes the lease in between waits until the change is made."""
    store = Store(db_url, create=True)
    exp = store.create_experiment("e", {"name": "e"}, "/tmp/e")

    def is_busy(e: ExperimentRecord) -> bool:
        return e.lease_owner is not None

    def change(s: Store, owner: str) -> None:
        if action == "rename":
            store_manage.rename_experiment(s, exp.id, "f", is_busy)
        else:
            store_manage.delete_experiment(s, exp.id, is_busy)

    def orchestrate(s: Store, owner: str) -> None:
        s.acquire_lease(exp.id, owner, stale_after=60)

    outcome = race(db_url, "experiments", change, orchestrate)
    assert outcome["a"] == "won" and outcome["b waited"] == "yes", outcome  # the change was made first
    if action == "rename":
        assert outcome["b"] == "won"
        assert store.get_experiment("f").lease_owner == "host:b"
    else:
        assert outcome["b"] == "NotFoundError"  # it then finds nothing to drive
        assert store.list_experiments() == []
    store.close()


@pytest.mark.parametrize("rounds", [20])
def test_experiment_lease_free_running_race(sqlite_url: str, rounds: int) -> None:
    """The same race without holding anyone: two threads released by one barrier, repeated."""
    store = Store(sqlite_url, create=True)
    exp = store.create_experiment("e", {}, "/tmp/e")
    stores = [Store(sqlite_url) for _ in range(2)]
    for r in range(rounds):
        with store.engine.begin() as c:
            c.execute(text("UPDATE experiments SET lease_owner = NULL, lease_heartbeat = NULL WHERE id = :i"),
                      {"i": exp.id})
        barrier = threading.Barrier(2)
        outcome: dict[int, str] = {}

        def contend(i: int) -> None:
            barrier.wait(10)
            try:
                stores[i].acquire_lease(exp.id, f"host:{r}-{i}", stale_after=60)
                outcome[i] = "won"
            except LeaseError:
                outcome[i] = "LeaseError"

        threads = [threading.Thread(target=contend, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(outcome.values()) == ["LeaseError", "won"], (r, outcome)
    for s in [store, *stores]:
        s.close()
