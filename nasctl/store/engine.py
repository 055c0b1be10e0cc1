"""Connecting to a nasctl database: the engine beneath the `Store`.

Everything about reaching the database lives here: resolving `--db` /
`NASCTL_DB` and redacting its password, refusing SQLite paths that cannot
work, SQLite's pragmas, opening (creating the schema or checking its
revision), telling transient errors (a dropped connection, a busy database)
from the others, and `retrying`, the backoff every store operation runs under.
The `Store` (nasctl.store.store) builds on it and holds no connection logic.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from sqlalchemy import create_engine, event
from sqlalchemy.engine import CursorResult, Engine, Result, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError

from nasctl.errors import BadInputError, NotFoundError, StorageError
from nasctl.store import migrate

DEFAULT_URL = "sqlite:///nasctl.db"
RETRY_SECONDS = float(os.environ.get("NASCTL_DB_RETRY_SECONDS", "120"))
log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


_DROPPED = ("terminat", "server closed", "gone away", "lost connection")
"""What drivers say when a connection that was there went away."""
_UNAVAILABLE = ("locked", "busy", "connection", "lost", "refused", "shutting down", "starting up", "recovery")
"""What they say when the database is busy or not (yet) reachable."""


def _says(e: BaseException, words: tuple[str, ...]) -> bool:
    return isinstance(e, OperationalError) and any(w in str(e.orig).lower() for w in words)


def _dropped(e: BaseException) -> bool:
    """A connection that was there and went away (not one that never came up)."""
    return (isinstance(e, DBAPIError) and e.connection_invalidated) or _says(e, _DROPPED)


def _transient(e: BaseException) -> bool:
    """A lost connection or a busy database: worth retrying."""
    return _dropped(e) or _says(e, _UNAVAILABLE)


def deadlocked(e: BaseException) -> bool:
    """The database rolled the transaction back to break a deadlock (MySQL)."""
    return _says(e, ("deadlock",))


OPEN_RETRY_SECONDS = 15.0
"""How long opening a database keeps retrying after a dropped connection."""


def _first_line(e: DBAPIError) -> str:
    return str(e.orig).strip().splitlines()[0]


def _with_backoff(
    engine: Engine, call: Callable[[], Any], *, errors: tuple[type[DBAPIError], ...],
    worth_retry: Callable[[BaseException], bool], seconds: float, cap: float, what: str,
    failure: Callable[[DBAPIError], StorageError],
) -> Any:
    """Call `call`; while it raises one of `errors` that is `worth_retry`, dispose of the
    engine's pooled connections and try again after 0.2 s, doubling up to `cap`, for up to
    `seconds`. Any other error, or one past the deadline, becomes `failure(e)`."""
    delay, deadline = 0.2, time.monotonic() + seconds
    while True:
        try:
            return call()
        except errors as e:
            if not worth_retry(e) or time.monotonic() + delay > deadline:
                raise failure(e) from e
            log.warning("%s (%s); retrying in %.1fs", what, str(e.orig).strip()[:80], delay)
            engine.dispose()
            time.sleep(delay)
            delay = min(delay * 2, cap)


class _Retried(Protocol):
    """What `retrying` needs of the first argument of what it wraps (a Store)."""

    engine: Engine
    display_url: str
    retry_seconds: float


def retrying(fn: F) -> F:
    """Retry a store operation with exponential backoff while the database is
    unreachable (restart, dropped connection, lock), for up to RETRY_SECONDS.
    Each operation is one transaction, so a retry never half-applies it.
    Wraps Store methods and the store package's module functions whose first
    argument is the Store (queries, requests, manage): every database access goes
    through it."""

    @functools.wraps(fn)
    def wrapper(self: _Retried, *args: Any, **kwargs: Any) -> Any:
        return _with_backoff(
            self.engine, lambda: fn(self, *args, **kwargs), errors=(OperationalError, DBAPIError), worth_retry=_transient,
            seconds=self.retry_seconds, cap=10.0, what="database unavailable",
            failure=lambda e: StorageError(
                f"database {self.display_url} failed: {_first_line(e)}",
                "check that the database is reachable; nothing was lost, resume with `nasctl resume NAME`",
            ),
        )

    return cast(F, wrapper)


def rowcount(result: Result[Any]) -> int:
    """How many rows an UPDATE or DELETE run through `Session.execute` matched.

    SQLAlchemy types `Session.execute` as returning a `Result`; for those statements
    it returns a `CursorResult`, the class that has `rowcount`.
    """
    return cast("CursorResult[Any]", result).rowcount


def resolve_url(url: str | None) -> str:
    """`--db`, else `NASCTL_DB`, else the embedded SQLite default."""
    return url or os.environ.get("NASCTL_DB") or DEFAULT_URL


def _redact(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _check_sqlite_path(p: Path, create: bool) -> None:
    """Refuse an SQLite path that cannot work before anything is opened or created:
    a missing file (unless `create`), a missing or read-only folder, a read-only
    file, a folder in place of the file.

    SQLite writes `-wal` and `-shm` files beside the database even to read it, so
    a read-only folder is refused like a read-only file.
    """
    shown = p.resolve()
    if not p.exists() and not create:
        raise NotFoundError(
            f"no nasctl database at {shown}",
            "start an experiment with `nasctl run SPEC.yaml`, or pass --db / NASCTL_DB",
        )
    folder = shown.parent
    if not folder.is_dir():
        raise BadInputError(
            f"the folder {folder} for the database {shown.name} does not exist",
            f"create it first (mkdir -p {folder}) or pass another --db path",
        )
    if p.is_dir():
        raise BadInputError(f"--db {shown} is a folder, not a database file",
                            f"pass a file name, e.g. sqlite:///{shown / 'nasctl.db'}")
    if p.exists() and not os.access(p, os.R_OK | os.W_OK):
        raise BadInputError(
            f"the database file {shown} is read-only",
            "make it writable, or copy it somewhere writable and pass --db sqlite:///COPY",
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BadInputError(
            f"the folder {folder} of the database {shown.name} is read-only "
            "(SQLite keeps its -wal and -shm files beside the database)",
            "make it writable, or copy the database somewhere writable and pass --db sqlite:///COPY",
        )


_NOT_SQLITE = ("file is not a database", "file is encrypted or is not a database", "disk image is malformed")


def _not_sqlite(e: BaseException | None) -> bool:
    """SQLite read a file whose content is not an SQLite database (or a damaged one)."""
    return isinstance(e, DBAPIError) and any(w in str(e.orig).lower() for w in _NOT_SQLITE)


def _set_sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    # the wait for a lock first: switching a database to WAL takes a lock, and another
    # process opening it, or running a transaction on a database not yet in WAL mode,
    # would otherwise fail it after sqlite3's own 5 s
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


@dataclass(frozen=True)
class Database:
    """An opened nasctl database: its engine and how to name it."""

    url: str
    display_url: str
    """The URL without its password (SQLite: the file's absolute path)."""
    engine: Engine
    is_sqlite: bool
    path: Path | None
    """The SQLite file (None for a server database or an in-memory one)."""


def connect(url: str | None, *, create: bool, check: bool, initialize: bool, retry_seconds: float) -> Database:
    """Open the database at `url` (see `resolve_url`): create its schema when it is
    empty and `initialize`, else (with `check`) refuse another schema revision.

    Raises:
        BadInputError: the URL is malformed, names a driver that is not installed,
            or an SQLite path that cannot work or holds no SQLite database.
        NotFoundError: an SQLite file that does not exist, when `create` is False;
            a database without nasctl data, when `check`.
        SchemaOutdatedError: the schema is not the one this nasctl needs.
        StorageError: the database cannot be reached.
    """
    url = resolve_url(url)
    display_url = _redact(url)
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise BadInputError(
            f"--db {url!r} is not a database URL",
            "use e.g. sqlite:///nasctl.db or postgresql+psycopg://user@host/db",
        ) from None
    is_sqlite = parsed.get_backend_name() == "sqlite"
    path: Path | None = None
    if is_sqlite:
        if parsed.database and parsed.database != ":memory:":
            p = Path(parsed.database)
            _check_sqlite_path(p, create)
            path = p.resolve()
            display_url = f"sqlite:///{path}"
    try:
        kwargs: dict[str, Any] = {"future": True}
        if not is_sqlite:
            kwargs["pool_pre_ping"] = True
        engine = create_engine(url, **kwargs)
    except (NoSuchModuleError, ModuleNotFoundError, ImportError) as e:
        raise BadInputError(
            f"--db {display_url}: no driver for this database ({e})",
            "install the driver (e.g. pip install 'psycopg[binary]') or use sqlite:///nasctl.db",
        ) from None
    if is_sqlite:
        event.listen(engine, "connect", _set_sqlite_pragmas)
    # a connection dropped while opening (server restart, an administrator ending
    # sessions) is worth another try; a server that is not there, a wrong URL or
    # wrong credentials is not: say so at once
    try:
        _with_backoff(
            engine, lambda: _open(engine, display_url, initialize, check), errors=(OperationalError,),
            worth_retry=_dropped, seconds=min(retry_seconds, OPEN_RETRY_SECONDS), cap=2.0,
            what="database connection dropped while opening",
            failure=lambda e: StorageError(
                f"cannot open database {display_url}: {_first_line(e)}",
                "check that the server runs and the URL is right",
            ),
        )
    except (StorageError, DBAPIError) as e:
        cause = e if isinstance(e, DBAPIError) else e.__cause__
        if path is not None and isinstance(cause, DBAPIError) and _not_sqlite(cause):
            raise BadInputError(
                f"{path} is not a SQLite database ({_first_line(cause)}); it was left untouched",
                "pass --db with a nasctl database, or a new file name to start one",
            ) from None
        raise
    return Database(url, display_url, engine, is_sqlite, path)


def _open(engine: Engine, display_url: str, initialize: bool, check: bool) -> None:
    """Create the schema in an empty database, or check the existing one's revision.
    Either way the database is read once here, so a file that is not one is refused at once."""
    empty = migrate.is_empty(engine)
    if initialize and empty:
        try:
            migrate.upgrade(engine)
        except StorageError as e:
            cause = e.__cause__
            if isinstance(cause, OperationalError) and _dropped(cause):
                # the connection went away mid-migration: if nothing was written (always
                # on PostgreSQL and SQLite, where it is one transaction; on MySQL only
                # before its first DDL), `connect` tries again
                engine.dispose()
                if migrate.is_empty(engine):
                    raise cause from None
            raise
    elif check:
        if empty:
            raise NotFoundError(
                f"database {display_url} holds no nasctl data",
                f"start an experiment with `nasctl run SPEC.yaml --db {display_url}` "
                f"or initialise it with `nasctl db upgrade --db {display_url}`",
            )
        migrate.check_revision(engine, display_url)
