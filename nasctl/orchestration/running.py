"""A running trial as the loop follows it: its job, its incrementally read logs,
and the rules that read its end (did the job end, was it lost, what are its values).

Each rule is one function, so the loop and its tests call the same decision.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from nasctl.metrics import TRIAL_INFO_FILE, MetricSummary
from nasctl.metrics.tensorboard import TensorBoardReader
from nasctl.orchestration.attempts import epoch
from nasctl.orchestration.jobs import trial_dir
from nasctl.runners.base import JobState, JobStatus, SubmittedJob
from nasctl.runners.polling import LOST_AFTER_SECONDS
from nasctl.spec import ExperimentSpec
from nasctl.types import FailureClass, Observation, TrialRecord

LOG_TAIL_LINES = 40
"""Lines of a trial's log kept with a trial that did not complete."""
MAX_TRIAL_INFO_BYTES = 64_000
MIN_FREE_BYTES = 16 * 2**20
"""Below this much free space in the work directory, no trial is started (its logs and
TensorBoard files would not fit) and a failed trial's reason says the disk is full."""
FAST_POLL_SECONDS = 0.05
"""Poll interval while a running trial is near its expected end (cheap schedulers only)."""
FAST_POLL_MAX_INTERVAL = 1.0
"""Only a runner polled this often or more (local processes) is polled faster near a
trial's expected end: a cluster's controller and accounting are shared."""
DUE_FRACTION = 0.8
"""A running trial is near its end once it has run this share of the median trial."""


def started_epoch(t: TrialRecord) -> float:
    """When a trial's current attempt started (the trial's start, or its creation if it
    has not started), in epoch seconds, from the store, so that timeouts and durations
    survive restarts."""
    if t.attempts and t.attempts[-1].get("started_at"):
        return datetime.fromisoformat(str(t.attempts[-1]["started_at"])).timestamp()
    ts = t.started_at or t.created_at
    return ts.replace(tzinfo=timezone.utc).timestamp()


@dataclass
class RunningTrial:
    """A submitted trial: its record, its job, and its logs read so far."""

    trial: TrialRecord
    job: SubmittedJob
    reader: TensorBoardReader
    summary: MetricSummary
    started: float  # epoch seconds (started_epoch)
    unknown_since: float | None = None  # epoch seconds of the first of the polls in a row that found it unknown

    @classmethod
    def launched(cls, trial: TrialRecord, job: SubmittedJob, tb_dir: str) -> RunningTrial:
        """A trial whose job was just submitted: nothing read yet."""
        return cls(trial, job, TensorBoardReader(tb_dir), MetricSummary(), started_epoch(trial))

    @classmethod
    def attached(cls, trial: TrialRecord, job: SubmittedJob, work_dir: str,
                 reader_state: dict[str, Any]) -> RunningTrial:
        """A trial re-attached after a restart: its logs are read on from where the stored state left off."""
        tb = os.path.join(trial.log_dir or trial_dir(work_dir, trial.index), "tb")
        return cls(trial, job, TensorBoardReader(tb, reader_state), MetricSummary(reader_state.get("summary")),
                   started_epoch(trial))

    @property
    def index(self) -> int:
        return self.trial.index

    def running_for(self, now: float) -> float | None:
        """Seconds the current attempt's job has run by `now` (epoch), its runs before a
        restart included; None while it waits in the scheduler's queue. Timeouts and
        early stopping judge this, not the time since submission."""
        last = self.trial.attempts[-1] if self.trial.attempts else None
        if last is None or "running_since" not in last:
            return now - self.started
        since = epoch(last.get("running_since"))
        return None if since is None else float(last.get("run_s") or 0.0) + now - since

    def read_new(self) -> list[Observation]:
        """What the trial logged since the last read (the summary is updated).

        Raises:
            MetricsError: the log is corrupt.
        """
        new = self.reader.read_new()
        if new:
            self.summary.update(new)
        return new

    @property
    def reader_state(self) -> dict[str, Any]:
        """Where reading stopped, as JSON for the store (resume reads on from here)."""
        return {**self.reader.state, "summary": self.summary.state}


@dataclass(frozen=True)
class JobEnd:
    """How a running trial's job ended, as the loop acts on it."""

    succeeded: bool
    reason: str | None = None
    failure_class: FailureClass | None = None
    node: str | None = None
    ended_at: float | None = None  # epoch, by the scheduler's clock where it says
    ran_from: float | None = None  # epoch: when the job's last run began, where the scheduler says
    device_seconds: float | None = None  # what the result took, where the runner accounts it (`JobStatus`)


def job_end(run: RunningTrial, status: JobStatus | None, now: float,
            lost_after: float = LOST_AFTER_SECONDS) -> JobEnd | None:
    """Read one poll of a running trial's job: None while it runs (or its state has
    been unknown for less than `lost_after` seconds in a row: runner.cfg.lost_after),
    else how it ended and, for a failure, its class (the runner's; else a failed job
    is the trial's own failure and a cancelled one a cancellation). A job lost that
    way ends as an infrastructure failure (cancelled, then retried)."""
    if status is None or not status.state.is_terminal:
        if status is None or status.state != JobState.UNKNOWN:
            run.unknown_since = None
            return None
        if run.unknown_since is None:
            run.unknown_since = now
        if now - run.unknown_since >= lost_after:
            return JobEnd(False, f"job {run.job.handle} was lost: {status.message} "
                          f"(unknown for {now - run.unknown_since:.0f}s)", FailureClass.INFRASTRUCTURE)
        return None
    ended = status.ended_at if status.ended_at is not None and status.ended_at <= now else None
    ran = status.running_since
    if status.state == JobState.SUCCEEDED:
        return JobEnd(True, node=status.node, ended_at=ended, ran_from=ran, device_seconds=status.device_seconds)
    if status.state == JobState.CANCELLED:
        said = (status.message or "").strip().splitlines()
        return JobEnd(False, "job was cancelled outside nasctl" + (f" ({said[-1]})" if said else ""),
                      status.failure_class or FailureClass.CANCELLED, status.node, ended, ran)
    msg = (status.message or "").strip().splitlines()
    return JobEnd(False, f"job failed{': ' + msg[-1] if msg else ''}", status.failure_class or FailureClass.USER,
                  status.node, ended, ran)


def metric_values(spec: ExperimentSpec, summary: MetricSummary) -> tuple[dict[str, float], list[str]]:
    """Each logged metric's finite value by the spec's rule (last or best), and what
    is wrong with the spec's metrics: never logged, or not finite."""
    values: dict[str, float] = {}
    for m in summary.metrics:
        obj = spec.objectives.get(m)
        v = summary.value(m, obj.value if obj else "last", obj.maximize if obj else True)
        if v is not None and math.isfinite(v):
            values[m] = v
    problems = []
    for m in spec.metric_names:
        obj = spec.objectives.get(m)
        v = summary.value(m, obj.value if obj else "last", obj.maximize if obj else True)
        if v is None:
            logged = ", ".join(sorted(summary.metrics)) or "nothing"
            problems.append(f"metric {m!r} was never logged (logged: {logged})")
        elif not math.isfinite(v):
            problems.append(f"metric {m!r} is {v}")
    return values, problems


def read_trial_info(log_dir: str) -> tuple[dict[str, Any] | None, str | None]:
    """The trial's `trial_info.json` (device, precision, versions, ...), if it wrote one.

    Returns (info, problem): info is None when the file is absent or unusable;
    problem says why it was unusable (for a warning event), None otherwise.
    """
    path = os.path.join(log_dir, TRIAL_INFO_FILE)
    try:
        size = os.path.getsize(path)
    except OSError:
        return None, None
    if size > MAX_TRIAL_INFO_BYTES:
        return None, f"{path} is {size} bytes, more than {MAX_TRIAL_INFO_BYTES}; not stored"
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f, parse_constant=lambda c: None)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return None, f"{path} is not valid JSON ({e}); not stored"
    if not isinstance(info, dict):
        return None, f"{path} holds a {type(info).__name__}, not a JSON object; not stored"
    return info, None


def disk_full(work_dir: str) -> str | None:
    """What to say when the work directory has less than MIN_FREE_BYTES free, else None."""
    try:
        free = shutil.disk_usage(work_dir).free
    except OSError:
        return None  # not there (yet): creating the trial's folder will say why
    if free >= MIN_FREE_BYTES:
        return None
    return f"the work directory {work_dir} is full ({free / 2**20:.1f} MiB free, no space left on device)"


def sleep_seconds(poll_interval: float, notified: bool, durations: Iterable[float],
                  started: Iterable[float], now: float) -> float:
    """The pause before the loop's next tick: `poll_interval`, shortened to
    FAST_POLL_SECONDS while a running trial (`started`: their start times) is near
    its expected end (past DUE_FRACTION of the median of recent `durations`), so
    that a freed slot is noticed and refilled within ~50 ms instead of half a poll
    interval on average. Not where the runner wakes the loop itself when a job ends
    (`notified`, `Runner.notify_on_end`), nor for a scheduler polled less often than
    FAST_POLL_MAX_INTERVAL (a cluster's shared controller)."""
    recent = list(durations)
    if notified or not recent or poll_interval > FAST_POLL_MAX_INTERVAL:
        return poll_interval
    due = DUE_FRACTION * statistics.median(recent)
    if any(now - t >= due for t in started):
        return min(poll_interval, FAST_POLL_SECONDS)
    return poll_interval
