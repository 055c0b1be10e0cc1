"""Each rule that decides whether a lease may be taken, or whether a placement may use
a device, asked where the answer must be yes and where it must be no: a test that
only checks "no overlap" cannot tell a too-cautious rule from a correct one.

The rules on lease owners and heartbeats themselves are in tests/unit/test_leases.py;
the service's lease and the takeover of its experiments in tests/e2e/test_service.py."""

from __future__ import annotations

import json
import socket
import time
from datetime import timedelta
from pathlib import Path

import psutil
import pytest

from nasctl.errors import LeaseError
from nasctl.leases import owner_alive, owner_id, utcnow
from nasctl.orchestration.devices import DevicePlacer, choose_devices
from nasctl.orchestration.views import orchestrator_alive
from nasctl.runners import SubmittedJob, get_runner
from nasctl.runners.devices import DeviceInventory
from nasctl.runners.launcher import EXIT, LAUNCH
from nasctl.store import Store
from nasctl.types import DeviceLease, TrialStatus

HOST = socket.gethostname()
DEAD = f"{HOST}:999999:1.000"  # no such pid on this host: known dead
ELSEWHERE = "other-host:123:1.000"  # cannot be checked from here


def lease(owner: str, device: str = "0", trial: int = 0, host: str = HOST, capacity: int = 1, slot: int = 0,
          state_dir: str | None = None) -> DeviceLease:
    meta = {"state_dir": state_dir, "submitted": time.time() - 3600} if state_dir else {}
    return DeviceLease(host, device, slot, capacity, 1, trial, owner, utcnow(), TrialStatus.RUNNING,
                       "local_cwd://x" if state_dir else None, meta, None)


# --- may a placement use a device? ---------------------------------------------------------------

def test_exclusive_placement_yes_with_enough_free_devices_no_with_too_few() -> None:
    inv = DeviceInventory(("0", "1", "2"))
    assert choose_devices(inv, 2, [lease("a", "1")]) == [("0", 0, 1), ("2", 0, 1)]  # yes: two are free
    assert choose_devices(inv, 2, [lease("a", "1"), lease("a", "2")]) is None  # no: one is free
    assert choose_devices(inv, 1, [lease("a", "0", capacity=2)]) == [("1", 0, 1)]  # a shared slot is not free


def test_shared_placement_yes_below_capacity_no_at_capacity_or_beside_an_exclusive_trial() -> None:
    inv = DeviceInventory(("0",), trials_per_device=2)
    assert choose_devices(inv, 1, [lease("a", "0", capacity=2)]) == [("0", 1, 2)]  # yes: one slot left
    full = [lease("a", "0", capacity=2), lease("a", "0", capacity=2, slot=1, trial=1)]
    assert choose_devices(inv, 1, full) is None  # no: both slots taken
    assert choose_devices(inv, 1, [lease("a", "0", capacity=1)]) is None  # no: held by a trial alone


# --- may a device lease of another orchestrator be reclaimed? -------------------------------------

def job_dir(tmp_path: Path, *, ended: bool) -> str:
    sdir = tmp_path / ("ended" if ended else "running") / "job"
    sdir.mkdir(parents=True)
    me = psutil.Process()
    (sdir / LAUNCH).write_text(json.dumps({"pid": me.pid, "create_time": me.create_time(), "host": HOST}))
    if ended:
        (sdir / EXIT).write_text(json.dumps({"returncode": 0, "ended": time.time()}))
    return str(sdir)


def test_a_lease_is_reclaimed_only_from_a_dead_owner_whose_job_has_ended(tmp_path: Path) -> None:
    db = Store(f"sqlite:///{tmp_path}/p.db", create=True)
    placer = DevicePlacer(db, DeviceInventory(("0",)), owner_id(), get_runner("local_cwd"), owner_alive)
    ended, running = job_dir(tmp_path, ended=True), job_dir(tmp_path, ended=False)
    assert placer.is_stale(lease(DEAD, state_dir=ended))  # yes: owner dead, job ended
    assert not placer.is_stale(lease(DEAD, state_dir=running))  # no: the job still runs
    assert not placer.is_stale(lease(owner_id(), state_dir=ended))  # no: our own lease
    assert not placer.is_stale(lease(ELSEWHERE, state_dir=ended))  # no: an owner we cannot check
    assert not placer.is_stale(lease(ELSEWHERE, host="other-host", state_dir=ended))  # no: another host's device
    other = DevicePlacer(db, DeviceInventory(("0",)), DEAD, get_runner("local_cwd"), owner_alive)
    assert owner_alive(owner_id()) is True
    assert not other.is_stale(lease(owner_id(), state_dir=ended))  # no: its owner is alive


# --- may an experiment be taken over? -------------------------------------------------------------

@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path}/t.db", create=True)


def test_an_experiment_lease_is_taken_yes_from_a_dead_or_silent_owner(store: Store) -> None:
    exp = store.create_experiment("e", {"name": "e"}, "/tmp/e")
    store.acquire_lease(exp.id, DEAD, 30.0, owner_alive)
    store.acquire_lease(exp.id, "me:1:1.000", 30.0, owner_alive)  # yes: the holder is known dead
    assert store.get_experiment("e").lease_owner == "me:1:1.000"
    store.acquire_lease(exp.id, ELSEWHERE, 0.0, owner_alive)  # yes: its heartbeat is stale (0 s limit)
    assert store.get_experiment("e").lease_owner == ELSEWHERE


def test_an_experiment_lease_is_taken_no_from_a_live_or_unknown_owner_with_a_fresh_heartbeat(store: Store) -> None:
    exp = store.create_experiment("e", {"name": "e"}, "/tmp/e")
    store.acquire_lease(exp.id, owner_id(), 30.0, owner_alive)
    with pytest.raises(LeaseError):
        store.acquire_lease(exp.id, ELSEWHERE, 30.0, owner_alive)  # no: alive and beating
    store.acquire_lease(exp.id, ELSEWHERE, 0.0, owner_alive)
    with pytest.raises(LeaseError):
        store.acquire_lease(exp.id, owner_id(), 30.0, owner_alive)  # no: cannot be checked, still beating
    assert store.get_experiment("e").lease_owner == ELSEWHERE


def test_orchestrator_alive_yes_while_held_and_beating_no_when_free_stale_or_dead(store: Store) -> None:
    exp = store.create_experiment("e", {"name": "e"}, "/tmp/e")
    assert not orchestrator_alive(store.get_experiment("e"))  # no: nobody holds it
    store.acquire_lease(exp.id, owner_id(), 30.0, owner_alive)
    assert orchestrator_alive(store.get_experiment("e"))  # yes: held, beating, alive
    store.acquire_lease(exp.id, ELSEWHERE, 0.0, owner_alive)
    assert orchestrator_alive(store.get_experiment("e"))  # yes: elsewhere, beating
    old = store.get_experiment("e")
    assert not orchestrator_alive(
        type(old)(**{**old.__dict__, "lease_heartbeat": utcnow() - timedelta(seconds=31)}))  # no: silent 31 s
    store.acquire_lease(exp.id, DEAD, 0.0, None)
    assert not orchestrator_alive(store.get_experiment("e"))  # no: its process is gone


def test_only_the_lease_holder_writes_the_experiment_status(store: Store) -> None:
    from nasctl.types import ExperimentStatus

    exp = store.create_experiment("e", {"name": "e"}, "/tmp/e")
    store.acquire_lease(exp.id, owner_id(), 30.0, owner_alive)
    assert store.set_experiment_status(exp.id, ExperimentStatus.RUNNING, owner=owner_id())  # yes: it holds it
    store.acquire_lease(exp.id, ELSEWHERE, 0.0, owner_alive)  # taken over
    assert not store.set_experiment_status(exp.id, ExperimentStatus.STOPPED, "lost", owner=owner_id())  # no
    assert store.get_experiment("e").status == ExperimentStatus.RUNNING


def test_a_loop_whose_lease_was_taken_over_leaves_the_status_to_the_new_owner(tmp_path: Path) -> None:
    from nasctl.orchestration.loop import Orchestrator
    from nasctl.runners.polling import ControlSettings
    from nasctl.types import ExperimentStatus
    from tests.helpers.loop import experiment, in_thread
    from tests.helpers.waiting import wait_for

    db, exp, spec, gen = experiment(tmp_path, "taken", [30.0], parallelism=1)
    orch = Orchestrator(db, exp, spec, get_runner("local_cwd"), gen, metrics_interval=0.1,
                        settings=ControlSettings(poll_interval=0.1))
    thread, out = in_thread(orch)
    wait_for("a running trial", lambda: db.list_trials(exp.id) and db.list_trials(exp.id)[0].status
             == TrialStatus.RUNNING)
    db.acquire_lease(exp.id, ELSEWHERE, 0.0, owner_alive)  # another orchestrator takes the experiment
    db.set_experiment_status(exp.id, ExperimentStatus.RUNNING, "driven elsewhere", owner=ELSEWHERE)
    thread.join(30)  # the loop notices at its next heartbeat (5 s) and leaves
    assert out["summary"].status == ExperimentStatus.STOPPED and "took over" in (out["summary"].reason or "")
    now = db.get_experiment("taken")
    assert (now.status, now.status_reason, now.lease_owner) == (ExperimentStatus.RUNNING, "driven elsewhere", ELSEWHERE)
    trial = db.list_trials(exp.id)[0]  # its job was left running for the new owner: end it here
    get_runner("local_cwd").cancel(SubmittedJob(trial.job_handle or "", trial.runner_metadata))
