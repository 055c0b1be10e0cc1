"""SQLAlchemy 2 table definitions (the live schema).

Migrations under `alembic/versions` must never import this module: they carry
frozen copies of the table shapes they need.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Index, Integer, MetaData, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class ExperimentRow(Base):
    __tablename__ = "experiments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    work_dir: Mapped[str] = mapped_column(String(1024))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
    lease_owner: Mapped[str | None] = mapped_column(String(255), nullable=True)
    lease_heartbeat: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class TrialRow(Base):
    __tablename__ = "trials"
    __table_args__ = (
        UniqueConstraint("experiment_id", "index"),
        Index(None, "experiment_id", "status"),
        # a trial is promoted at most once (NULL, a new configuration, may repeat)
        UniqueConstraint("experiment_id", "promoted_from"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    generation_method: Mapped[str] = mapped_column(String(64))
    job_name: Mapped[str | None] = mapped_column(String(255), nullable=True)
    job_handle: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    scheduler: Mapped[str | None] = mapped_column(String(64), nullable=True)
    log_dir: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    runner_metadata: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    reader_state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    values: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    failure_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    log_tail: Mapped[str | None] = mapped_column(Text, nullable=True)
    info: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # the devices the trial was placed on (CUDA_VISIBLE_DEVICES), and since when a
    # candidate has been waiting for free ones (revision 0004_device_leases)
    devices: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    device_wait_since: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    # multi-fidelity search (revision 0007_multifidelity): the fidelity the trial
    # trains to and the trial index it continues when it is a promotion
    fidelity: Mapped[float | None] = mapped_column(Float, nullable=True)
    promoted_from: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # attempts (revision 0008_attempts): every attempt started, and why a trial
    # that ended without a result ended (a FailureClass value)
    failure_class: Mapped[str | None] = mapped_column(String(16), nullable=True)
    attempts: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)


class ObservationRow(Base):
    __tablename__ = "observations"
    __table_args__ = (UniqueConstraint("trial_id", "metric", "step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"))
    metric: Mapped[str] = mapped_column(String(128))
    step: Mapped[int] = mapped_column(Integer)
    value: Mapped[float] = mapped_column(Float)
    wall_time: Mapped[float | None] = mapped_column(Float, nullable=True)


class EventRow(Base):
    __tablename__ = "events"
    __table_args__ = (
        Index(None, "experiment_id", "id"),
        # the latest event of a kind (the optimizer's log-scale state, early stops) without
        # scanning an experiment's whole audit trail (revision 0003_events_kind_index)
        Index(None, "experiment_id", "kind", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    trial_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    time: Mapped[datetime] = mapped_column(DateTime)
    kind: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class DeviceHostRow(Base):
    """One row per host whose devices are leased: placing a trial locks its host's
    row first, so placements on one host happen one at a time on every database."""

    __tablename__ = "device_hosts"

    host: Mapped[str] = mapped_column(String(255), primary_key=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime)


class DeviceLeaseRow(Base):
    """A device (one of its `slot`s when trials share it) held by a trial."""

    __tablename__ = "device_leases"
    __table_args__ = (
        UniqueConstraint("host", "device", "slot"),
        Index(None, "experiment_id", "trial_index"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    device: Mapped[str] = mapped_column(String(64))
    slot: Mapped[int] = mapped_column(Integer)
    capacity: Mapped[int] = mapped_column(Integer)  # trials this lease lets share the device (1: exclusive)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    trial_index: Mapped[int] = mapped_column(Integer)
    owner: Mapped[str] = mapped_column(String(255))
    acquired_at: Mapped[datetime] = mapped_column(DateTime)


class ServiceLeaseRow(Base):
    """The one `nasctl serve` driving this database's experiments (revision 0005_service)."""

    __tablename__ = "service_leases"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(255))
    heartbeat: Mapped[datetime] = mapped_column(DateTime)
    url: Mapped[str | None] = mapped_column(String(1024), nullable=True)


EXPERIMENT_NOTE = -1
"""`NoteRow.trial_index` of the note on the experiment itself (trial indices start at 0)."""


class NoteRow(Base):
    """A user's markdown note on an experiment or one of its trials (revision 0006_notes)."""

    __tablename__ = "notes"
    __table_args__ = (UniqueConstraint("experiment_id", "trial_index"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    trial_index: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
