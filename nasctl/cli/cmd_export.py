"""`nasctl export NAME`: every trial as JSON or CSV."""

from __future__ import annotations

import click

from nasctl.cli.main import db_option


@click.command("export")
@click.argument("name")
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True)
@click.option("--out", "out", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to this file instead of standard output.")
@db_option
def command(name: str, fmt: str, out: str | None, db: str | None) -> None:
    """Export an experiment's trials (parameters, metrics, states)."""
    from nasctl.errors import BadInputError
    from nasctl.orchestration.control import export
    from nasctl.store import Store

    text = export(Store(db), name, fmt)
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
