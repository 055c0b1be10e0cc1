"""The supervisor of `nasctl serve`: keeps every experiment of a database going.

One process, one thread per driven experiment, each running the same
orchestrator loop as `nasctl run` (nasctl/orchestration/loop.py) with its own
store connection; a crash or an optimizer error in one fails that experiment
only.

Every service of a database is active or standby, as the service lease says
(table service_leases: owner, heartbeat, URL). The active one holds it; any
other `nasctl serve` on the same database is a standby: it serves the dashboard
and API read-only (writes are refused with the active one's URL) and, each
tick, takes the lease once it is free (the active one stopped: SIGTERM releases
it) or stale (`service_lease_stale`: its process on this host is gone, or its
heartbeat is `SERVICE_STALE_SECONDS` old). An active service that finds its
lease taken (its heartbeat answers False: it was stalled or cut off from the
database that long) stops its loops, hands their experiments back and waits
as a standby. The supervisor thread ticks once a second; as active:

1. renews the service's lease;
2. forgets drivers whose loop has returned (COMPLETED, STOPPED, FAILED);
3. takes over every RUNNING experiment whose orchestrator is gone
   (`experiment_lease_stale`: its lease is free, its process on this host is
   dead, or its heartbeat is stale; stale sooner for the experiments of a
   service whose lease this one took over): after a crash or a kill -9 of the
   service, of a `nasctl run`, or of the machine, the loop re-attaches its
   running trials from the store and submits recorded candidates once;
4. starts QUEUED experiments in the order they were queued, while fewer than
   `max_experiments` are driven and (for local GPU trials) enough devices are
   free on this host.

Submission (`submit`) validates the spec exactly as `nasctl run` does, records
the experiment as QUEUED and returns at once. Stopping the service (`close`)
asks every loop to stop at its next step, leaving running trials to be
re-attached by the next active service, and releases the lease at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from nasctl.errors import LeaseError, NasctlError, NotFoundError
from nasctl.leases import (
    SERVICE_STALE_SECONDS,
    LeaseOwner,
    experiment_lease_stale,
    experiment_stale_after,
    host_name,
    owner_alive,
    owner_id,
    service_lease_stale,
    utcnow,
)
from nasctl.orchestration import control
from nasctl.orchestration.loop import Orchestrator
from nasctl.orchestration.views import orchestrator_alive
from nasctl.runners.pool import StatusPool
from nasctl.spec import ExperimentSpec, spec_from_dict
from nasctl.store import Store
from nasctl.types import ExperimentRecord, ExperimentStatus, ServiceLease

log = logging.getLogger("nasctl.server")

TICK_SECONDS = 1.0
STOP_JOIN_SECONDS = 5.0
SERVICE_STOPPED = "the service stopped; the next `nasctl serve` on this database takes it over"
SERVICE_REPLACED = "another nasctl serve took the service lease; it takes the experiment over"
ACTIVE, STANDBY = "active", "standby"


@dataclass
class Driver:
    """One experiment driven by the service: its thread and, once built, its loop."""

    name: str
    thread: threading.Thread
    started: float
    orchestrator: Orchestrator | None = None
    error: str | None = None
    generation_seconds: list[float] = field(default_factory=list)
    handover: str | None = None  # asked to stop for another service (the reason it was given)


class Supervisor:
    """Drives many experiments of one database while it holds the service lease;
    waits as a read-only standby while another service holds it (see the module
    docstring).

    Args:
        db_url: the database (created if it is a new SQLite file).
        work_root: trial files of submitted experiments go to `work_root/NAME`.
        max_experiments: at most this many are driven at once; others wait QUEUED.
        url: where the service's API listens (recorded in its lease while active,
            named to whoever writes to a standby).
    """

    def __init__(self, db_url: str | None, work_root: str, max_experiments: int = 4, url: str | None = None,
                 tick: float = TICK_SECONDS) -> None:
        self.store = Store(db_url, create=True)
        self.db_url = self.store.url
        self.work_root = str(Path(work_root).resolve())
        self.max_experiments = max_experiments
        self.url = url
        self.tick = tick
        self.owner = owner_id()
        self.started_at = time.time()
        self.role = STANDBY
        self.active_since: float | None = None  # when this service last became active
        self.active_lease: ServiceLease | None = None  # the active service's, as last read (ours while active)
        self.replaced: set[str] = set()  # owners of stale service leases this one took over
        self.drivers: dict[str, Driver] = {}
        self.status_pool = StatusPool()  # one status query per poll for all experiments on a cluster
        self.finished_generation_seconds: list[float] = []  # of loops that have ended
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self.host = host_name()

    # --- life cycle ------------------------------------------------------------------
    def start(self) -> None:
        """Become active if the service lease is free or stale (else standby), and start ticking."""
        control.prepare_orchestrator_process()
        self._claim()  # when active: take over and start what is waiting before the API answers
        self._thread = threading.Thread(target=self._run, name="nasctl-supervisor", daemon=True)
        self._thread.start()

    def close(self, join_seconds: float = STOP_JOIN_SECONDS) -> None:
        """Stop every loop at its next step (running trials stay running, to be
        re-attached by the next active service), wait up to `join_seconds`, release
        the lease (a standby takes it at its next tick)."""
        self._closing.set()
        deadline = time.monotonic() + join_seconds
        self._stop_drivers(SERVICE_STOPPED, deadline)
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        try:
            self.store.release_service_lease(self.owner)
        except NasctlError as e:
            log.warning("could not release the service lease: %s", e)

    @property
    def healthy(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._closing.is_set()

    @property
    def active(self) -> bool:
        return self.role == ACTIVE

    # --- the role ----------------------------------------------------------------------
    def _claim(self) -> bool:
        """Take the service lease if it is free or stale; True when this service is active.

        The lease is read first and taken (a write, under the row's lock, which decides
        again) only when it looks free or stale, so a standby's ticks cost one read."""
        lease = self.store.service_lease()
        if lease is not None and lease.owner != self.owner and not service_lease_stale(lease.owner, lease.heartbeat):
            self.active_lease = lease
            return False
        try:
            replaced = self.store.acquire_service_lease(self.owner, self.url, SERVICE_STALE_SECONDS, owner_alive)
        except LeaseError:  # another standby took it first
            self.active_lease = self.store.service_lease()
            return False
        # the last active service seen: the one whose stale lease was taken, or the one
        # that released it (its process is leaving; its loops' heartbeats stop with it)
        seen = lease.owner if lease is not None else self.active_lease.owner if self.active_lease else None
        self.replaced = {o for o in (replaced, seen) if o and o != self.owner}
        self.role, self.active_since = ACTIVE, time.time()
        self.active_lease = ServiceLease(self.owner, utcnow(), self.url)
        if self.replaced:
            log.warning("active: took over the service lease of this database from %s",
                        ", ".join(sorted(self.replaced)))
        self._step()
        return True

    def _demote(self) -> None:
        """The lease was taken by another service: stop driving, hand back, wait as standby."""
        log.error("another nasctl serve took the service lease of this database; "
                  "handing its experiments over and waiting as standby")
        self.role, self.active_since, self.replaced = STANDBY, None, set()
        self._stop_drivers(SERVICE_REPLACED, time.monotonic() + STOP_JOIN_SECONDS)
        self.active_lease = self.store.service_lease()

    def standby_refusal(self) -> tuple[str, str]:
        """What a write sent to this standby is answered: (message, hint), naming the active service."""
        lease = self.active_lease
        if lease is None or lease.owner == self.owner:
            return ("this nasctl serve is a standby and no service holds the lease of this database right now",
                    "retry in a few seconds: a standby takes the lease at its next tick")
        holder = LeaseOwner.parse(lease.owner)
        where = f"{lease.url} (pid {holder.pid} on {holder.host})" if lease.url else f"pid {holder.pid} on {holder.host}"
        return (f"this nasctl serve is a standby: the active service of this database is {where}",
                "send writes (submit, stop, resume, cancel, notes, rename, delete) to the active service; "
                "this one takes over when it stops")

    def _refuse_if_standby(self) -> None:
        if self._closing.is_set():
            raise LeaseError("the service is stopping", "submit again once it has restarted")
        if not self.active:
            raise LeaseError(*self.standby_refusal())

    # --- submission --------------------------------------------------------------------
    def submit(self, spec: ExperimentSpec) -> ExperimentRecord:
        """Validate `spec` as `nasctl run` does and queue it.

        Raises:
            BadInputError: the spec cannot run (unknown parameters, devices, ...).
            AlreadyExistsError: an experiment of that name exists, or its folder holds trials of another run.
            LeaseError: this service is stopping, or a standby.
        """
        self._refuse_if_standby()
        return control.submit_experiment(self.store, spec, self.work_root)

    def requeue(self, name: str) -> ExperimentRecord:
        """Queue a STOPPED or FAILED experiment again (the dashboard's resume).

        Raises:
            LeaseError: it is running or already queued, or this service is a standby.
        """
        self._refuse_if_standby()
        return control.requeue_experiment(self.store, name)

    # --- the tick ------------------------------------------------------------------------
    def _run(self) -> None:
        last = time.monotonic()
        while not self._closing.wait(max(0.0, self.tick - (time.monotonic() - last))):
            last = time.monotonic()
            try:
                self.tick_once()
            except NasctlError as e:  # the database is away: the store retried; try again next tick
                log.warning("supervisor tick failed: %s", e)

    def tick_once(self) -> None:
        """One tick (the supervisor thread's, each second): as a standby, claim the lease if
        it is free or stale; as the active service, renew it (or step down when it was
        taken) and `_step`."""
        if not self.active:
            self._reap()  # loops that were still stopping when this service lost the lease
            self._claim()
        elif not self.store.service_heartbeat(self.owner):
            self._demote()
        else:
            self.active_lease = ServiceLease(self.owner, utcnow(), self.url)
            self._step()

    def _step(self) -> None:
        self._reap()
        experiments = [e for e, _ in self.store.list_experiments()]
        for exp in sorted(experiments, key=lambda e: e.id):
            if (exp.status == ExperimentStatus.RUNNING and exp.name not in self.drivers
                    and experiment_lease_stale(exp.lease_owner, exp.lease_heartbeat, replaced_services=self.replaced)):
                self._take_over(exp)
        queued = sorted((e for e in experiments if e.status == ExperimentStatus.QUEUED and e.name not in self.drivers),
                        key=lambda e: (e.updated_at, e.id))
        for exp in queued:
            if len(self.drivers) >= self.max_experiments or self._closing.is_set() or not self.active:
                break
            if not self._devices_free(exp):
                break  # in order: later experiments wait behind it
            self._start(exp, None)

    def _take_over(self, exp: ExperimentRecord) -> None:
        """Take the lease of an experiment whose orchestrator is gone and drive it.

        The lease is taken here, by the rule that found it stale, so that the loop
        (same owner) finds it already its own."""
        stale_after = experiment_stale_after(exp.lease_owner, self.replaced)
        try:
            self.store.acquire_lease(exp.id, self.owner, stale_after, owner_alive)
        except (LeaseError, NotFoundError):  # another orchestrator was quicker, or it was removed
            return
        self._start(exp, "taken over: its orchestrator is gone")

    def _reap(self) -> None:
        """Forget drivers whose loop has returned; hand back what was stopped for another service."""
        with self._lock:
            ended = [d for d in self.drivers.values() if not d.thread.is_alive()]
            for d in ended:
                if d.orchestrator is not None:
                    self.finished_generation_seconds += d.orchestrator.generation_seconds
                del self.drivers[d.name]
        for d in ended:
            if d.handover is not None:
                self._hand_back(d.name, d.handover)

    def _hand_back(self, name: str, reason: str) -> None:
        """An experiment whose loop this service stopped for another service goes back to
        RUNNING without an orchestrator, so the active service takes it over before anything
        queued. Also when the loop stopped because the other service had already taken its
        lease (it then holds it, and drives the experiment)."""
        try:
            exp = self.store.get_experiment(name)
            taken = exp.lease_owner is not None and exp.lease_owner != self.owner
            if exp.status == ExperimentStatus.STOPPED and (exp.status_reason == reason or taken):
                self.store.restore_running(exp.id, reason)
        except NasctlError as e:
            log.warning("could not hand %s back: %s", name, e)

    def _stop_drivers(self, reason: str, deadline: float) -> None:
        """Ask every loop to stop for another service (trials keep running), wait for them
        until `deadline` (monotonic), and hand back those that stopped."""
        with self._lock:
            drivers = list(self.drivers.values())
        for d in drivers:
            d.handover = reason
            if d.orchestrator is not None:
                d.orchestrator.request_stop(reason)
        for d in drivers:
            d.thread.join(max(0.0, deadline - time.monotonic()))
        self._reap()

    def _devices_free(self, exp: ExperimentRecord) -> bool:
        """Are enough devices free on this host for the experiment's first trial? (`control.admits`)"""
        try:
            return control.admits(self.store, spec_from_dict(exp.spec), self.host)
        except NasctlError:
            return True  # its driver meets the problem and fails the experiment with it

    def _start(self, exp: ExperimentRecord, note: str | None) -> None:
        if note:
            self.store.add_event(exp.id, "service", f"nasctl serve ({self.host}) {note}")
        thread = threading.Thread(target=self._drive, args=(exp.name,), name=f"nasctl-exp-{exp.name}", daemon=True)
        driver = Driver(exp.name, thread, time.time())
        with self._lock:
            self.drivers[exp.name] = driver
        thread.start()

    def _drive(self, name: str) -> None:
        """One experiment's loop, on its own store connection; whatever it raises ends
        that experiment only (the loop has recorded it as FAILED with the traceback)."""
        driver = self.drivers[name]
        store = Store(self.db_url)
        failure: str | None = None
        try:
            def keep(orch: Orchestrator) -> None:
                driver.orchestrator = orch
                if driver.handover is not None or self._closing.is_set() or not self.active:
                    driver.handover = driver.handover or (SERVICE_STOPPED if self._closing.is_set() else SERVICE_REPLACED)
                    orch.request_stop(driver.handover)

            exp = store.get_experiment(name)
            work_root = None if os.path.isdir(exp.work_dir) or _creatable(exp.work_dir) else self.work_root
            control.resume_experiment(store, name, work_root=work_root, on_orchestrator=keep,
                                      status_pool=self.status_pool)
        except LeaseError as e:
            driver.error = e.message  # someone else drives it: leave it to them
        except NasctlError as e:
            driver.error = failure = e.message + (f" ({e.hint})" if e.hint else "")
        except Exception as e:  # the loop recorded the failure; keep the service up
            driver.error = f"{type(e).__name__}: {e}"
            failure = f"orchestrator error: {type(e).__name__}: {e}"
            log.exception("experiment %s failed", name)
        finally:
            self._release(store, name)  # taken by `_take_over` for a loop that may never have started
            if failure is not None:
                self._fail(store, name, failure)
            store.close()

    def _release(self, store: Store, name: str) -> None:
        try:
            store.release_lease(store.get_experiment(name).id, self.owner)
        except NotFoundError:
            pass
        except NasctlError as e:
            log.warning("could not release the lease of %s: %s", name, e)

    def _fail(self, store: Store, name: str, reason: str) -> None:
        """An experiment whose loop could not start (its spec no longer runs here) ends FAILED."""
        try:
            exp = store.get_experiment(name)
            if exp.status in (ExperimentStatus.QUEUED, ExperimentStatus.RUNNING) and not orchestrator_alive(exp):
                store.set_experiment_status(exp.id, ExperimentStatus.FAILED, reason)
        except NasctlError as e:
            log.warning("could not record the failure of %s: %s", name, e)

    # --- read back -------------------------------------------------------------------------
    def driven(self) -> list[str]:
        with self._lock:
            return sorted(self.drivers)

    def generation_seconds(self) -> list[float]:
        """Every proposal's seconds, of the loops driven since the service started."""
        with self._lock:
            live = [s for d in self.drivers.values() if d.orchestrator is not None
                    for s in d.orchestrator.generation_seconds]
            return self.finished_generation_seconds + live


def _creatable(path: str) -> bool:
    """Could `path` be created (its nearest existing parent is writable)?"""
    p = Path(path)
    while not p.exists():
        p = p.parent
    return os.access(p, os.W_OK)


__all__ = ["Supervisor", "Driver"]
