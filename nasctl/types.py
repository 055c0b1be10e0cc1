"""Plain value types shared by every layer (no third-party imports).

Records returned by the store are these dataclasses, never ORM objects, so the
layers above the store never import SQLAlchemy.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class TrialStatus(str, enum.Enum):
    """Life cycle of a trial: CANDIDATE -> RUNNING -> one terminal state."""

    CANDIDATE = "CANDIDATE"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    EARLY_STOPPED = "EARLY_STOPPED"
    ABANDONED = "ABANDONED"

    @property
    def is_terminal(self) -> bool:
        return self not in (TrialStatus.CANDIDATE, TrialStatus.RUNNING)


class FailureClass(str, enum.Enum):
    """Why an attempt of a trial ended without a result.

    - USER: the trial's own code (a non-zero exit, an exception, a missing or NaN objective).
    - INFRASTRUCTURE: the machine or the scheduler (node failure, preemption, requeue,
      a job the scheduler lost, a trial process killed by a signal nasctl did not send).
    - TIMEOUT: `budget.trial_timeout` or the scheduler's time limit.
    - CANCELLED: by nasctl or by a person.
    - UNSCHEDULABLE: the scheduler holds the job for a reason waiting cannot clear
      (a request no node can satisfy, an invalid account or QOS); the job is cancelled.
    """

    USER = "user"
    INFRASTRUCTURE = "infrastructure"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    UNSCHEDULABLE = "unschedulable"


class ExperimentStatus(str, enum.Enum):
    QUEUED = "QUEUED"  # submitted to `nasctl serve`, waiting for a free slot or free devices
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"


ParamValue = int | float | str | bool


@dataclass(frozen=True)
class ExperimentRecord:
    id: int
    name: str
    spec: dict[str, Any]
    status: ExperimentStatus
    work_dir: str
    created_at: datetime
    updated_at: datetime
    status_reason: str | None = None
    lease_owner: str | None = None
    lease_heartbeat: datetime | None = None


@dataclass(frozen=True)
class TrialRecord:
    id: int
    experiment_id: int
    index: int
    parameters: dict[str, ParamValue]
    status: TrialStatus
    generation_method: str
    created_at: datetime
    job_name: str | None = None
    job_handle: str | None = None
    scheduler: str | None = None
    log_dir: str | None = None
    runner_metadata: dict[str, Any] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    failure_reason: str | None = None
    log_tail: str | None = None
    info: dict[str, Any] | None = None  # what the trial recorded about itself (trial_info.json)
    devices: list[str] | None = None  # the devices nasctl placed it on (its CUDA_VISIBLE_DEVICES)
    device_wait_since: datetime | None = None  # a candidate waiting for free devices, since then
    fidelity: float | None = None  # the fidelity it trains to (optimizer.fidelity), None without one
    promoted_from: int | None = None  # the trial index it continues (a promotion), None for a new configuration
    failure_class: str | None = None  # a FailureClass value for a trial that ended without a result
    attempts: list[dict[str, Any]] = field(default_factory=list)
    """Every attempt started, oldest first: {number, started_at, ended_at, failure_class,
    reason, node, job}; times as ISO-8601 UTC text; the last one may still run (ended_at None)."""


@dataclass(frozen=True)
class Observation:
    metric: str
    step: int
    value: float
    wall_time: float | None = None


@dataclass(frozen=True)
class EventRecord:
    id: int
    experiment_id: int
    time: datetime
    kind: str
    message: str
    trial_index: int | None = None
    data: dict[str, Any] | None = None


@dataclass(frozen=True)
class DeviceLease:
    """A device (one shared slot of it) held by a trial, as the store keeps it,
    with what the store knows of the trial (to tell a lease still in use from a
    stale one)."""

    host: str
    device: str
    slot: int
    capacity: int  # trials the lease lets share its device (1: exclusive)
    experiment_id: int
    trial_index: int
    owner: str
    acquired_at: datetime
    trial_status: TrialStatus | None = None  # None: the trial is gone
    job_handle: str | None = None
    runner_metadata: dict[str, Any] = field(default_factory=dict)
    trial_dir: str | None = None


Placement = list[tuple[str, int, int]]
"""Chosen (device, slot, capacity) triples for one trial."""


@dataclass(frozen=True)
class ServiceLease:
    """The `nasctl serve` process that drives the experiments of a database."""

    owner: str  # host:pid:start, as experiment leases
    heartbeat: datetime
    url: str | None = None  # where its API listens


@dataclass(frozen=True)
class Note:
    """A user's markdown note on an experiment (`trial_index` None) or on one of its trials."""

    experiment_id: int
    trial_index: int | None
    text: str
    updated_at: datetime
