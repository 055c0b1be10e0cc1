"""`nasctl trials NAME`: the trials of an experiment."""

from __future__ import annotations

import click

from nasctl.cli import render
from nasctl.cli.options import db_option, json_option


@click.command("trials")
@click.argument("name")
@click.option("--status", "status", default=None, help="Only trials in this state (e.g. FAILED).")
@click.option("--trial", "index", type=int, default=None, help="Show one trial in full (curves, log tail).")
@db_option
@json_option
def command(name: str, status: str | None, index: int | None, db: str | None, as_json: bool) -> None:
    """List trials with parameters, metric values and state."""
    from nasctl.orchestration.views import trial_detail, trials_view
    from nasctl.store import Store

    store = Store(db)
    if index is not None:
        detail = trial_detail(store, name, index)
        render.print_json(detail) if as_json else render.trial_panel(detail)
        return
    rows = trials_view(store, name, status)
    render.print_json(rows) if as_json else render.trials_table(rows)
