"""Alembic environment for nasctl's own schema.

Used both by `nasctl db upgrade` (which passes a live connection through
`config.attributes["connection"]`) and by developers running `alembic` with
the repository's alembic.ini (which sets sqlalchemy.url or NASCTL_DB).
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from nasctl.store.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        version_table="alembic_version",
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    url = os.environ.get("NASCTL_DB") or config.get_main_option("sqlalchemy.url") or "sqlite:///nasctl.db"
    engine = create_engine(url)
    with engine.begin() as conn:
        _run(conn)
