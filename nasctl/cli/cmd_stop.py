"""`nasctl stop NAME`: stop an experiment's orchestrator."""

from __future__ import annotations

import click

from nasctl.cli import render
from nasctl.cli.options import db_option, json_option


@click.command("stop")
@click.argument("name")
@click.option("--cancel", is_flag=True, help="Also cancel running trials (default: leave them for `nasctl resume`).")
@db_option
@json_option
def command(name: str, cancel: bool, db: str | None, as_json: bool) -> None:
    """Ask the orchestrator driving NAME to stop (it acts within a second)."""
    from nasctl.orchestration.control import request_stop
    from nasctl.store import Store

    result = request_stop(Store(db), name, cancel)
    if as_json:
        render.print_json(result)
    elif result["requested"]:
        render.console.print(f"asked the orchestrator of {name} to stop"
                             + (" and cancel its running trials" if cancel else "; running trials keep running"))
    else:
        extra = f"; cancelled trials {result['cancelled']}" if result.get("cancelled") else ""
        render.console.print(f"no orchestrator was running {name}; marked it stopped{extra}")
