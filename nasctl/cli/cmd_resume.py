"""`nasctl resume NAME`: continue an experiment from the database."""

from __future__ import annotations

import click

from nasctl.cli import render
from nasctl.console import ProgressDisplay
from nasctl.cli.options import db_option, json_option


@click.command("resume")
@click.argument("name")
@click.option("--dryrun", is_flag=True, help="Show what would be re-attached and launched; start nothing.")
@click.option("--workdir", default=None, metavar="DIR",
              help="Put new trial directories under DIR/NAME (e.g. after moving the database to another machine).")
@db_option
@json_option
def command(name: str, dryrun: bool, workdir: str | None, db: str | None, as_json: bool) -> None:
    """Continue experiment NAME after a stop, Ctrl-C or crash: finished trials are
    kept, running ones re-attached, and the budget completed."""
    from nasctl.orchestration import control, views
    from nasctl.store import Store

    store = Store(db)
    if dryrun:
        plan = views.resume_plan(store, name)
        render.print_json(plan) if as_json else render.resume_plan(plan)
        return
    with ProgressDisplay(enabled=not as_json) as display:
        summary = control.resume_experiment(store, name, on_progress=display.update, work_root=workdir)
    render.finish(summary, store, as_json)
