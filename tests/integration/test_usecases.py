"""The use cases every entry point shares (nasctl/orchestration/control.py): the
dashboard stops and cancels as `nasctl stop` does, and the service admits an
experiment exactly when device placement would place its first trial."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from nasctl.leases import owner_id
from nasctl.orchestration import control
from nasctl.orchestration.devices import choose_devices
from nasctl.runners.devices import DeviceInventory
from nasctl.server.supervisor import Supervisor
from nasctl.spec import parse_spec, spec_to_dict
from nasctl.store import Store, requests
from nasctl.types import ExperimentStatus, TrialStatus
from nasctl.web import create_app
from tests.helpers.service import GPU_SPEC, TOKEN


def _orphan(store: Store, tmp_path: Path, name: str) -> int:
    """A RUNNING experiment whose orchestrator is gone (killed): a running and a waiting trial."""
    spec = spec_to_dict(parse_spec(GPU_SPEC.format(name=name, gpu=0, per=1)))
    exp = store.create_experiment(name, spec, str(tmp_path / name))
    running = store.add_trial(exp.id, 0, {"x": 0.1}, "Sobol", f"{name}-0", str(tmp_path / name / "t0"))
    store.mark_trial_running(running.id, f"local_cwd://gone/{name}-0", "local_cwd", {})
    store.add_trial(exp.id, 1, {"x": 0.2}, "Sobol", f"{name}-1", str(tmp_path / name / "t1"))
    return exp.id


def test_a_dashboard_stop_without_a_live_orchestrator_stops_the_experiment(tmp_path: Path) -> None:
    """Recording a request nobody reads (a loop that takes the experiment over starts
    after it) would leave the experiment to run on: it is stopped at once instead."""
    url = f"sqlite:///{tmp_path / 'u.db'}"
    store = Store(url, create=True)
    exp_id = _orphan(store, tmp_path, "orphan")
    web = TestClient(create_app(store, token=TOKEN))
    r = web.post("/api/experiments/orphan/stop", headers={"X-Nasctl-Token": TOKEN}, json={"reason": "enough"})
    assert r.status_code == 200 and r.json()["requested"] is False and r.json()["kind"] == "stopped"
    exp = store.get_experiment("orphan")
    assert exp.status == ExperimentStatus.STOPPED and "enough" in (exp.status_reason or "")
    assert [t.status for t in store.list_trials(exp_id)] == [TrialStatus.RUNNING, TrialStatus.CANDIDATE]  # for resume
    # the service takes over only RUNNING experiments: this one is left stopped
    sup = Supervisor(url, str(tmp_path / "runs"), tick=3600)
    sup.start()
    sup._step()
    assert sup.drivers == {} and store.get_experiment("orphan").status == ExperimentStatus.STOPPED
    sup.close()
    assert web.post("/api/experiments/orphan/stop", headers={"X-Nasctl-Token": TOKEN}).status_code == 409
    store.close()


def test_a_dashboard_cancel_without_a_live_orchestrator_ends_the_trial(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'c.db'}", create=True)
    exp_id = _orphan(store, tmp_path, "orphan")
    web = TestClient(create_app(store, token=TOKEN))
    for index in (0, 1):
        r = web.post(f"/api/experiments/orphan/trials/{index}/cancel", headers={"X-Nasctl-Token": TOKEN})
        assert r.status_code == 200 and r.json()["requested"] is False, r.json()
    trials = store.list_trials(exp_id)
    assert [(t.status, t.failure_class) for t in trials] == [(TrialStatus.ABANDONED, "cancelled")] * 2
    assert requests.requests_after(store, exp_id) == []  # acted on, not left as requests
    r = web.post("/api/experiments/orphan/trials/0/cancel", headers={"X-Nasctl-Token": TOKEN})
    assert r.status_code == 409 and "ABANDONED" in r.json()["error"]
    store.close()


def test_with_a_live_orchestrator_stop_and_cancel_are_requests_it_acts_on(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'l.db'}", create=True)
    exp_id = _orphan(store, tmp_path, "driven")
    store.acquire_lease(exp_id, owner_id(), 60.0)  # an orchestrator in this very process drives it
    assert control.request_cancel(store, "driven", 1, "not needed")["requested"] is True
    assert control.request_stop(store, "driven", cancel=False, reason="enough")["requested"] is True
    assert [(q.kind, q.trial_index) for q in requests.requests_after(store, exp_id)] == [
        ("cancel_requested", 1), ("stop_requested", None)]
    assert store.get_experiment("driven").status == ExperimentStatus.RUNNING  # the loop stops it
    store.close()


def test_admission_and_placement_agree_with_shared_devices(tmp_path: Path) -> None:
    """Two trials per device: one trial on each of devices 0 and 1 leaves room on both,
    so the service admits a one-GPU experiment, as placement would place its trial."""
    sup = Supervisor(f"sqlite:///{tmp_path / 's.db'}", str(tmp_path / "runs"), tick=3600)
    sup.start()
    store = sup.store
    holder = store.create_experiment("holder", {"name": "holder"}, str(tmp_path / "h"))
    for i, device in enumerate(("0", "1")):
        store.add_trial(holder.id, i, {"x": 0.1}, "Sobol", f"holder-{i}", str(tmp_path / "h" / f"t{i}"))
        store.place_devices(sup.host, "elsewhere:1:0", holder.id, i, lambda held, d=device: [(d, 0, 2)],
                            lambda _l: False)
    inventory = DeviceInventory(("0", "1"), trials_per_device=2)
    held = store.device_leases(host=sup.host)
    for gpu, fits in ((1, True), (2, False)):
        spec = parse_spec(GPU_SPEC.format(name=f"g{gpu}", gpu=gpu, per=2))
        assert (choose_devices(inventory, gpu, held) is not None) is fits
        assert control.admits(store, spec, sup.host) is fits
        assert sup._devices_free(sup.submit(spec)) is fits
    sup.close()
    store.close()
