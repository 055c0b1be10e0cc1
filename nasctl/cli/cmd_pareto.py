"""`nasctl pareto NAME`: the Pareto front found so far."""

from __future__ import annotations

import click

from nasctl.cli import render
from nasctl.cli.options import db_option, json_option


@click.command("pareto")
@click.argument("name")
@db_option
@json_option
def command(name: str, db: str | None, as_json: bool) -> None:
    """Show the Pareto-optimal trials and the hypervolume."""
    from nasctl.orchestration.views import pareto_view
    from nasctl.store import Store

    view = pareto_view(Store(db), name)
    render.print_json(view) if as_json else render.pareto_table(view)
