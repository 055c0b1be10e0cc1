"""The supervisor's queue decisions on a real database (no loops started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nasctl.errors import AlreadyExistsError
from nasctl.leases import owner_id
from nasctl.server.supervisor import Supervisor
from nasctl.spec import parse_spec
from nasctl.types import ExperimentStatus, TrialStatus
from tests.helpers.service import GPU_SPEC



def test_queued_experiments_wait_for_free_devices(tmp_path: Path) -> None:
    sup = Supervisor(f"sqlite:///{tmp_path / 's.db'}", str(tmp_path / "runs"), max_experiments=2, tick=3600)
    sup.start()  # active (the lease is free); no tick follows to start what is queued
    store = sup.store
    running = store.create_experiment("holder", {"name": "holder"}, str(tmp_path / "h"))
    t = store.add_trial(running.id, 0, {"x": 0.1}, "Sobol", "holder-0", str(tmp_path / "h" / "t0"))
    store.place_devices(sup.host, "elsewhere:1:0", running.id, 0, lambda held: [("0", 0, 1)], lambda _l: False)
    two = sup.submit(parse_spec(GPU_SPEC.format(name="two", gpu=2, per=1)))
    one = sup.submit(parse_spec(GPU_SPEC.format(name="one", gpu=1, per=1)))
    cpu = sup.submit(parse_spec(GPU_SPEC.format(name="cpu", gpu=0, per=1)))
    assert [e.status for e in (two, one, cpu)] == [ExperimentStatus.QUEUED] * 3
    assert not sup._devices_free(two)  # device 0 is leased: 1 of 2 free
    assert sup._devices_free(one) and sup._devices_free(cpu)
    store.finish_trial(t.id, TrialStatus.COMPLETED, {"f": 1.0})  # its lease ends with it
    assert sup._devices_free(two)
    sup.close()
    store.close()


def test_a_submission_whose_folder_holds_another_runs_trials_is_refused(tmp_path: Path) -> None:
    """As `nasctl run`: trial folders of a run not in the database (deleted without
    its files) would be read as the new experiment's own trials."""
    (tmp_path / "runs" / "old" / "trials" / "trial_0000").mkdir(parents=True)
    sup = Supervisor(f"sqlite:///{tmp_path / 's.db'}", str(tmp_path / "runs"), max_experiments=2, tick=3600)
    sup.start()
    with pytest.raises(AlreadyExistsError, match="holds trials of an earlier run") as refused:
        sup.submit(parse_spec(GPU_SPEC.format(name="old", gpu=0, per=1)))
    assert "under another name" in (refused.value.hint or "") and "--" not in (refused.value.hint or "")  # no CLI flag
    assert sup.store.list_experiments() == []
    assert sup.submit(parse_spec(GPU_SPEC.format(name="new", gpu=0, per=1))).status == ExperimentStatus.QUEUED
    sup.close()
    sup.store.close()


def test_an_experiment_whose_orchestrator_lives_is_not_taken_over(tmp_path: Path) -> None:
    """A RUNNING experiment leased by a live process with a fresh heartbeat (here a
    loop of this very process, as the Python API beside an embedded service) is
    left to it: one step starts no driver and writes no "taken over" event."""
    sup = Supervisor(f"sqlite:///{tmp_path / 's.db'}", str(tmp_path / "runs"), max_experiments=2, tick=3600)
    sup.start()
    store = sup.store
    exp = sup.submit(parse_spec(GPU_SPEC.format(name="driven", gpu=0, per=1)))
    store.set_experiment_status(exp.id, ExperimentStatus.RUNNING)
    store.acquire_lease(exp.id, owner_id(), 60.0)
    sup._step()
    assert sup.drivers == {}
    assert not [e for e in store.events(exp.id) if "taken over" in e.message]
    assert store.get_experiment("driven").status == ExperimentStatus.RUNNING
    assert store.get_experiment("driven").lease_owner == owner_id()
    sup.close()
    store.close()
