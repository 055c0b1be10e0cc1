"""What trials used: running time, queue wait and GPU-hours, from their attempts.

A trial's duration is the time its jobs ran, not the time they waited in the
scheduler's queue (shown beside it). GPU-hours are devices held x running time,
per attempt (nasctl/orchestration/attempts.py keeps the seconds). The part spent
without a result that counts is shown apart as `lost`: attempts that ended in a
failure (retried or not), the runs before a restart that started over, and
trials that ended FAILED or ABANDONED. `budget.max_gpu_hours` is checked against
the total (nasctl/orchestration/ledger.py).

Functions take `now` (epoch seconds) for attempts still waiting or running.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nasctl.orchestration.attempts import epoch
from nasctl.types import TrialRecord, TrialStatus

HOUR = 3600.0


@dataclass(frozen=True)
class Usage:
    """Seconds of running and waiting, and device-seconds (total and lost)."""

    run_s: float = 0.0
    queued_s: float = 0.0
    gpu_s: float = 0.0
    lost_gpu_s: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.run_s + other.run_s, self.queued_s + other.queued_s, self.gpu_s + other.gpu_s,
                     self.lost_gpu_s + other.lost_gpu_s)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.run_s - other.run_s, self.queued_s - other.queued_s, self.gpu_s - other.gpu_s,
                     self.lost_gpu_s - other.lost_gpu_s)

    @property
    def gpu_hours(self) -> float:
        return self.gpu_s / HOUR

    @property
    def lost_gpu_hours(self) -> float:
        return self.lost_gpu_s / HOUR

    @property
    def cost(self) -> float | None:
        """What the trial's result cost, as the optimizer learns it (`optimizer.cost_aware`):
        device-seconds less the lost ones where it held devices, else running seconds;
        None where nothing was measured."""
        cost = self.gpu_s - self.lost_gpu_s if self.gpu_s > 0 else self.run_s
        return cost if cost > 0 else None


def attempt_usage(a: Mapping[str, Any], now: float, lost: bool = False) -> Usage:
    """One attempt's seconds up to `now` (an attempt that has ended: up to its end).

    `lost`: its device time counts as lost (it ended without the trial's result).
    Runs before a restart that started over (no checkpoint) are lost as well; a
    restart that resumed loses nothing that can be told apart here (the part of the
    epoch after the last checkpoint)."""
    gpus = float(a.get("gpus") or 0.0)
    if "running_since" not in a:  # recorded before queues were followed: it ran from start to end
        start, end = epoch(a.get("started_at")), epoch(a.get("ended_at"))
        run = max(0.0, (end if end is not None else now) - start) if start is not None else 0.0
        return Usage(run, 0.0, gpus * run, gpus * run if lost else 0.0)
    run, queued = float(a.get("run_s") or 0.0), float(a.get("queued_s") or 0.0)
    if a.get("ended_at") is None:
        running, waiting = epoch(a.get("running_since")), epoch(a.get("queued_since"))
        run += max(0.0, now - running) if running is not None else 0.0
        queued += max(0.0, now - waiting) if waiting is not None else 0.0
    redone = 0.0
    if not lost:
        starts = [epoch(a.get("started_at"))] + [epoch(r.get("at")) for r in a.get("restarts") or []]
        for r, prev in zip(a.get("restarts") or [], starts):
            at = epoch(r.get("at"))
            if not r.get("resumed_from") and at is not None and prev is not None:
                redone += max(0.0, at - prev)
        redone = min(redone, run)
    return Usage(run, queued, gpus * run, gpus * (run if lost else redone))


def attempts_usage(status: TrialStatus, attempts: Sequence[Mapping[str, Any]], now: float) -> Usage:
    """The seconds and device-seconds of a trial in `status` over its `attempts`."""
    ended_without_result = status in (TrialStatus.FAILED, TrialStatus.ABANDONED)
    total = Usage()
    for k, a in enumerate(attempts):
        lost = a.get("failure_class") is not None or (k == len(attempts) - 1 and ended_without_result)
        total = total + attempt_usage(a, now, lost=lost)
    return total


def trial_usage(t: TrialRecord, now: float) -> Usage:
    """A trial's seconds and device-seconds over all its attempts."""
    return attempts_usage(t.status, t.attempts, now)


def experiment_usage(trials: Iterable[TrialRecord], now: float) -> Usage:
    """The sum over an experiment's trials."""
    total = Usage()
    for t in trials:
        total = total + trial_usage(t, now)
    return total


def queued(t: TrialRecord) -> bool:
    """A RUNNING trial whose job waits in the scheduler's queue (submitted, not yet
    running, or requeued)."""
    return waiting(t.status, t.attempts)


def waiting(status: TrialStatus, attempts: Sequence[Mapping[str, Any]]) -> bool:
    """`queued`, from a trial's status and attempts."""
    if status != TrialStatus.RUNNING or not attempts:
        return False
    last = attempts[-1]
    return "running_since" in last and last.get("ended_at") is None and last.get("running_since") is None


def usage_row(u: Usage) -> dict[str, float]:
    """The JSON fields of a `Usage` (seconds rounded to ms, hours to 6 digits)."""
    return {"running_s": round(u.run_s, 3), "queued_s": round(u.queued_s, 3), "gpu_hours": round(u.gpu_hours, 6),
            "gpu_hours_lost": round(u.lost_gpu_hours, 6)}
