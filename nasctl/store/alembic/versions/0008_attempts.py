"""Attempts: each trial's attempts and, for a trial that ended without a result, why.

Why: a trial runs as one or more attempts. An attempt that ends for a reason
outside the trial's code (a node failure, a preemption, a Slurm requeue, a
job the scheduler lost) runs again as the same trial from its last
checkpoint, so a trial needs its attempts (`attempts`: a JSON list of
{number, started_at, ended_at, failure_class, reason, node, job}) and its
final failure class (`failure_class`: user, infrastructure, timeout,
cancelled), which decides what is retried and what counts against
budget.max_failures.

Existing trials keep NULL in both columns: the store reads that as one
attempt described by the trial's own times and reason. Batch mode lets
SQLite recreate the trials table.

Revision ID: 0008_attempts
Revises: 0007_multifidelity
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_attempts"
down_revision = "0007_multifidelity"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("failure_class", sa.String(16), nullable=True))
        batch.add_column(sa.Column("attempts", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("attempts")
        batch.drop_column("failure_class")
