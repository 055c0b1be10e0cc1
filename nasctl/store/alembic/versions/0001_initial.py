"""Initial schema: experiments, trials, observations, events.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("work_dir", sa.String(length=1024), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("lease_owner", sa.String(length=255), nullable=True),
        sa.Column("lease_heartbeat", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_experiments"),
        sa.UniqueConstraint("name", name="uq_experiments_name"),
    )
    op.create_table(
        "trials",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("generation_method", sa.String(length=64), nullable=False),
        sa.Column("job_name", sa.String(length=255), nullable=True),
        sa.Column("job_handle", sa.String(length=1024), nullable=True),
        sa.Column("scheduler", sa.String(length=64), nullable=True),
        sa.Column("log_dir", sa.String(length=1024), nullable=True),
        sa.Column("runner_metadata", sa.JSON(), nullable=False),
        sa.Column("reader_state", sa.JSON(), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("log_tail", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["experiment_id"], ["experiments.id"], name="fk_trials_experiment_id_experiments", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_trials"),
        sa.UniqueConstraint("experiment_id", "index", name="uq_trials_experiment_id_index"),
    )
    op.create_index("ix_trials_experiment_id_status", "trials", ["experiment_id", "status"])
    op.create_table(
        "observations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(length=128), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("wall_time", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["trial_id"], ["trials.id"], name="fk_observations_trial_id_trials", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_observations"),
        sa.UniqueConstraint("trial_id", "metric", "step", name="uq_observations_trial_id_metric_step"),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("trial_index", sa.Integer(), nullable=True),
        sa.Column("time", sa.DateTime(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["experiment_id"], ["experiments.id"], name="fk_events_experiment_id_experiments", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
    )
    op.create_index("ix_events_experiment_id_id", "events", ["experiment_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_events_experiment_id_id", table_name="events")
    op.drop_table("events")
    op.drop_table("observations")
    op.drop_index("ix_trials_experiment_id_status", table_name="trials")
    op.drop_table("trials")
    op.drop_table("experiments")
