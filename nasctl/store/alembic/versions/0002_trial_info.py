"""Trial info: a nullable JSON column `trials.info`.

Why: cost metrics such as latency are only meaningful together with how they
were measured (device, precision, thread count, latency batch size and
repeats, torch version). Trials write that record as `trial_info.json` next to
their TensorBoard files; the orchestrator stores it here when the trial ends.
Existing trials keep NULL (nothing was recorded for them). Batch mode lets
SQLite, which cannot alter tables in place, recreate the table.

Revision ID: 0002_trial_info
Revises: 0001_initial
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_trial_info"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("info", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("info")
