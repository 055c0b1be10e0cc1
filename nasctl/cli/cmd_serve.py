"""`nasctl serve`: drive many experiments and serve the dashboard and API, until stopped."""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING

import click

from nasctl.cli.cmd_web import LOOPBACK_NAMES, WRITES_ENABLED, is_loopback
from nasctl.cli.options import db_option
from nasctl.errors import BadInputError

if TYPE_CHECKING:
    from nasctl.server import Supervisor

SWITCH_INTERVAL_S = 0.001
"""The service's interpreter switch interval (`sys.setswitchinterval`; Python's default is 0.005)."""


@click.command("serve")
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--token", envvar="NASCTL_TOKEN", default=None,
              help="Token every write (submit, stop, resume, cancel, notes, rename, delete) must carry "
                   "(default: $NASCTL_TOKEN); "
                   "without one the service is read-only.")
@click.option("--workdir", default=None, metavar="DIR",
              help="Trial files of submitted experiments go to DIR/NAME (default: $NASCTL_HOME, else ./nasctl_runs).")
@click.option("--max-experiments", default=4, show_default=True, type=click.IntRange(1, 1000),
              help="Experiments driven at once; more wait as QUEUED.")
@click.option("--url", "advertised", default=None, metavar="URL",
              help="Where others reach this service, named by standbys to whoever writes to them "
                   "(default: http://HOST:PORT/, with this machine's name for a wildcard --host).")
def command(db: str | None, host: str, port: int, token: str | None, workdir: str | None,
            max_experiments: int, advertised: str | None) -> None:
    """Run the service: drive every experiment of the database, take over those whose
    orchestrator died, start submitted ones, and serve the dashboard and API.

    One service per database is active (it holds the service lease). Another
    `nasctl serve` on the same database (another host, or another port) waits as a
    standby: it serves the dashboard and API read-only, refuses writes with the
    active one's URL, and takes over the lease and every experiment when the active
    one stops: within a second of its SIGTERM, or of its death on the same host;
    about 15 s after its heartbeat stops when it ran on another host. SQLite:
    standbys on the same host only."""
    import uvicorn

    from nasctl.orchestration.control import default_work_root
    from nasctl.server import Supervisor, create_service_app

    loopback = is_loopback(host)
    if not loopback and not token:
        raise BadInputError(f"--host {host} is reachable from other machines and the service runs submitted code",
                            "pass --token (or NASCTL_TOKEN), or bind --host 127.0.0.1")
    url = advertised or service_url(host, port)
    sup = Supervisor(db, workdir or default_work_root(), max_experiments=max_experiments, url=url)

    def leave(_signum: int, _frame: object) -> None:
        raise SystemExit(0)

    # uvicorn turns SIGTERM and Ctrl-C into a graceful shutdown of the server, then
    # raises the signal again under the handler it found: this one, which ends the
    # command through `finally`, so the supervisor hands its experiments back
    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGINT, leave)
    # Many threads here (a loop and an optimizer per experiment, in-process trials,
    # the API) mostly wait on the database and on trials. After each statement a loop
    # must win the interpreter back from whichever thread took it; Python's default
    # switch interval (5 ms) makes that wait up to 5 ms per statement, which on
    # PostgreSQL tripled the time a slot stood empty between trials (docs/service.md).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    sup.start()
    try:
        app = create_service_app(sup, token=token, allowed_hosts=[*LOOPBACK_NAMES, host] if loopback else None)
        click.echo(f"nasctl serve on {url}  (database {sup.store.display_url}, up to {max_experiments} "
                   f"experiments at once, {len(sup.driven())} driven now)")
        click.echo(role_line(sup))
        click.echo("read-only" if not token else "submit, resume, " + WRITES_ENABLED
                   + ("" if sup.active else " (once this service is active)"))
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        was_active = sup.active
        sup.close()
        click.echo("nasctl serve stopped; running trials keep running and are re-attached by the next active service"
                   if was_active else "nasctl serve (standby) stopped")


def service_url(host: str, port: int) -> str:
    """The URL recorded in the service lease: the bound address, or this machine's
    name when bound to every address (0.0.0.0, ::), which names no one place."""
    if host in ("0.0.0.0", "::", ""):
        import socket

        host = socket.gethostname()
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/"


def role_line(sup: Supervisor) -> str:
    """The service's role at start, for its output."""
    if sup.active:
        return "active: this service holds the lease of the database and drives its experiments"
    lease = sup.active_lease
    if lease is None:
        return "standby: no service holds the lease of this database now; taking it at the next tick"
    from nasctl.leases import LeaseOwner

    holder = LeaseOwner.parse(lease.owner)
    return (f"standby: the service of this database is {lease.url or 'at an unrecorded URL'} "
            f"({holder.host}, pid {holder.pid}); taking over when it stops; writes here are refused")
