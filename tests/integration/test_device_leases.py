"""Device leases on real SQLite, PostgreSQL and MariaDB: placements racing from
several processes never hand out a device twice; leases end with their trial,
are reclaimed when stale, and are adopted on resume."""

from __future__ import annotations

import multiprocessing
from datetime import datetime

from nasctl.orchestration.devices import choose_devices
from nasctl.runners.devices import DeviceInventory
from nasctl.store import Store
from nasctl.types import DeviceLease, TrialStatus

INVENTORY = DeviceInventory(("0", "1", "2", "3"))


def _place(args: tuple[str, int, int, int, int]) -> list[str] | None:
    url, experiment_id, index, need, start = args
    store = Store(url)
    while datetime.now().timestamp() < start:  # start together: the placements race
        pass
    devices, _ = store.place_devices("node", f"node:{100 + index}:0", experiment_id, index,
                                     lambda held: choose_devices(INVENTORY, need, held), lambda _lease: False)
    store.close()
    return devices


def _experiment(store: Store, name: str, trials: int) -> tuple[int, list[int]]:
    exp = store.create_experiment(name, {"name": name}, "/tmp/x")
    ids = [store.add_trial(exp.id, i, {"x": i}, "Sobol", f"{name}-{i}", f"/tmp/x/trial_{i}").id for i in range(trials)]
    return exp.id, ids


def test_racing_placements_never_share_a_device(db_url: str) -> None:
    store = Store(db_url, create=True)
    a, _ = _experiment(store, "a", 6)
    b, _ = _experiment(store, "b", 6)
    start = datetime.now().timestamp() + 2.0
    jobs = [(db_url, a, i, 1, start) for i in range(6)] + [(db_url, b, i, 2, start) for i in range(6)]
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        results = pool.map(_place, jobs)
    placed = [d for r in results if r for d in r]
    assert len(placed) == len(set(placed)) and set(placed) <= set(INVENTORY.devices)
    held = store.device_leases(host="node")
    assert sorted(lease.device for lease in held) == sorted(placed)
    assert len(placed) >= 3  # the last free devices were not lost in the race (at least 3 of 4 used)
    store.close()


def test_leases_end_with_the_trial_are_reclaimed_and_adopted(db_url: str) -> None:
    store = Store(db_url, create=True)
    exp, ids = _experiment(store, "e", 4)

    def place(index: int, owner: str, stale: bool = False) -> list[str] | None:
        devices, _ = store.place_devices("node", owner, exp, index,
                                         lambda held: choose_devices(INVENTORY, 2, held), lambda _l: stale)
        return devices

    assert place(0, "node:1:0") == ["0", "1"]
    assert place(0, "node:1:0") == ["0", "1"]  # asking again returns what the trial holds
    assert place(1, "node:1:0") == ["2", "3"]
    assert place(2, "node:1:0") is None  # all four are held
    store.mark_trial_running(ids[0], "h0", "local_cwd", {}, devices=["0", "1"])
    assert store.get_trial(exp, 0).devices == ["0", "1"]
    store.finish_trial(ids[0], TrialStatus.COMPLETED, {"f": 1.0})  # ends its leases in the same transaction
    assert place(2, "node:1:0") == ["0", "1"]
    # trial 1's orchestrator is gone and its job ended: the next placement reclaims its devices
    seen: list[DeviceLease] = []
    devices, reclaimed = store.place_devices("node", "node:2:0", exp, 3, lambda held: choose_devices(INVENTORY, 2, held),
                                             lambda lease: seen.append(lease) or lease.trial_index == 1)
    assert devices == ["2", "3"] and [lease.trial_index for lease in reclaimed] == [1, 1]
    assert {lease.trial_index for lease in seen} == {1, 2} and all(lease.trial_dir for lease in seen)
    # a resumed orchestrator adopts what its re-attached trial holds
    assert store.adopt_devices(exp, 3, "node:3:0") == ["2", "3"]
    assert {lease.owner for lease in store.device_leases(experiment_id=exp) if lease.trial_index == 3} == {"node:3:0"}
    store.release_devices(exp, 3)
    assert [lease.trial_index for lease in store.device_leases()] == [2, 2]
    store.set_device_wait(ids[1], datetime(2026, 1, 1))
    assert store.get_trial(exp, 1).device_wait_since == datetime(2026, 1, 1)
    store.close()


def test_a_placement_sees_every_experiments_leases_on_its_host(db_url: str) -> None:
    """Two experiments share a host: the second's trial is placed beside the
    first's at once, on a free device, not on the one the first holds."""
    store = Store(db_url, create=True)
    a, _ = _experiment(store, "first", 1)
    b, _ = _experiment(store, "second", 1)
    devices, _ = store.place_devices("node", "node:1:0", a, 0, lambda held: choose_devices(INVENTORY, 1, held),
                                     lambda _l: False)
    assert devices == ["0"]
    devices, reclaimed = store.place_devices("node", "node:2:0", b, 0, lambda held: choose_devices(INVENTORY, 1, held),
                                             lambda _l: False)
    assert devices == ["1"] and reclaimed == []
    assert sorted((lease.experiment_id, lease.device) for lease in store.device_leases(host="node")) == [(a, "0"), (b, "1")]
    store.close()
