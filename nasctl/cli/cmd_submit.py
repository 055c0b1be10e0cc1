"""`nasctl submit SPEC.yaml`: hand an experiment to a running `nasctl serve`."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from nasctl.cli import render
from nasctl.cli.options import json_option
from nasctl.errors import BadInputError, NasctlError, StorageError


class ServiceRefused(BadInputError):
    """The service answered 4xx: bad spec, name in use, wrong token."""


@click.command("submit")
@click.argument("spec_path", metavar="SPEC.yaml")
@click.option("--server", envvar="NASCTL_SERVER", default="http://127.0.0.1:8080", show_default=True,
              help="The service's URL (default: $NASCTL_SERVER).")
@click.option("--token", envvar="NASCTL_TOKEN", default=None, help="The service's token (default: $NASCTL_TOKEN).")
@click.option("--name", default=None, help="Experiment name (overrides the spec's).")
@click.option("--max-trials", type=click.IntRange(1, 100_000), default=None, help="Override budget.max_trials.")
@json_option
def command(spec_path: str, server: str, token: str | None, name: str | None, max_trials: int | None,
            as_json: bool) -> None:
    """Submit SPEC.yaml to `nasctl serve`; prints the experiment's name. Relative paths
    in the spec resolve in the spec's folder on the server's file system."""
    from nasctl.spec import read_spec_text

    p = Path(spec_path)
    text = read_spec_text(p)
    body = {"spec": text, "spec_dir": str(p.resolve().parent), "source": str(spec_path), "name": name,
            "max_trials": max_trials}
    answer = post(server.rstrip("/") + "/api/experiments", body, token)
    if as_json:
        render.print_json(answer)
    else:
        click.echo(answer["name"])


def post(url: str, body: Mapping[str, object], token: str | None) -> dict[str, Any]:
    """POST JSON; the service's error answers become one-line nasctl errors.

    Raises:
        ServiceRefused: a 4xx answer (exit 2), with the service's message and hint.
        StorageError: the service cannot be reached or failed (exit 1).
    """
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=float(os.environ.get("NASCTL_SUBMIT_TIMEOUT", "60"))) as r:
            return json.loads(r.read().decode())  # type: ignore[no-any-return]
    except urllib.error.HTTPError as e:
        try:
            err = json.loads(e.read().decode())
        except ValueError:
            err = {"error": f"HTTP {e.code}", "hint": None}
        cls: type[NasctlError] = ServiceRefused if 400 <= e.code < 500 else StorageError
        hint = err.get("hint")
        if e.code == 401:  # the service's hint is for HTTP clients: name the CLI's ways to send it
            hint = ("pass --token TOKEN or set NASCTL_TOKEN, with the token `nasctl serve` was started with"
                    if not token else "check --token / NASCTL_TOKEN: it must be the token `nasctl serve` was started with")
        raise cls(str(err.get("error")), hint) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise StorageError(f"cannot reach nasctl serve at {url}: {reason}",
                           "start it with `nasctl serve`, or pass --server / NASCTL_SERVER") from None
