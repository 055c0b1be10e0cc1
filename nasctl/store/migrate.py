"""Schema revision checks and upgrades, driven by the migrations shipped in the package."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event, inspect
from sqlalchemy.engine import Connection, Engine
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
        with _schema_transaction(engine) as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            _failpoint("before_schema_commit")
    except SQLAlchemyError as e:
        raise StorageError(
            f"migrating {url_for_messages or engine.url} failed: {str(getattr(e, 'orig', e)).strip().splitlines()[0]}",
            "the transaction was rolled back where the database allows it; restore from a backup if not",
        ) from e
    return before, current_revision(engine) or ""


def _failpoint(name: str) -> None:
    # the failpoints live with the loop, whose crash points they mostly name; the
    # module imports nothing, so this does not pull the orchestration in
    from nasctl import failpoints

    failpoints.hit(name)


@contextmanager
def _schema_transaction(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction that DDL is part of: all of a migration, or nothing.

    pysqlite begins its own transaction only before INSERT/UPDATE/DELETE, so by
    default every CREATE and ALTER commits at once: a crash in the middle of
    creating the schema left tables without a revision, a database nasctl then
    refused. Here (the recipe in SQLAlchemy's pysqlite notes) the driver's own
    transaction handling is off and the transaction is begun explicitly, with
    BEGIN IMMEDIATE so that two processes creating the same database one after
    the other: the second finds the first's schema and has nothing to do.
    """
    if engine.dialect.name != "sqlite":
        with engine.begin() as conn:  # PostgreSQL: transactional DDL; MySQL commits each DDL (nothing to do)
            yield conn
        return
    ddl_engine = engine.execution_options(isolation_level="AUTOCOMMIT")  # pool shared; driver transactions off

    def begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    with ddl_engine.connect() as conn:
        event.listen(conn, "begin", begin)
        try:
            with conn.begin():
                yield conn
        finally:
            event.remove(conn, "begin", begin)


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
