"""`nasctl ls`: experiments in the database."""

from __future__ import annotations

import click

from nasctl.cli import render
from nasctl.cli.options import db_option, json_option


@click.command("ls")
@db_option
@json_option
def command(db: str | None, as_json: bool) -> None:
    """List experiments."""
    from nasctl.orchestration.views import list_view
    from nasctl.store import Store

    rows = list_view(Store(db))
    if as_json:
        render.print_json(rows)
    else:
        render.experiments_table(rows)
