"""`nasctl` entry point: the command group and the one place errors become exit codes."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from nasctl import __version__
from nasctl.errors import NasctlError

class NasctlGroup(click.Group):
    """Turns nasctl errors into one line and an exit code; tracebacks only with --debug."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NasctlError as e:
            if _debug(ctx):
                raise
            click.echo(f"Error: {e.message}" + (f" ({e.hint})" if e.hint else ""), err=True)
            sys.exit(e.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)
        except Exception as e:
            if _debug(ctx):
                raise
            click.echo(
                f"Error: internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)", err=True
            )
            sys.exit(1)


def _debug(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool((root.params or {}).get("debug")) or os.environ.get("NASCTL_DEBUG") == "1"


@click.group(cls=NasctlGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(__version__, prog_name="nasctl")
def cli(debug: bool) -> None:
    """Multi-objective neural architecture search: propose, launch, measure, keep."""


def _setup_logging() -> None:
    """nasctl's own warnings (e.g. database retries) go to stderr as one line each."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    logger = logging.getLogger("nasctl")
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False


def main() -> None:
    _setup_logging()
    from nasctl.cli import (
        cmd_db,
        cmd_export,
        cmd_ls,
        cmd_pareto,
        cmd_rename,
        cmd_report,
        cmd_resume,
        cmd_rm,
        cmd_run,
        cmd_serve,
        cmd_status,
        cmd_stop,
        cmd_submit,
        cmd_trials,
        cmd_web,
    )

    for mod in (cmd_run, cmd_resume, cmd_stop, cmd_ls, cmd_status, cmd_trials, cmd_pareto, cmd_export, cmd_web,
                cmd_report, cmd_db, cmd_serve, cmd_submit, cmd_rename, cmd_rm):
        cli.add_command(mod.command)
    cli(prog_name="nasctl")


if __name__ == "__main__":
    main()
