"""The trial ledger: one experiment's trials counted by status, its completed
results and Pareto front, and the budget rules that end a run.

The loop moves a trial through the ledger as it moves it through the store
(recorded, started, finished); the ledger never writes to the store itself.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from nasctl.orchestration.fidelity import FidelityBudget, front_results
from nasctl.orchestration.usage import attempt_usage
from nasctl.pareto import compute_front
from nasctl.spec import ExperimentSpec
from nasctl.types import FailureClass, TrialRecord, TrialStatus

DURATIONS_KEPT = 10
"""How many recent completed trials' durations the pacing rules look at."""

_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def failure_signature(failure_class: str | None, reason: str | None) -> str:
    """How a trial failed, its numbers left out: trials that fail the same way (the
    same exception at another learning rate, the same metric never logged) share it."""
    return f"{failure_class or ''}: {_NUMBER.sub('#', reason or '')}"


def repeated_failure(signatures: Sequence[str], succeeded: int, n: int) -> bool:
    """`budget.fail_fast`: have the last `n` failures (n > 0) been the same, with no
    trial succeeded? Then the trials are misconfigured: more would fail the same way."""
    return n > 0 and succeeded == 0 and len(signatures) >= n and len(set(signatures[-n:])) == 1


class TrialLedger:
    """Counts, results and budget of one experiment's trials.

    Args:
        spec: the experiment's spec (budget, objectives, constraints, fidelity).
    """

    def __init__(self, spec: ExperimentSpec) -> None:
        self.spec = spec
        self.counts: dict[str, int] = {s.value: 0 for s in TrialStatus}
        self.created = 0
        self.completed: list[tuple[int, dict[str, float]]] = []
        self.front: list[int] = []
        self.hypervolume = 0.0
        self.durations: deque[float] = deque(maxlen=DURATIONS_KEPT)  # seconds of the last completed trials
        self.fidelity = FidelityBudget(spec)
        # how this run's failed trials failed, in order (not those of a run before a resume:
        # after a fix, budget.fail_fast judges the new trials)
        self.failures: list[tuple[str, str]] = []  # (signature, reason)
        self.gpu_seconds = 0.0  # device-seconds of ended attempts (budget.max_gpu_hours)
        self.running_gpu_seconds = 0.0  # device-seconds of the attempts running now, as of the last tick

    def load(self, trial: TrialRecord) -> None:
        """Count a trial the store already holds (resume). A trial still RUNNING or
        CANDIDATE is counted when the loop re-attaches or queues it."""
        self.created += 1
        self.fidelity.charge(trial.index, trial.fidelity, trial.promoted_from)
        for a in trial.attempts:
            if a.get("ended_at") is not None:
                self.attempt_ended(a)
        if trial.status.is_terminal:
            self.counts[trial.status.value] += 1
            if trial.status == TrialStatus.COMPLETED:
                self.completed.append((trial.index, dict(trial.values)))

    def attempt_ended(self, attempt: Mapping[str, Any]) -> None:
        """Count the device time of an attempt that has ended."""
        self.gpu_seconds += attempt_usage(attempt, 0.0).gpu_s

    def record(self, index: int, fidelity: float | None, promoted_from: int | None) -> None:
        """Count a new candidate the loop has just recorded."""
        self.fidelity.charge(index, fidelity, promoted_from)
        self.created += 1
        self.counts[TrialStatus.CANDIDATE.value] += 1

    def move(self, was: TrialStatus | None, now: TrialStatus) -> None:
        """A trial went from `was` (None: not counted yet) to `now`."""
        if was is not None:
            self.counts[was.value] -= 1
        self.counts[now.value] += 1

    def complete(self, index: int, values: Mapping[str, float], seconds: float | None) -> None:
        """Keep a completed trial's result (and how long it ran, when known)."""
        if seconds is not None:
            self.durations.append(seconds)
        self.completed.append((index, dict(values)))

    @property
    def may_create(self) -> bool:
        """Whether another trial may be recorded (budget.max_trials, budget.max_gpu_hours)."""
        return self.created < self.spec.budget.max_trials and not self.gpu_exhausted

    @property
    def gpu_hours(self) -> float:
        """Device-hours spent so far, running attempts included."""
        return (self.gpu_seconds + self.running_gpu_seconds) / 3600.0

    @property
    def gpu_exhausted(self) -> bool:
        """Whether `budget.max_gpu_hours` is spent: nothing more starts."""
        limit = self.spec.budget.max_gpu_hours
        return limit is not None and self.gpu_hours >= limit

    @property
    def left(self) -> int:
        return self.spec.budget.max_trials - self.created

    def failed(self, failure_class: str | None, reason: str | None) -> None:
        """Keep how a trial of this run failed (for `budget.fail_fast`)."""
        self.failures.append((failure_signature(failure_class, reason), reason or "no reason recorded"))

    def failures_exceeded(self, experiment: str) -> str | None:
        """Why the run must end for failures (a job the scheduler can never run, the
        same failure `budget.fail_fast` times in a row with nothing succeeded, or more
        than budget.max_failures), else None."""
        n = self.spec.budget.fail_fast
        succeeded = self.counts[TrialStatus.COMPLETED.value] + self.counts[TrialStatus.EARLY_STOPPED.value]
        if self.unschedulable:
            # every trial asks for the same resources: none of them can ever run either
            return (f"a trial's job can never run: {self.failures[-1][1]}; every trial asks for the same "
                    f"resources, so the experiment stops; fix trial.resources or runner.cfg, then "
                    f"`nasctl resume {experiment}`")
        if repeated_failure([s for s, _ in self.failures], succeeded, n):
            last = self.failures[-1][1]
            return (f"the last {n} trials all failed the same way and none has succeeded: "
                    f"{last if len(last) <= 300 else last[:297] + '...'}; fix the trial and "
                    f"`nasctl resume {experiment}` (budget.fail_fast: 0 lets a script that fails now and then go on)")
        failures = self.counts[TrialStatus.FAILED.value]
        limit = self.spec.budget.max_failures
        if failures <= limit:
            return None
        return (f"{failures} trials failed, more than budget.max_failures={limit}; "
                f"see `nasctl trials {experiment} --status FAILED`")

    @property
    def unschedulable(self) -> bool:
        """Whether the last failure was a job the scheduler can never run."""
        return bool(self.failures) and self.failures[-1][0].startswith(f"{FailureClass.UNSCHEDULABLE.value}:")

    def update_front(self) -> None:
        """Recompute the Pareto front and hypervolume of the completed results
        (top-rung results only under optimizer.fidelity, unless it says otherwise)."""
        done = front_results(self.spec, self.completed, self.fidelity.of)
        res = compute_front(done, self.spec.objectives, self.spec.parsed_constraints)
        self.front, self.hypervolume = res.indices, res.hypervolume

    def front_values(self) -> list[tuple[int, dict[str, float]]]:
        """The front's trials with their objective values."""
        by_index = dict(self.completed)
        return [(i, {k: by_index[i][k] for k in self.spec.objectives if k in by_index[i]}) for i in self.front]
