"""Launching a recorded trial: its job request, its devices, its submission.

A trial is launched in two steps so that the loop can take it off its queue in
between: `prepare` builds the request (a promotion resumes the checkpoint of the
trial it continues), leases GPUs where nasctl places them itself
(nasctl/orchestration/devices.py) and creates the trial's folder; `submit`
starts the job and records its handle (write-ahead: a crash between the two is
found again by the job's deterministic name, `Runner.find`).
"""

from __future__ import annotations

import dataclasses
import os
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from nasctl.errors import NotFoundError, RunnerError, SchedulerUnreachable, SpecError
from nasctl import failpoints
from nasctl.orchestration.context import RunContext
from nasctl.orchestration import attempts as attempts_mod
from nasctl.orchestration.devices import DevicePlacer
from nasctl.orchestration.fidelity import checkpoint_of
from nasctl.orchestration.jobs import build_request, trial_dir
from nasctl.orchestration.outcomes import Outcome, TrialOutcomes
from nasctl.orchestration.running import RunningTrial, disk_full
from nasctl.runners.base import JobRequest, attempt_suffix
from nasctl.runners.devices import visible_devices_env
from nasctl.types import TrialRecord, TrialStatus


class CannotLaunch(Exception):
    """A trial cannot be launched for a reason every later trial shares (its folder
    cannot be created): the run stops, candidates stay recorded for a resume."""


@dataclass(frozen=True)
class Prepared:
    """A trial ready to submit: its request (with its devices' environment) and devices."""

    request: JobRequest
    devices: list[str] | None


def devices_held(request: JobRequest, trials_per_device: int = 1) -> float:
    """The devices a trial holds while it runs: `resources.gpu` on each of its nodes, a
    share of each where trials share devices (`runner.cfg.trials_per_device`)."""
    return float(request.gpu * request.nodes) / trials_per_device


class TrialLauncher:
    """Builds, places and submits the jobs of one experiment's trials.

    Args:
        ctx: the run's context (its owner id goes on device leases; a launched trial
            is counted RUNNING in its ledger; messages say a trial waits for devices).
        outcomes: records the end of a trial that cannot be placed or submitted.
        owner_alive: True/False for a lease owner on this host, None when unknown.
    """

    def __init__(self, ctx: RunContext, outcomes: TrialOutcomes,
                 owner_alive: Callable[[str], bool | None]) -> None:
        self.store, self.exp, self.spec, self.runner, self.owner = ctx.store, ctx.exp, ctx.spec, ctx.runner, ctx.owner
        self._owner_alive = owner_alive
        self._messages = ctx.messages
        self._ledger = ctx.ledger
        self._clock = ctx.clock  # the times of the attempts it starts
        self._outcomes = outcomes
        self._placer: DevicePlacer | None = None  # created by the first trial that asks for a GPU
        self.waiting: set[int] = set()  # candidates marked as waiting for devices
        # candidates whose submission may have reached the scheduler although it did not
        # answer: looked for (`Runner.find`) before they are submitted again
        self.uncertain: set[int] = set()

    def launch_ready(self, queued: deque[TrialRecord], free: int
                     ) -> tuple[list[RunningTrial], SchedulerUnreachable | None]:
        """Launch queued candidates in order into up to `free` slots; stop at the
        first that waits for devices. A trial that cannot be placed or submitted
        ends FAILED and the next one is tried. When the scheduler cannot be reached,
        the trial goes back to the head of the queue (devices released) and
        launching stops: returns what was launched and that error.

        Raises:
            CannotLaunch: the work directory is full, or a trial's folder cannot be created.
        """
        launched: list[RunningTrial] = []
        while queued and len(launched) < free:
            full = disk_full(self.exp.work_dir)
            if full is not None:
                raise CannotLaunch(f"{full}; free space, then `nasctl resume {self.exp.name}`")
            rec = queued[0]
            try:
                prepared = self.prepare(rec)
            except SpecError as e:  # a component asking for more GPUs than there are
                queued.popleft()
                self._outcomes.finish(rec, TrialStatus.CANDIDATE, Outcome(TrialStatus.FAILED, f"cannot be placed: {e}"))
                continue
            if prepared is None:
                break  # waiting for devices; candidates start in order
            queued.popleft()
            try:
                run = self.submit(rec, prepared)
            except SchedulerUnreachable as e:  # a wait: the trial stays a candidate, first in line
                if prepared.devices:
                    self.store.release_devices(self.exp.id, rec.index)
                queued.appendleft(rec)
                self.uncertain.add(rec.index)
                return launched, e
            except RunnerError as e:  # finishing the trial releases its devices
                self._outcomes.finish(rec, TrialStatus.CANDIDATE,
                                      Outcome(TrialStatus.FAILED, f"submission failed: {e}"))
                continue
            self._ledger.move(TrialStatus.CANDIDATE, TrialStatus.RUNNING)
            launched.append(run)
        return launched, None

    def request(self, rec: TrialRecord, note: bool = False) -> JobRequest:
        """The job of a recorded trial's next attempt, under the name it was recorded
        with (an experiment renamed after the trial was proposed keeps finding its
        job). A retry resumes the trial's own last checkpoint; a promotion (first
        attempt, or a retry that left none) continues from the checkpoint the trial
        it was promoted from left, where there is one; otherwise it trains from
        scratch to its fidelity (said in an event when `note`)."""
        attempt = attempts_mod.next_number(rec)
        own = rec.log_dir or trial_dir(self.exp.work_dir, rec.index)
        resume = checkpoint_of(own) if attempt > 1 else None
        if resume is None and rec.promoted_from is not None:
            resume = self._promotion_checkpoint(rec, note)
        request = build_request(self.spec, self.exp.name, self.exp.work_dir, rec.index, rec.parameters,
                                resume_from=resume, attempt=attempt)
        if rec.job_name:
            request = dataclasses.replace(request, name=rec.job_name + attempt_suffix(attempt))
        return request

    def _promotion_checkpoint(self, rec: TrialRecord, note: bool) -> str | None:
        assert rec.promoted_from is not None
        try:
            source = self.store.get_trial(self.exp.id, rec.promoted_from)
        except NotFoundError:
            source = None
        src_dir = (source.log_dir if source is not None else None) or trial_dir(self.exp.work_dir, rec.promoted_from)
        resume = checkpoint_of(src_dir)
        if resume is None and note:
            self.store.add_event(self.exp.id, "promotion",
                                 f"trial {rec.index} trains from scratch: trial {rec.promoted_from} "
                                 f"left no checkpoint in {src_dir}", trial_index=rec.index)
        return resume

    def prepare(self, rec: TrialRecord) -> Prepared | None:
        """The request and devices of the next trial, None while it waits for devices.

        Raises:
            SpecError: the trial asks for more devices than the inventory has.
            CannotLaunch: its folder cannot be created (devices already released).
        """
        request = self.request(rec, note=rec.index not in self.waiting)
        placed = self._place(rec, request)
        if placed is None:
            return None
        try:
            os.makedirs(placed.request.trial_dir, exist_ok=True)
        except OSError as e:
            if placed.devices:
                self.store.release_devices(self.exp.id, rec.index)
            raise CannotLaunch(f"cannot create the trial folder {placed.request.trial_dir}: {e.strerror}; "
                               f"fix it, then `nasctl resume {self.exp.name}`") from None
        return placed

    def submit(self, rec: TrialRecord, prepared: Prepared) -> RunningTrial:
        """Start the job and record it as RUNNING.

        A candidate whose earlier submission went unanswered is looked for first
        (`Runner.find`): if that submission did reach the scheduler, its job is kept.

        Raises:
            RunnerError: nothing started.
            SchedulerUnreachable: the scheduler cannot be reached.
        """
        job = self.runner.find(prepared.request) if rec.index in self.uncertain else None
        if job is None:
            job = self.runner.submit(prepared.request)
        self.uncertain.discard(rec.index)
        failpoints.hit("after_submit")
        now = self._clock.now()
        started = attempts_mod.started(rec.attempts, job, now, queued=self.runner.queues,
                                       gpus=self.devices_held(prepared))
        rec = self.store.mark_trial_running(rec.id, job.handle, self.runner.scheduler, job.metadata,
                                            devices=prepared.devices, attempts=started, at=now)
        failpoints.hit("after_record_running")
        return RunningTrial.launched(rec, job, prepared.request.env["NASCTL_LOG_DIR"])

    def devices_held(self, prepared: Prepared) -> float:
        """The devices a trial holds while it runs, for its GPU-hours (`devices_held`)."""
        inventory = self.runner.device_inventory() if prepared.devices else None
        return devices_held(prepared.request, inventory.trials_per_device if inventory is not None else 1)

    def _place(self, rec: TrialRecord, request: JobRequest) -> Prepared | None:
        """Lease devices for a trial that asks for GPUs on a runner that places them
        itself: the request with its CUDA_VISIBLE_DEVICES and the devices, or None
        while too few are free."""
        inventory = self.runner.device_inventory() if request.gpu > 0 else None
        if inventory is None:
            return Prepared(request, None)
        self.runner.check_gpu(request.gpu)
        if self._placer is None:
            self._placer = DevicePlacer(self.store, inventory, self.owner, self.runner, self._owner_alive)
        devices, reclaimed = self._placer.place(self.exp.id, rec, request.gpu)
        for lease in reclaimed:
            if lease.trial_status is not None and not lease.trial_status.is_terminal:
                self.store.add_event(
                    self.exp.id, "devices",
                    f"device {lease.device} reclaimed from trial {lease.trial_index} of experiment "
                    f"{lease.experiment_id}: its orchestrator and job are gone", trial_index=rec.index)
        if devices is None:
            if rec.index not in self.waiting:
                self.waiting.add(rec.index)
                self.store.set_device_wait(rec.id, self._clock.now())
                self._messages.note(
                    f"trial {rec.index} waits for {request.gpu} free device{'s' if request.gpu > 1 else ''} "
                    f"(devices {','.join(inventory.devices)} are all in use)")
            return None
        self.waiting.discard(rec.index)
        return Prepared(dataclasses.replace(request, env={**request.env, **visible_devices_env(devices)}), devices)

    def stop_waiting(self, queued: Iterable[TrialRecord]) -> None:
        """Nobody waits for devices once the loop has ended: clear the marks of the queued trials."""
        for rec in queued:
            if rec.index in self.waiting:
                self.store.set_device_wait(rec.id, None)
        self.waiting.clear()
