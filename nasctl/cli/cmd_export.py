"""`nasctl export NAME`: every trial as JSON or CSV, a TensorBoard HParams view, or MLflow runs."""

from __future__ import annotations

import click

from nasctl.cli.options import db_option


@click.command("export")
@click.argument("name")
@click.option("--format", "fmt", type=click.Choice(["json", "csv", "tensorboard", "mlflow"]), default="json",
              show_default=True,
              help="json/csv: text; tensorboard: one run per trial for the HParams dashboard (needs --out DIR); "
                   "mlflow: one MLflow run per trial (needs --tracking-uri).")
@click.option("--out", "out", type=click.Path(), default=None,
              help="json/csv: write to this file instead of standard output; tensorboard: the folder to write.")
@click.option("--tracking-uri", "tracking_uri", envvar="MLFLOW_TRACKING_URI", default=None, metavar="URI",
              help="MLflow tracking URI for --format mlflow (default: $MLFLOW_TRACKING_URI), e.g. "
                   "http://host:5000, sqlite:///mlflow.db, file:///abs/dir.")
@db_option
def command(name: str, fmt: str, out: str | None, tracking_uri: str | None, db: str | None) -> None:
    """Export an experiment's trials (parameters, metrics, states, Pareto flags)."""
    from nasctl.errors import BadInputError
    from nasctl.store import Store

    ctx = click.get_current_context()
    if tracking_uri and fmt != "mlflow" and ctx.get_parameter_source("tracking_uri") is not (
            click.core.ParameterSource.ENVIRONMENT):
        raise BadInputError(f"--tracking-uri applies to --format mlflow, not --format {fmt}",
                            "add --format mlflow, or leave out --tracking-uri")
    if fmt == "tensorboard":
        if not out:
            raise BadInputError("--format tensorboard needs --out DIR, the folder to write",
                                f"e.g. nasctl export {name} --format tensorboard --out tb/{name}")
        from nasctl.exports.tensorboard import export_tensorboard

        result = export_tensorboard(Store(db), name, out)
        click.echo(f"wrote {result['runs']} runs (one per trial) to {result['out']}; "
                   f"see them with `tensorboard --logdir {result['out']}` (HParams tab)")
        return
    if fmt == "mlflow":
        if out:
            raise BadInputError("--out does not apply to --format mlflow (runs go to the tracking URI)",
                                "leave out --out")
        if not tracking_uri:
            raise BadInputError("--format mlflow needs --tracking-uri URI (or $MLFLOW_TRACKING_URI)",
                                "e.g. --tracking-uri http://localhost:5000 or sqlite:///mlflow.db")
        from nasctl.exports.mlflow import export_mlflow

        result = export_mlflow(Store(db), name, tracking_uri)
        click.echo(f"MLflow experiment {name!r} (id {result['mlflow_experiment_id']}) at {tracking_uri}: "
                   f"{result['created']} runs created, {result['updated']} updated, "
                   f"{result['unchanged']} unchanged")
        return

    from nasctl.exports.table import export_text

    text = export_text(Store(db), name, fmt)
    if out:
        try:
            with open(out, "w", encoding="utf-8", newline="") as f:
                f.write(text)
        except OSError as e:
            raise BadInputError(f"cannot write --out {out}: {e.strerror}",
                                "pass a file in a folder that exists and is writable") from None
        click.echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=not text.endswith("\n"))
