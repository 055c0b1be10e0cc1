"""The `simulated` runner: `trial.function` trials on a simulated clock.

For benchmarks of the optimizer at parallelism > 1 (in the spirit of Syne
Tune's simulator backend). Each trial is given a duration, fixed by its
parameters and `cfg.seed`: a log-normal draw (`cfg.median_seconds`,
`cfg.sigma`) seeded by a hash of both, or, with `cfg.duration_metric`, the
value of one of the metrics the function returns (a table's own cost column,
such as NAS-Bench-201's training time). The runner hands the orchestrator its
`VirtualClock` (`Runner.clock`), so the real loop (nasctl/orchestration/loop.py:
proposals, write-ahead records, dispatch, polling, metrics read back from the
TensorBoard files) runs against virtual time: 100 trials at parallelism 8 cost
the proposals' CPU and nothing else.

Determinism. Virtual time moves only inside the loop's pause (`VirtualClock.wait`)
and only when the loop has nothing left to do at the present instant: no
proposal is being computed (`busy`: the generator thread's answer would set the
loop's wake event, so the pause waits for it in real time while virtual time
stands still) and the loop did not wake for anything (a job end, an answer).
Then the clock jumps to the earliest end among the running jobs, and every job
ending at that instant ends then, in submission order: its function is called
and its metrics logged (so nothing of a trial is readable before it ends), and
the loop is woken to poll. A proposal therefore takes no virtual time and always
sees every result whose end came before it, whatever the real time it took, so
the trials of a run depend only on the seeds and the durations, not on the
machine's speed or load. The proposals' look-ahead (nasctl/orchestration/
proposals.py) is computed from the proposals' cost on this clock (none).

What is not simulated: trials have no learning curves (their metrics appear at
their end, so early stopping judges nothing early), `budget.trial_timeout` is
not applied (the store keeps real times), the lease's heartbeat follows the
loop's clock (a proposal of more than LEASE_STALE_SECONDS can make the lease
look stale to another orchestrator), and trials do not outlive the
orchestrator (as with `inprocess`, one still running when it exits is reported
FAILED). Each job's virtual start and end (seconds since the run's virtual
start) are in its runner metadata: `simulated_start`, `simulated_end`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nasctl.errors import SpecError
from nasctl.runners.base import JobRequest, JobState, JobStatus, Runner, SubmittedJob
from nasctl.runners.clock import Clock
from nasctl.runners.inprocess import function_call, outcome_path, recorded_status, run_and_record
from nasctl.runners.launcher import read_json
from nasctl.search_spaces.function import load_function
from nasctl.types import FailureClass

DEFAULT_MEDIAN_SECONDS = 60.0
DEFAULT_SIGMA = 0.5
SCHEDULER = "simulated"


def trial_seconds(parameters: Mapping[str, Any], seed: int, median: float, sigma: float) -> float:
    """A trial's simulated duration: `median * exp(sigma * z)`, z a standard normal
    drawn from a generator seeded by a hash of the parameters and `seed` (the same
    in every process and on every machine)."""
    key = json.dumps({"parameters": dict(parameters), "seed": seed}, sort_keys=True, default=str)
    rng = random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))
    return median * math.exp(sigma * rng.gauss(0.0, 1.0))


class VirtualClock(Clock):
    """Simulated time: moves only when the loop waits with nothing to do (`wait`).

    Args:
        advance: ends the jobs due next and moves the clock to their end; returns
            False when no job is running (nothing to move to).
    """

    def __init__(self, advance: Callable[[], bool]) -> None:
        self.origin = time.time()  # virtual epoch times start at the real time the run starts
        self.elapsed = 0.0  # virtual seconds since the run's start
        self._advance = advance

    def time(self) -> float:
        return self.origin + self.elapsed

    def monotonic(self) -> float:
        return self.origin + self.elapsed

    def wait(self, wake: threading.Event, timeout: float, busy: bool) -> None:
        """Nothing happens in virtual time while the loop has something to act on
        (`wake` is set) or a proposal is being computed (`busy`: wait for its answer
        in real time). Otherwise the clock jumps to the next job end; with no job
        running, the loop pauses `timeout` real seconds as it would in a real run."""
        if wake.is_set():
            return
        if busy or not self._advance():
            wake.wait(timeout)

    def cost(self, seconds: float) -> float:
        """A proposal takes no virtual time."""
        return 0.0

    def move_to(self, elapsed: float) -> None:
        self.elapsed = max(self.elapsed, elapsed)


@dataclass
class _SimulatedJob:
    request: JobRequest
    target: str
    parameters: dict[str, Any]
    start: float  # virtual seconds since the run's start
    end: float
    order: int  # submission order: jobs that end at one instant end in this order
    done: bool = False


class SimulatedRunner(Runner):
    """Runs `trial.function` calls at their simulated end (see the module docstring)."""

    scheduler = SCHEDULER
    poll_interval = 0.25

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        cfg = dict(cfg or {})
        self.median = _positive(cfg.pop("median_seconds", DEFAULT_MEDIAN_SECONDS), "median_seconds")
        self.sigma = _positive(cfg.pop("sigma", DEFAULT_SIGMA), "sigma", zero=True)
        seed = cfg.pop("seed", 0)
        metric = cfg.pop("duration_metric", None)
        if cfg:
            raise SpecError(f"runner.cfg has options the simulated runner does not take: {sorted(cfg)}",
                            "it takes: median_seconds, sigma, seed, duration_metric")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise SpecError(f"runner.cfg.seed must be an integer, got {seed!r}", "set the durations' seed")
        if metric is not None and not isinstance(metric, str):
            raise SpecError(f"runner.cfg.duration_metric must be a metric name, got {metric!r}",
                            "name a metric the trial's function returns (its cost in seconds)")
        self.seed, self.duration_metric = seed, metric
        self._clock = VirtualClock(self.advance)
        self._jobs: dict[str, _SimulatedJob] = {}
        self._cancelled: set[str] = set()
        self._wake: Callable[[], None] | None = None

    def clock(self) -> VirtualClock:
        return self._clock

    def duration(self, target: str, parameters: Mapping[str, Any]) -> float:
        """The trial's simulated seconds: its cost metric's value where `duration_metric`
        is set (the function is called for it; it must be deterministic; a call that
        raises or lacks the metric takes no time, and the trial's end says what is
        wrong), else the log-normal draw."""
        if self.duration_metric is None:
            return trial_seconds(parameters, self.seed, self.median, self.sigma)
        try:
            out = load_function(target)(dict(parameters))
        except Exception:  # the trial's own failure: it ends at once, and its end says why
            return 0.0
        value = out.get(self.duration_metric) if isinstance(out, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return 0.0  # the trial's own end reports what is wrong with its metrics
        return max(0.0, float(value))

    def dryrun(self, request: JobRequest) -> str:
        target, params = function_call(request, SCHEDULER)
        return (f"simulated: {target}({json.dumps(params, sort_keys=True)}) for "
                f"{self.duration(target, params):.1f} virtual seconds -> metrics logged to "
                f"{request.env.get('NASCTL_LOG_DIR')}")

    def submit(self, request: JobRequest) -> SubmittedJob:
        target, params = function_call(request, SCHEDULER)
        existing = self.find(request)
        if existing is not None:  # never run one trial twice
            return existing
        os.makedirs(request.trial_dir, exist_ok=True)
        for d in reversed([p for p in request.env.get("PYTHONPATH", "").split(os.pathsep) if p]):
            if d not in sys.path:
                sys.path.insert(0, d)
        start = self._clock.elapsed
        job = _SimulatedJob(request, target, params, start, start + self.duration(target, params), len(self._jobs))
        self._jobs[_handle(request)] = job
        return SubmittedJob(_handle(request), _metadata(job))

    def advance(self) -> bool:
        """Move the clock to the earliest end among the running jobs and end every job
        due then, in submission order (their functions run now); False if none runs."""
        running = [j for h, j in self._jobs.items() if not j.done and h not in self._cancelled]
        if not running:
            return False
        now = min(j.end for j in running)
        self._clock.move_to(now)
        try:
            for job in sorted((j for j in running if j.end <= now), key=lambda j: j.order):
                job.done = True
                run_and_record(job.request, job.target, job.parameters, extra=_metadata(job))
        finally:
            if self._wake is not None:
                self._wake()
        return True

    def notify_on_end(self, wake: Callable[[], None]) -> bool:
        """Every job ends in this process, in `advance`: `wake` is called then."""
        self._wake = wake
        return True

    def _one_status(self, job: SubmittedJob) -> JobStatus:
        if job.handle in self._cancelled:
            return JobStatus(JobState.CANCELLED, "cancelled", failure_class=FailureClass.CANCELLED)
        trial_dir = job.metadata.get("trial_dir")
        recorded = recorded_status(trial_dir)
        if recorded is not None:
            return recorded
        if job.handle in self._jobs:
            return JobStatus(JobState.RUNNING)
        if not trial_dir:
            return JobStatus(JobState.UNKNOWN, f"no simulated trial {job.handle} in this process")
        return JobStatus(JobState.FAILED, "the orchestrator that simulated this trial exited before it ended",
                         failure_class=FailureClass.INFRASTRUCTURE)

    def status(self, jobs: Sequence[SubmittedJob]) -> Mapping[str, JobStatus]:
        return {job.handle: self._one_status(job) for job in jobs}

    def cancel(self, job: SubmittedJob) -> None:
        entry = self._jobs.get(job.handle)
        if entry is not None and not entry.done:
            self._cancelled.add(job.handle)

    def log_tail(self, job: SubmittedJob, lines: int = 40) -> str:
        trial_dir = job.metadata.get("trial_dir")
        outcome = (read_json(outcome_path(trial_dir)) if trial_dir else None) or {}
        text = outcome.get("traceback") or outcome.get("error") or ""
        return "\n".join(str(text).splitlines()[-lines:])

    def find(self, request: JobRequest) -> SubmittedJob | None:
        handle = _handle(request)
        if handle in self._jobs:
            return SubmittedJob(handle, _metadata(self._jobs[handle]))
        if os.path.exists(outcome_path(request.trial_dir)):
            return SubmittedJob(handle, {"trial_dir": request.trial_dir})
        return None


def _handle(request: JobRequest) -> str:
    return f"simulated://{request.name}"


def _metadata(job: _SimulatedJob) -> dict[str, Any]:
    return {"trial_dir": job.request.trial_dir, "simulated_start": job.start, "simulated_end": job.end}


def _positive(value: Any, name: str, zero: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not zero):
        raise SpecError(f"runner.cfg.{name} must be a {'non-negative' if zero else 'positive'} number, got {value!r}",
                        f"set runner.cfg.{name} in seconds" if name.endswith("seconds") else
                        f"set runner.cfg.{name} (the log-normal's sigma)")
    return float(value)


def create_runner(cfg: Mapping[str, Any] | None = None) -> SimulatedRunner:
    return SimulatedRunner(cfg)


__all__ = ["SimulatedRunner", "VirtualClock", "create_runner", "trial_seconds"]
