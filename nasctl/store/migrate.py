"""Schema revision checks and upgrades, driven by the migrations shipped in the package."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Engine

from alembic import command
from nasctl.errors import SchemaOutdatedError

ALEMBIC_DIR = Path(__file__).parent / "alembic"
OUR_TABLES = {"experiments", "trials", "observations", "events"}


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(ALEMBIC_DIR))
    return cfg


def head_revision() -> str:
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert len(heads) == 1, f"migrations must have one head, found {heads}"
    return heads[0]


def known_revisions() -> set[str]:
    return {s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def current_revision(engine: Engine) -> str | None:
    """The database's revision, or None for a database nasctl has never written."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def is_empty(engine: Engine) -> bool:
    names = set(inspect(engine).get_table_names())
    return not (names & (OUR_TABLES | {"alembic_version"}))


def upgrade(engine: Engine, revision: str = "head") -> tuple[str | None, str]:
    """Migrate the database to `revision`; returns (before, after)."""
    before = current_revision(engine)
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    return before, current_revision(engine) or ""


def check_revision(engine: Engine, url_for_messages: str) -> None:
    """Refuse a database whose schema is not exactly the one this nasctl expects.

    Raises:
        SchemaOutdatedError: older schema (fix: `nasctl db upgrade`) or newer
            schema (fix: upgrade nasctl), or tables without a revision.
    """
    head = head_revision()
    current = current_revision(engine)
    if current == head:
        return
    db = f"--db {url_for_messages}"
    if current is None:
        raise SchemaOutdatedError(
            f"database {url_for_messages} has nasctl tables but no schema revision",
            f"run `nasctl db upgrade {db}` to bring it to {head}",
        )
    if current not in known_revisions():
        raise SchemaOutdatedError(
            f"database {url_for_messages} is at schema revision {current}, newer than this nasctl knows ({head})",
            "upgrade nasctl to a version that knows it",
        )
    raise SchemaOutdatedError(
        f"database {url_for_messages} is at schema revision {current}, this nasctl needs {head}",
        f"back it up, then run `nasctl db upgrade {db}`",
    )
