"""`nasctl web`: serve the dashboard (FastAPI + uvicorn)."""

from __future__ import annotations

import ipaddress

import click

from nasctl.cli.options import db_option

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
WRITES_ENABLED = "stop, cancel, notes, rename and delete enabled for requests carrying the token"


def is_loopback(host: str) -> bool:
    """True when `host` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command("web")
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (keep loopback unless behind a proxy).")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option(
    "--token",
    envvar="NASCTL_WEB_TOKEN",
    default=None,
    help="Allow writes to requests carrying this token: stopping experiments, cancelling trials, "
    "editing notes, renaming and deleting experiments (default: $NASCTL_WEB_TOKEN; "
    "without one the dashboard is read-only).",
)
def command(db: str | None, host: str, port: int, token: str | None) -> None:
    """Serve the web dashboard: experiments, Pareto fronts, trials, model diagnostics."""
    import uvicorn

    from nasctl.store import Store
    from nasctl.web import create_app

    store = Store(db)
    loopback = is_loopback(host)
    allowed = [*LOOPBACK_NAMES, host] if loopback else None
    app = create_app(store, token=token, allowed_hosts=allowed)
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    click.echo(f"nasctl dashboard on http://{shown}:{port}/  (database {store.display_url})")
    click.echo("read-only" if not token else WRITES_ENABLED)
    if not loopback:
        click.echo(
            f"Warning: listening on {host}, reachable from other machines; the API has no TLS. "
            "Prefer --host 127.0.0.1 behind an SSH tunnel or an HTTPS reverse proxy.",
            err=True,
        )
    uvicorn.run(app, host=host, port=port, log_level="warning")
