"""Multi-fidelity search: each trial's fidelity and the trial it was promoted from.

Why: with `optimizer.fidelity` a configuration trains to a low fidelity first
(few epochs) and the promising ones are promoted, each promotion a new trial
that continues the earlier one from its checkpoint. The store records both
facts on the trial, and a promotion is recorded (write-ahead) before its job
starts; the unique constraint on (experiment, promoted_from) makes "promoted
twice" impossible even for two orchestrators racing after a crash. NULLs do
not collide in that constraint on SQLite, PostgreSQL and MySQL, so every
new-configuration trial may hold NULL.

Existing trials keep NULL in both columns (they ran at one fidelity, with no
promotion). Batch mode lets SQLite recreate the trials table.

Revision ID: 0007_multifidelity
Revises: 0006_notes
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_multifidelity"
down_revision = "0006_notes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("fidelity", sa.Float(), nullable=True))
        batch.add_column(sa.Column("promoted_from", sa.Integer(), nullable=True))
        batch.create_unique_constraint("uq_trials_experiment_id_promoted_from", ["experiment_id", "promoted_from"])


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_constraint("uq_trials_experiment_id_promoted_from", type_="unique")
        batch.drop_column("promoted_from")
        batch.drop_column("fidelity")
