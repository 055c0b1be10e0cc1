"""A simulated GPU cluster: jobs that queue, train epoch by epoch, share devices and get preempted.

The event engine behind the `simulated` runner (nasctl/runners/simulated.py),
kept apart from it so that a benchmark can drive other optimizers through the
very same cluster (benchmarks/time_to_front.py): same durations, same
preemptions, same accounting of device time.

A job (`SimJob`) is one attempt of one trial. It is submitted at some instant,
waits `delay` seconds (a requeue after a preemption waits as Slurm's BeginTime
makes a requeued job wait), then runs its epochs one after the other from the
epoch it resumes at (`first_epoch`, 0 for a fresh start) to `last_epoch`. Epoch
k lasts `epoch_seconds(k)` times its device's share: a device that
`trials_per_device` lets several jobs hold runs each of them that many times
slower, counted when the epoch starts. A seeded hazard preempts a running job
after `preempt_after` running seconds (an exponential draw, `preemption_after`,
at a rate per device-hour): the epoch in progress is lost, and the device time
spent on it is counted as lost.

Everything is a pure function of the jobs submitted and the seeds: no real
time, no randomness outside `preemption_after`, jobs due at one instant are
processed in submission order.

Accounting per job: `gpu_seconds` (devices held x running seconds, divided by
the device's share, so two jobs sharing one device for an hour spend one
device-hour between them), of which `lost_seconds` were spent on a preempted or
cancelled epoch.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable, Mapping
from typing import Any
from dataclasses import dataclass, field


def preemption_key(parameters: Mapping[str, Any], attempt: int) -> str:
    """What seeds an attempt's preemption: its trial's parameters and its number, so a
    configuration meets the same preemptions in every run and every method of a seed."""
    return json.dumps({"parameters": dict(parameters), "attempt": attempt}, sort_keys=True, default=str)


def preemption_after(key: str, seed: int, rate_per_gpu_hour: float, gpus: int) -> float:
    """Running seconds before a job is preempted: an exponential draw at
    `rate_per_gpu_hour` x `gpus` (at least one device) per hour, seeded by `key`
    (`preemption_key`) and `seed`; inf at rate 0."""
    if rate_per_gpu_hour <= 0:
        return math.inf
    digest = hashlib.sha256(f"preempt:{seed}:{key}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    return rng.expovariate(rate_per_gpu_hour * max(1, gpus) / 3600.0)


def hazard_for_share(share: float, seconds: float, gpus: int = 1) -> float:
    """The rate per device-hour at which a job running `seconds` on `gpus` devices is
    preempted with probability `share` (0 <= share < 1)."""
    if not 0 <= share < 1:
        raise ValueError(f"a preempted share must be in [0, 1), got {share}")
    if share == 0:
        return 0.0
    return -math.log(1.0 - share) * 3600.0 / (seconds * max(1, gpus))


@dataclass
class SimJob:
    """One attempt of one trial on the simulated cluster.

    Attributes:
        key: unique name (the job name: each attempt has its own).
        submitted: when it was submitted (simulated seconds since the run's start).
        first_epoch: epochs already done when it starts (resumed from a checkpoint).
        last_epoch: the epoch it ends after (>= 1).
        epoch_seconds: the seconds epoch k (1-based) takes alone on its devices.
        delay: seconds it waits in the queue before it runs.
        devices: the devices it holds (for the share of each); () for none.
        gpus: how many devices it holds (the hazard's and the accounting's unit).
        preempt_after: running seconds before it is preempted (inf: never).
    """

    key: str
    submitted: float
    first_epoch: int
    last_epoch: int
    epoch_seconds: Callable[[int], float]
    delay: float = 0.0
    devices: tuple[str, ...] = ()
    gpus: int = 1
    preempt_after: float = math.inf
    order: int = -1
    running_since: float | None = None
    epochs_done: int = 0
    epoch_started: float | None = None
    epoch_end: float | None = None
    epoch_share: int = 1
    ended: float | None = None
    end_kind: str | None = None  # completed, preempted, failed, cancelled
    gpu_seconds: float = 0.0
    lost_seconds: float = 0.0
    epoch_ends: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.first_epoch = max(0, min(self.first_epoch, self.last_epoch))
        self.epochs_done = self.first_epoch

    @property
    def start(self) -> float:
        """When it starts (or started) running."""
        return self.submitted + self.delay

    @property
    def preempt_at(self) -> float:
        return math.inf if self.running_since is None else self.running_since + self.preempt_after

    def next_time(self) -> float | None:
        """The instant of its next event, None once it has ended."""
        if self.ended is not None:
            return None
        if self.running_since is None:
            return self.start
        assert self.epoch_end is not None
        return min(self.epoch_end, self.preempt_at)

    def accounting(self) -> dict[str, float | int | str | None]:
        """Its times and device time, as plain JSON."""
        return {"submitted": self.submitted, "running_since": self.running_since, "ended": self.ended,
                "end": self.end_kind, "first_epoch": self.first_epoch, "epochs_done": self.epochs_done,
                "last_epoch": self.last_epoch, "gpus": self.gpus, "gpu_seconds": self.gpu_seconds,
                "lost_seconds": self.lost_seconds}


@dataclass(frozen=True)
class SimEvent:
    """Something that happened to a job: `start` (it runs from now), `epoch` (epoch
    `epoch` ended; `final` when it was the last), `preempt` (it ended preempted)."""

    kind: str
    job: SimJob
    epoch: int = 0
    final: bool = False


class SimCluster:
    """The jobs of one simulated run and their events (see the module docstring)."""

    def __init__(self) -> None:
        self.jobs: dict[str, SimJob] = {}

    def add(self, job: SimJob) -> SimJob:
        """Submit a job (keys are unique: a job already there is returned as it is). One
        with no delay runs from its submission on."""
        if job.key in self.jobs:
            return self.jobs[job.key]
        job.order = len(self.jobs)
        self.jobs[job.key] = job
        if job.delay <= 0:
            job.running_since = job.submitted
            self._begin_epoch(job, job.submitted)
        return job

    def active(self) -> list[SimJob]:
        return [j for j in self.jobs.values() if j.ended is None]

    def next_time(self) -> float | None:
        """The earliest event among the jobs that have not ended, None when none is left."""
        times = [t for j in self.jobs.values() if (t := j.next_time()) is not None]
        return min(times) if times else None

    def step(self, now: float) -> list[SimEvent]:
        """Process every event due at or before `now`, jobs in submission order; a job
        may have several (it starts, and a zero-length epoch ends)."""
        events: list[SimEvent] = []
        for job in self.active():  # in submission order: `jobs` keeps the order they were added in
            while job.ended is None and (t := job.next_time()) is not None and t <= now:
                events.append(self._event(job, t))
        return events

    def _event(self, job: SimJob, t: float) -> SimEvent:
        if job.running_since is None:
            job.running_since = t
            self._begin_epoch(job, t)
            return SimEvent("start", job)
        assert job.epoch_end is not None and job.epoch_started is not None
        if job.epoch_end <= job.preempt_at:
            job.gpu_seconds += job.gpus * (job.epoch_end - job.epoch_started) / job.epoch_share
            job.epochs_done = min(job.epochs_done + 1, max(job.epochs_done, job.last_epoch))
            job.epoch_ends.append(t)
            final = job.epochs_done >= job.last_epoch
            if final:
                self._end(job, t, "completed")
            else:
                self._begin_epoch(job, t)
            return SimEvent("epoch", job, job.epochs_done, final)
        self._stop(job, t, "preempted")
        return SimEvent("preempt", job, job.epochs_done)

    def _begin_epoch(self, job: SimJob, t: float) -> None:
        job.epoch_started = t
        if job.epochs_done >= job.last_epoch:  # resumed past its end: it only reports
            job.epoch_end, job.epoch_share = t, 1
            return
        job.epoch_share = self._share(job)
        job.epoch_end = t + max(0.0, job.epoch_seconds(job.epochs_done + 1)) * job.epoch_share

    def _share(self, job: SimJob) -> int:
        """How many running jobs (this one included) hold the busiest of its devices."""
        if not job.devices:
            return 1
        running = [j for j in self.active() if j.running_since is not None]
        return max(sum(1 for j in running if d in j.devices) for d in job.devices) or 1

    def _end(self, job: SimJob, t: float, kind: str) -> None:
        job.ended, job.end_kind = t, kind
        job.epoch_end = None

    def _stop(self, job: SimJob, t: float, kind: str) -> None:
        """End a job in the middle of an epoch: the epoch's device time is spent and lost."""
        if job.running_since is not None and job.epoch_started is not None:
            spent = job.gpus * max(0.0, t - job.epoch_started) / job.epoch_share
            job.gpu_seconds += spent
            job.lost_seconds += spent
        self._end(job, t, kind)

    def fail(self, key: str, now: float) -> None:
        """End a job whose trial failed (its own error) at `now`."""
        job = self.jobs[key]
        if job.ended is None:
            self._stop(job, now, "failed")

    def cancel(self, key: str, now: float) -> None:
        """End a job at `now` (idempotent): the epoch in progress is lost."""
        job = self.jobs.get(key)
        if job is not None and job.ended is None:
            self._stop(job, now, "cancelled")


__all__ = ["SimCluster", "SimEvent", "SimJob", "hazard_for_share", "preemption_after", "preemption_key"]
