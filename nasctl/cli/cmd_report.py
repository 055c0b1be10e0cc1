"""`nasctl report NAME --out report.html`: the dashboard's plots as one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path

import click

from nasctl.cli.options import db_option


@click.command("report")
@click.argument("name")
@db_option
@click.option("--out", "out", default=None, metavar="FILE", help="Where to write the HTML (default: NAME-report.html).")
@click.option("--no-diagnostics", is_flag=True, help="Skip the model diagnostics (fitting the model takes seconds).")
def command(name: str, db: str | None, out: str | None, no_diagnostics: bool) -> None:
    """Write the experiment page (Pareto front, hypervolume, trials, parallel coordinates,
    model diagnostics) as one HTML file that works offline."""
    from nasctl.store import Store
    from nasctl.web.report import build_report

    html = build_report(Store(db), name, diagnostics=not no_diagnostics)
    path = Path(out or f"{name}-report.html")
    path.write_text(html, encoding="utf-8")
    click.echo(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
