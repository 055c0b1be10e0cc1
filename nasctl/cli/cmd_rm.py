"""`nasctl rm NAME`: remove an experiment (its rows, and with --files its work directory)."""

from __future__ import annotations

import sys

import click

from nasctl.cli import render
from nasctl.cli.options import db_option, json_option


@click.command("rm")
@click.argument("name")
@click.option("--files", is_flag=True, help="Also delete the experiment's recorded work directory.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@db_option
@json_option
def command(name: str, files: bool, yes: bool, db: str | None, as_json: bool) -> None:
    """Remove experiment NAME and all its trials, metrics, events and notes (it must not be running)."""
    from nasctl.errors import BadInputError, ExperimentBusyError
    from nasctl.orchestration.manage import remove, removal_plan
    from nasctl.store import Store

    store = Store(db)
    plan = removal_plan(store, name, files)
    if plan["busy"]:
        raise ExperimentBusyError(f"experiment {name!r} is {plan['status'].lower()}: it cannot be removed while it is driven",
                                  f"stop it first with `nasctl stop {name}`")
    if not yes:
        if not sys.stdin.isatty():
            raise BadInputError(f"`nasctl rm {name}` asks for confirmation, and there is no terminal to ask on",
                                "pass --yes to remove it without asking")
        what = f"experiment {name} ({plan['status'].lower()}, {plan['trials']} trials)"
        if plan["files"]:
            what += f" and the folder {plan['files']}"
        click.confirm(f"Remove {what}? This cannot be undone", abort=True, err=True)
    result = remove(store, name, files)
    if as_json:
        render.print_json(result)
    else:
        rows = result["removed_rows"]
        render.console.print(f"removed {name}: {rows['trials']} trials, {rows['observations']} metric values, "
                             f"{rows['events']} events, {rows['notes']} notes"
                             + (f"; deleted {result['removed_files']}" if result["removed_files"] else ""))
    if files and result["files_kept_because"]:
        click.echo(f"warning: kept the files: {result['files_kept_because']}", err=True)
    if result["files_error"]:
        click.echo(f"Error: the rows are removed, but deleting the files failed: {result['files_error']}", err=True)
        sys.exit(1)
