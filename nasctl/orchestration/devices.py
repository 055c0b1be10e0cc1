"""Device placement for local trials: which GPUs a trial gets, leased in SQL.

A trial asking for `gpu: k` gets k devices that no other running trial holds,
of any experiment driven from this host, through `CUDA_VISIBLE_DEVICES` (inside
the trial `cuda:0` is its first device). With `runner.cfg.trials_per_device: n`
up to n `gpu: 1` trials share one device; a trial asking for two or more
devices always holds them alone. A trial that finds too few free waits as a
CANDIDATE marked as waiting for devices, and is placed once enough are free.

Leases are rows in the store (nasctl/store/devices.py), written before the job
is submitted and dropped in the transaction that finishes the trial. A lease is
reclaimed by whoever places next when its trial has ended, or when its
orchestrator is dead and the trial's job is no longer running; a resumed
orchestrator adopts the leases of the trials it re-attaches.

Placement policy, the same on every host: a `gpu: 1` trial that may share goes
to the device with the fewest trials (the lowest index among equals), so sharing
starts only when every device is busy; otherwise the lowest-indexed free devices.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import timezone

from nasctl.leases import host_name, owner_dead
from nasctl.runners.base import Runner, SubmittedJob
from nasctl.runners.devices import DeviceInventory
from nasctl.store import Store
from nasctl.types import DeviceLease, Placement, TrialRecord


def choose_devices(inventory: DeviceInventory, need: int, held: Sequence[DeviceLease]) -> Placement | None:
    """The (device, slot, capacity) leases for a trial needing `need` devices, given
    the leases `held` on this host; None when too few are free now."""
    by_device: dict[str, list[DeviceLease]] = {}
    for lease in held:
        by_device.setdefault(lease.device, []).append(lease)
    per = inventory.trials_per_device
    if need == 1 and per > 1:
        best: tuple[int, int, str] | None = None
        for pos, device in enumerate(inventory.devices):
            users = by_device.get(device, [])
            capacity = min([per, *(u.capacity for u in users)])
            if len(users) < capacity and (best is None or (len(users), pos) < best[:2]):
                best = (len(users), pos, device)
        if best is None:
            return None
        device = best[2]
        taken = {u.slot for u in by_device.get(device, [])}
        slot = next(s for s in range(per + len(taken)) if s not in taken)
        return [(device, slot, per)]
    free = [d for d in inventory.devices if not by_device.get(d)]
    if len(free) < need:
        return None
    return [(d, 0, 1) for d in free[:need]]


class DevicePlacer:
    """Places one orchestrator's trials on devices of this host.

    Args:
        store: where leases live.
        inventory: the devices this experiment may use (runner.cfg.devices, ...).
        owner: the orchestrator's lease owner id (host:pid:start).
        runner: asked whether the job of a dead orchestrator's lease still runs.
        owner_alive: True/False for a lease owner on this host, None when unknown.
    """

    def __init__(self, store: Store, inventory: DeviceInventory, owner: str, runner: Runner,
                 owner_alive: Callable[[str], bool | None]) -> None:
        self.store = store
        self.inventory = inventory
        self.owner = owner
        self.runner = runner
        self._owner_alive = owner_alive
        self.host = host_name()  # NASCTL_HOSTNAME where set, as in the lease owners

    def place(self, experiment_id: int, trial: TrialRecord, need: int) -> tuple[list[str] | None, list[DeviceLease]]:
        """Lease `need` devices for `trial`. Returns (devices or None when too few
        are free, the leases reclaimed on the way)."""
        return self.store.place_devices(
            self.host, self.owner, experiment_id, trial.index,
            lambda held: choose_devices(self.inventory, need, held), self.is_stale,
        )

    def is_stale(self, lease: DeviceLease) -> bool:
        """A lease of an orchestrator that is gone, whose trial's job is not running."""
        if lease.owner == self.owner or lease.host != self.host:
            return False
        if not owner_dead(lease.owner, self._owner_alive):
            return False
        metadata = dict(lease.runner_metadata)
        if not metadata.get("state_dir") and lease.trial_dir:
            # leased but not recorded as submitted: the job, if it started, left its state here
            metadata = {"state_dir": os.path.join(lease.trial_dir, "job"),
                        "submitted": lease.acquired_at.replace(tzinfo=timezone.utc).timestamp()}
        job = SubmittedJob(lease.job_handle or "", metadata)
        state = self.runner.status([job]).get(job.handle)
        return state is not None and state.state.is_terminal
