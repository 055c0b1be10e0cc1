"""Schema revision checks and upgrades, driven by the migrations shipped in the package."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from alembic import command
from nasctl.errors import SchemaOutdatedError, StorageError

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


def upgrade(engine: Engine, url_for_messages: str = "", revision: str = "head") -> tuple[str | None, str]:
    """Migrate the database to `revision` in one transaction; returns (before, after).

    Raises:
        SchemaOutdatedError: the database is not one nasctl can migrate (left unchanged).
    """
    before = current_revision(engine)
    if before is None and not is_empty(engine):
        check_revision(engine, url_for_messages or str(engine.url))
    if before is not None and before not in known_revisions():
        check_revision(engine, url_for_messages or str(engine.url))
    cfg = alembic_config()
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    except SQLAlchemyError as e:
        raise StorageError(
            f"migrating {url_for_messages or engine.url} failed: {str(getattr(e, 'orig', e)).strip().splitlines()[0]}",
            "the transaction was rolled back where the database allows it; restore from a backup if not",
        ) from e
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
            f"database {url_for_messages} has tables named like nasctl's but no nasctl schema revision, "
            "so it was not created by nasctl",
            "point --db at a nasctl database or an empty one; this one is left untouched",
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
