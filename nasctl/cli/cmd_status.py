"""`nasctl status NAME`: one experiment's state."""

from __future__ import annotations

import click

from nasctl.cli import render
from nasctl.cli.options import db_option, json_option


@click.command("status")
@click.argument("name")
@db_option
@json_option
def command(name: str, db: str | None, as_json: bool) -> None:
    """Show an experiment's status, trial counts and hypervolume."""
    from nasctl.orchestration.views import status_view
    from nasctl.store import Store

    view = status_view(Store(db), name)
    if as_json:
        render.print_json(view)
    else:
        render.status_panel(view)
