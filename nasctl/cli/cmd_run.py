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
    from nasctl.orchestration import control
    from nasctl.spec import load_spec

    overrides: dict[str, object] = {}
    spec = load_spec(spec_path)
    if name:
        overrides["name"] = name
    if max_trials is not None or parallelism is not None:
        budget = spec.budget.model_dump()
        if max_trials is not None:
            budget["max_trials"] = max_trials
        if parallelism is not None:
            budget["parallelism"] = parallelism
        overrides["budget"] = budget
    if overrides:
        spec = load_spec(spec_path, overrides={**_raw(spec), **overrides})
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


def _raw(spec: object) -> dict[str, object]:
    from nasctl.spec import spec_to_dict

    return spec_to_dict(spec)  # type: ignore[arg-type]
