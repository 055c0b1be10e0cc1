"""One status query per poll for every experiment a service drives on a cluster.

`nasctl serve` runs one loop per experiment, each asking its runner for its own
jobs every poll interval. On a cluster that is N queries of the shared controller
or accounting per interval. A `StatusPool` answers them together: each loop's
runner is wrapped in a `PooledRunner` whose `status` goes through the pool, which
queries the scheduler once for every job any loop of that scheduler (and
configuration) asked about recently, and answers the other loops from that result
until it is `poll_interval` old. Everything else (submit, cancel, logs, find) goes
straight to the loop's own runner.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nasctl.errors import SchedulerUnreachable
from nasctl.runners.base import JobRequest, JobStatus, Runner, SubmittedJob
from nasctl.runners.devices import DeviceInventory

FORGET_AFTER_POLLS = 3
"""A job no loop has asked about for this many poll intervals is dropped from the pool's query."""


@dataclass
class _Group:
    """The jobs of one scheduler and configuration, and the last answer for them."""

    runner: Runner
    interval: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    jobs: dict[str, tuple[SubmittedJob, float]] = field(default_factory=dict)  # handle -> (job, last asked)
    answers: dict[str, JobStatus] = field(default_factory=dict)
    answered_at: float = float("-inf")
    error: SchedulerUnreachable | None = None
    queries: int = 0


class StatusPool:
    """Shares status queries between the loops of one process (see the module docstring).

    Args:
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._groups: dict[str, _Group] = {}
        self._lock = threading.Lock()

    def share(self, runner: Runner, cfg: Mapping[str, Any] | None, poll_interval: float) -> Runner:
        """`runner` with its status queries pooled with those of every other runner of the
        same scheduler and `cfg`; runners that do not ask for it (`Runner.shared_status`:
        local processes) are returned as they are."""
        if not runner.shared_status:
            return runner
        key = f"{runner.scheduler}:{json.dumps(dict(cfg or {}), sort_keys=True, default=str)}"
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = _Group(runner, poll_interval)
            group.interval = min(group.interval, poll_interval)
        return PooledRunner(runner, self, group)

    @property
    def queries(self) -> int:
        """Scheduler queries made so far, all groups together."""
        return sum(g.queries for g in self._groups.values())

    def status(self, group: _Group, jobs: Sequence[SubmittedJob]) -> dict[str, JobStatus]:
        """The status of `jobs` from the group's last answer if it is fresh and covers
        them, else from one new query for every job the group's loops asked about.

        Raises:
            SchedulerUnreachable: that query could not reach the scheduler (kept as
                the answer for the interval, so the other loops do not ask again).
        """
        with group.lock:
            now = self._clock()
            for job in jobs:
                group.jobs[job.handle] = (job, now)
            fresh = now - group.answered_at < group.interval
            if fresh and group.error is not None:
                raise group.error
            if not (fresh and all(j.handle in group.answers for j in jobs)):
                self._query(group, now)
            return {j.handle: group.answers[j.handle] for j in jobs if j.handle in group.answers}

    def _query(self, group: _Group, now: float) -> None:
        horizon = FORGET_AFTER_POLLS * group.interval
        group.jobs = {h: (j, t) for h, (j, t) in group.jobs.items() if now - t <= horizon}
        group.queries += 1
        group.answered_at = now
        try:
            group.answers = dict(group.runner.status([j for j, _ in group.jobs.values()]))
            group.error = None
        except SchedulerUnreachable as e:
            group.answers, group.error = {}, e
            raise


class PooledRunner(Runner):
    """A loop's runner whose status queries go through a `StatusPool`."""

    def __init__(self, inner: Runner, pool: StatusPool, group: _Group) -> None:
        self.inner, self._pool, self._group = inner, pool, group
        self.scheduler = inner.scheduler
        self.poll_interval = inner.poll_interval
        self.shared_status = True
        self.queues = inner.queues

    def dryrun(self, request: JobRequest) -> str:
        return self.inner.dryrun(request)

    def submit(self, request: JobRequest) -> SubmittedJob:
        return self.inner.submit(request)

    def status(self, jobs: Sequence[SubmittedJob]) -> Mapping[str, JobStatus]:
        return self._pool.status(self._group, jobs)

    def cancel(self, job: SubmittedJob) -> None:
        self.inner.cancel(job)

    def log_tail(self, job: SubmittedJob, lines: int = 40) -> str:
        return self.inner.log_tail(job, lines)

    def find(self, request: JobRequest) -> SubmittedJob | None:
        return self.inner.find(request)

    def close(self) -> None:
        self.inner.close()

    def notify_on_end(self, wake: Callable[[], None]) -> bool:
        return self.inner.notify_on_end(wake)

    def device_inventory(self) -> DeviceInventory | None:
        return self.inner.device_inventory()

    def check_gpu(self, gpu: int) -> None:
        self.inner.check_gpu(gpu)

    def check_nodes(self, nodes: int) -> None:
        self.inner.check_nodes(nodes)

    def check_resources(self, cpu: int, mem_mb: int, gpu: int, nodes: int = 1) -> None:
        self.inner.check_resources(cpu, mem_mb, gpu, nodes)


__all__ = ["PooledRunner", "StatusPool"]
