"""`nasctl rename OLD NEW`: give an experiment a new name."""

from __future__ import annotations

import click

from nasctl.cli import render
from nasctl.cli.options import db_option, json_option


@click.command("rename")
@click.argument("old")
@click.argument("new")
@db_option
@json_option
def command(old: str, new: str, db: str | None, as_json: bool) -> None:
    """Rename experiment OLD to NEW (it must not be running). Its files stay where they are."""
    from nasctl.orchestration.manage import check_name, rename
    from nasctl.store import Store

    check_name(new)  # before the database is opened: bad input touches nothing
    result = rename(Store(db), old, new)
    if as_json:
        render.print_json(result)
    else:
        render.console.print(f"renamed {old} to {new}; its files stay in {result['work_dir']}")
