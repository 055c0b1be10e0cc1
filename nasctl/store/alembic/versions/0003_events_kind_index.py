"""Events by kind: an index on `events (experiment_id, kind, id)`.

Why: the dashboard's summary shows the optimizer's latest log-scale state, the
newest `log_scale` event of the experiment, and the early-stopping figures read
the `early_stopped` events. With only `(experiment_id, id)` each such query
walked the experiment's audit trail from its newest event back to the first
match: on an experiment of 100,000 trials (about 300,000 events) whose only
log-scale event came early, that was a scan of the whole trail for every
refresh of the summary (docs/benchmarks.md, "Dashboard at scale"). No data
changes.

Revision ID: 0003_events_kind_index
Revises: 0002_trial_info
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0003_events_kind_index"
down_revision = "0002_trial_info"
branch_labels = None
depends_on = None

NAME = "ix_events_experiment_id_kind_id"


def upgrade() -> None:
    op.create_index(NAME, "events", ["experiment_id", "kind", "id"])


def downgrade() -> None:
    op.drop_index(NAME, table_name="events")
