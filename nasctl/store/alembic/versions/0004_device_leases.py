"""Device leases: GPUs handed to local trials, exclusive across experiments.

Why: two experiments driven by two processes on one host must never place
trials on the same GPU, and a trial re-attached after a crash must keep its
devices. The store is the one place every orchestrator on a host (and the
service) sees, so leases live here:

- `device_leases`: one row per device (per shared slot) a trial holds, with
  host, experiment, trial and the orchestrator that placed it; unique on
  (host, device, slot).
- `device_hosts`: one row per host, locked while a placement is decided, so
  placements on one host are serialised on SQLite, PostgreSQL and MySQL alike.
- `trials.devices`: the devices a trial ran on (its CUDA_VISIBLE_DEVICES);
  `trials.device_wait_since`: when a candidate started waiting for free devices.

Existing trials keep NULL in both columns (they were placed on no device by
nasctl). Batch mode lets SQLite recreate the trials table.

Revision ID: 0004_device_leases
Revises: 0003_events_kind_index
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_device_leases"
down_revision = "0003_events_kind_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "device_hosts",
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("host", name="pk_device_hosts"),
    )
    op.create_table(
        "device_leases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("device", sa.String(64), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("capacity", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("trial_index", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("acquired_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE",
                                name="fk_device_leases_experiment_id_experiments"),
        sa.PrimaryKeyConstraint("id", name="pk_device_leases"),
        sa.UniqueConstraint("host", "device", "slot", name="uq_device_leases_host_device_slot"),
    )
    op.create_index("ix_device_leases_experiment_id_trial_index", "device_leases", ["experiment_id", "trial_index"])
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("devices", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("device_wait_since", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("device_wait_since")
        batch.drop_column("devices")
    op.drop_table("device_leases")  # with its index (MySQL refuses to drop an index a foreign key uses)
    op.drop_table("device_hosts")
