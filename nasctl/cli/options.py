"""Options every command shares: `--db` and `--json`."""

from __future__ import annotations

from typing import Any

import click

DB_HELP = "Database URL (default: $NASCTL_DB, else sqlite:///nasctl.db)."


def db_option(f: Any) -> Any:
    """`--db URL` (default $NASCTL_DB)."""
    return click.option("--db", "db", envvar="NASCTL_DB", default=None, metavar="URL", help=DB_HELP)(f)


def json_option(f: Any) -> Any:
    """`--json`: machine-readable output."""
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(f)
