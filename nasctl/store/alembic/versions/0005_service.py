"""The service's lease: one `nasctl serve` drives a database's experiments.

Why: the service (`nasctl serve`) keeps every experiment of a database going
and takes over those whose driver died. Two services on one database would
both take over the same experiments, so the service holds a lease with a
heartbeat, as each orchestrator does for its experiment, in a one-row table.
Experiments also gain the state QUEUED (a string column: no schema change).

Revision ID: 0005_service
Revises: 0004_device_leases
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_service"
down_revision = "0004_device_leases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "service_leases",
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("heartbeat", sa.DateTime(), nullable=False),
        sa.Column("url", sa.String(1024), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_service_leases"),
    )


def downgrade() -> None:
    op.drop_table("service_leases")
