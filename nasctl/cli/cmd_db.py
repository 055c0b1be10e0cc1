"""`nasctl db upgrade|current`: schema migrations."""

from __future__ import annotations

import click

from nasctl.cli.options import db_option, json_option


@click.group("db")
def command() -> None:
    """Database schema: show the revision or migrate."""


@command.command("upgrade")
@db_option
def upgrade(db: str | None) -> None:
    """Migrate the database to this nasctl's schema (creates it if empty)."""
    from nasctl.store import Store
    from nasctl.store.migrate import upgrade as do_upgrade

    store = Store(db, create=True, check=False, initialize=False)
    before, after = do_upgrade(store.engine, store.display_url)
    if before == after:
        click.echo(f"{store.display_url} is already at revision {after}")
    else:
        click.echo(f"{store.display_url} upgraded from {before or 'empty'} to {after}")


@command.command("current")
@db_option
@json_option
def current(db: str | None, as_json: bool) -> None:
    """Show the database's schema revision and the one this nasctl needs."""
    from nasctl.cli import render
    from nasctl.store import Store
    from nasctl.store.migrate import current_revision, head_revision

    store = Store(db, check=False)
    cur, head = current_revision(store.engine), head_revision()
    state = "up to date" if cur == head else ("empty" if cur is None else "needs `nasctl db upgrade`")
    if as_json:
        render.print_json({"database": store.display_url, "current": cur, "head": head, "up_to_date": cur == head})
    else:
        click.echo(f"{store.display_url}: revision {cur or '-'} (this nasctl needs {head}: {state})")
