"""Notes: markdown text a user attaches to an experiment or to one of its trials.

Why: people keep what they learnt from an experiment ("lr above 3e-3 diverges",
"trial 17 is the one we shipped") next to the results instead of in a separate
file, and edit it from the dashboard or read it in exports. Notes live in
their own table so that the trial rows the loop writes at every step stay as
they are.

- `notes`: one row per experiment (`trial_index` -1) or trial (its index) that
  has a note, unique on (experiment_id, trial_index), removed with its
  experiment (foreign key, ON DELETE CASCADE).

Revision ID: 0006_notes
Revises: 0005_service
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_notes"
down_revision = "0005_service"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("trial_index", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE",
                                name="fk_notes_experiment_id_experiments"),
        sa.PrimaryKeyConstraint("id", name="pk_notes"),
        sa.UniqueConstraint("experiment_id", "trial_index", name="uq_notes_experiment_id_trial_index"),
    )


def downgrade() -> None:
    op.drop_table("notes")
