"""The supervisor of `nasctl serve`: keeps every experiment of a database going.

One process, one thread per driven experiment, each running the same
orchestrator loop as `nasctl run` (nasctl/orchestration/loop.py) with its own
store connection; a crash or an optimizer error in one fails that experiment
only. A supervisor thread ticks once a second:

1. renews the service's lease (one `nasctl serve` per database; a second one
   is refused at start with the first one's host and pid);
2. forgets drivers whose loop has returned (COMPLETED, STOPPED, FAILED);
3. takes over every RUNNING experiment whose orchestrator is gone (its lease
   expired or its process died): after a crash or a kill -9 of the service,
   of a `nasctl run`, or of the machine, the loop re-attaches its running
   trials from the store and submits recorded candidates once;
4. starts QUEUED experiments in the order they were queued, while fewer than
   `max_experiments` are driven and (for local GPU trials) enough devices are
   free on this host.

Submission (`submit`) validates the spec exactly as `nasctl run` does, records
the experiment as QUEUED and returns at once. Stopping the service (`close`)
asks every loop to stop at its next step, leaving running trials to be
re-attached by the next start.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from nasctl.errors import AlreadyExistsError, LeaseError, NasctlError, NotFoundError
from nasctl.leases import owner_alive, owner_id
from nasctl.orchestration import control
from nasctl.orchestration.loop import Orchestrator
from nasctl.orchestration.views import orchestrator_alive
from nasctl.runners import get_runner
from nasctl.runners.pool import StatusPool
from nasctl.sources import source_of
from nasctl.spec import ExperimentSpec, spec_from_dict, spec_to_dict
from nasctl.store import Store
from nasctl.types import ExperimentRecord, ExperimentStatus

log = logging.getLogger("nasctl.server")

TICK_SECONDS = 1.0
SERVICE_STALE_SECONDS = 30.0
STOP_JOIN_SECONDS = 5.0
SERVICE_STOPPED = "the service stopped; the next `nasctl serve` on this database takes it over"


@dataclass
class Driver:
    """One experiment driven by the service: its thread and, once built, its loop."""

    name: str
    thread: threading.Thread
    started: float
    orchestrator: Orchestrator | None = None
    error: str | None = None
    generation_seconds: list[float] = field(default_factory=list)


class Supervisor:
    """Drives many experiments of one database (see the module docstring).

    Args:
        db_url: the database (created if it is a new SQLite file).
        work_root: trial files of submitted experiments go to `work_root/NAME`.
        max_experiments: at most this many are driven at once; others wait QUEUED.
        url: where the service's API listens (recorded in its lease, shown to a
            second service that is refused).
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
        self.drivers: dict[str, Driver] = {}
        self.status_pool = StatusPool()  # one status query per poll for all experiments on a cluster
        self.finished_generation_seconds: list[float] = []  # of loops that have ended
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self.host = socket.gethostname()

    # --- life cycle ------------------------------------------------------------------
    def start(self) -> None:
        """Take the service's lease (LeaseError when another service holds it) and start ticking."""
        control.prepare_orchestrator_process()
        self.store.acquire_service_lease(self.owner, self.url, SERVICE_STALE_SECONDS, owner_alive)
        self._step()  # take over and start what is waiting before the API answers
        self._thread = threading.Thread(target=self._run, name="nasctl-supervisor", daemon=True)
        self._thread.start()

    def close(self, join_seconds: float = STOP_JOIN_SECONDS) -> None:
        """Stop every loop at its next step (running trials stay running, to be
        re-attached by the next start), wait up to `join_seconds`, release the lease."""
        self._closing.set()
        with self._lock:
            drivers = list(self.drivers.values())
        for d in drivers:
            if d.orchestrator is not None:
                d.orchestrator.request_stop(SERVICE_STOPPED)
        deadline = time.monotonic() + join_seconds
        for d in drivers:
            d.thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        # what the service was driving stays the service's: RUNNING without an
        # orchestrator, so the next start takes it over before anything queued
        for d in drivers:
            try:
                exp = self.store.get_experiment(d.name)
                if exp.status == ExperimentStatus.STOPPED and exp.status_reason == SERVICE_STOPPED:
                    self.store.set_experiment_status(exp.id, ExperimentStatus.RUNNING, SERVICE_STOPPED)
            except NasctlError as e:
                log.warning("could not hand %s back: %s", d.name, e)
        try:
            self.store.release_service_lease(self.owner)
        except NasctlError as e:
            log.warning("could not release the service lease: %s", e)

    @property
    def healthy(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._closing.is_set()

    # --- submission --------------------------------------------------------------------
    def submit(self, spec: ExperimentSpec) -> ExperimentRecord:
        """Validate `spec` as `nasctl run` does and queue it.

        Raises:
            BadInputError: the spec cannot run (unknown parameters, devices, ...).
            AlreadyExistsError: an experiment of that name exists.
        """
        if self._closing.is_set():
            raise LeaseError("the service is stopping", "submit again once it has restarted")
        control.check_spec_runnable(spec)
        try:
            self.store.get_experiment(spec.name)
        except NotFoundError:
            pass
        else:
            raise AlreadyExistsError(f"experiment {spec.name!r} already exists in {self.store.display_url}",
                                     "pick another name (--name), or resume it from the dashboard")
        work_dir = str(Path(self.work_root, spec.name))
        exp = self.store.create_experiment(spec.name, spec_to_dict(spec), work_dir)
        self.store.set_experiment_status(exp.id, ExperimentStatus.QUEUED, "submitted to the service")
        return self.store.get_experiment(spec.name)

    def requeue(self, name: str) -> ExperimentRecord:
        """Queue a STOPPED or FAILED experiment again (the dashboard's resume).

        Raises:
            ConflictError-like LeaseError: it is running or already queued.
        """
        exp = self.store.get_experiment(name)
        if exp.status in (ExperimentStatus.RUNNING, ExperimentStatus.QUEUED):
            raise LeaseError(f"experiment {name!r} is {exp.status.value}", "nothing to resume")
        self.store.set_experiment_status(exp.id, ExperimentStatus.QUEUED, "resume requested")
        return self.store.get_experiment(name)

    # --- the tick ------------------------------------------------------------------------
    def _run(self) -> None:
        last = time.monotonic()
        while not self._closing.wait(max(0.0, self.tick - (time.monotonic() - last))):
            last = time.monotonic()
            try:
                if not self.store.service_heartbeat(self.owner):
                    log.error("another service took over this database's lease; stopping")
                    threading.Thread(target=self.close, daemon=True).start()
                    return
                self._step()
            except NasctlError as e:  # the database is away: the store retried; try again next tick
                log.warning("supervisor tick failed: %s", e)

    def _step(self) -> None:
        with self._lock:
            for name, d in list(self.drivers.items()):
                if not d.thread.is_alive():
                    if d.orchestrator is not None:
                        self.finished_generation_seconds += d.orchestrator.generation_seconds
                    del self.drivers[name]
        experiments = [e for e, _ in self.store.list_experiments()]
        for exp in sorted(experiments, key=lambda e: e.id):
            if exp.status == ExperimentStatus.RUNNING and exp.name not in self.drivers and not orchestrator_alive(exp):
                self._start(exp, "taken over: its orchestrator is gone")
        queued = sorted((e for e in experiments if e.status == ExperimentStatus.QUEUED and e.name not in self.drivers),
                        key=lambda e: (e.updated_at, e.id))
        for exp in queued:
            if len(self.drivers) >= self.max_experiments or self._closing.is_set():
                break
            if not self._devices_free(exp):
                break  # in order: later experiments wait behind it
            self._start(exp, None)

    def _devices_free(self, exp: ExperimentRecord) -> bool:
        """Are enough devices free on this host for the experiment's first trial?"""
        try:
            spec = spec_from_dict(exp.spec)
            gpu = spec.trial.resources.gpu
            if gpu <= 0 or not source_of(spec.trial).uses_trial_resources:  # a component's role says its GPUs
                return True
            inventory = get_runner(spec.runner.scheduler, spec.runner.cfg).device_inventory()
        except NasctlError:
            return True  # its driver meets the problem and fails the experiment with it
        if inventory is None:
            return True
        held = {lease.device for lease in self.store.device_leases(host=self.host)
                if lease.trial_status is not None and not lease.trial_status.is_terminal}
        return len([d for d in inventory.devices if d not in held]) >= gpu

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
        try:
            def keep(orch: Orchestrator) -> None:
                driver.orchestrator = orch
                if self._closing.is_set():
                    orch.request_stop("the service stopped before the experiment started")

            exp = store.get_experiment(name)
            work_root = None if os.path.isdir(exp.work_dir) or _creatable(exp.work_dir) else self.work_root
            control.resume_experiment(store, name, work_root=work_root, on_orchestrator=keep,
                                      status_pool=self.status_pool)
        except LeaseError as e:
            driver.error = e.message  # someone else drives it: leave it to them
        except NasctlError as e:
            driver.error = e.message
            self._fail(store, name, e.message + (f" ({e.hint})" if e.hint else ""))
        except Exception as e:  # the loop recorded the failure; keep the service up
            driver.error = f"{type(e).__name__}: {e}"
            log.exception("experiment %s failed", name)
            self._fail(store, name, f"orchestrator error: {type(e).__name__}: {e}")
        finally:
            store.close()

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
