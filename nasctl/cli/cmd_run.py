"""`nasctl run SPEC.yaml`: start an experiment and drive it to the end."""

from __future__ import annotations

import click

from nasctl.cli import render
from nasctl.console import ProgressDisplay
from nasctl.cli.options import db_option, json_option


@click.command("run")
@click.argument("spec_path", metavar="SPEC.yaml", type=click.Path(dir_okay=False))
@click.option("--name", default=None, help="Experiment name (overrides the spec's `name`).")
@click.option("--max-trials", type=int, default=None, help="Override budget.max_trials.")
@click.option("--parallelism", type=int, default=None, help="Override budget.parallelism.")
@click.option("--workdir", default=None, metavar="DIR",
              help="Where trial directories go (default: $NASCTL_HOME, else ./nasctl_runs).")
@click.option("--dryrun", is_flag=True, help="Print what would be launched first; start nothing.")
@db_option
@json_option
def command(spec_path: str, name: str | None, max_trials: int | None, parallelism: int | None,
            workdir: str | None, dryrun: bool, db: str | None, as_json: bool) -> None:
    """Run a NAS experiment described by SPEC.yaml until its budget is spent."""
    from pathlib import Path

    from nasctl.orchestration import control
    from nasctl.spec import apply_overrides, load_spec, spec_changes

    budget = {k: v for k, v in (("max_trials", max_trials), ("parallelism", parallelism)) if v is not None}
    spec = apply_overrides(load_spec(spec_path), spec_changes(name or None, **budget),
                           folder=Path(spec_path).parent, source=spec_path)
    work_root = workdir or control.default_work_root()
    if dryrun:
        plan = control.dryrun(spec, work_root)
        render.print_json(plan) if as_json else render.dryrun_panel(plan)
        return

    from nasctl.store import Store

    control.check_spec_runnable(spec)  # before the database is created: bad input writes nothing
    store = Store(db, create=True)
    with ProgressDisplay(enabled=not as_json) as display:
        summary = control.start_experiment(store, spec, work_root, on_progress=display.update)
    render.finish(summary, store, as_json)
