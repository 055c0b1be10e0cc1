"""Checks for the external clusters some tests use. A missing cluster fails the test
(never skips it), with the command that starts it."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import ROOT

SLURM_UP = f"{ROOT / 'scripts' / 'slurm-local.sh'} up"


def require_slurm() -> None:
    """Fail the calling test unless the local Slurm cluster answers sinfo and sacct."""
    try:
        p = subprocess.run([str(ROOT / "scripts" / "slurm-local.sh"), "status"], capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.fail(f"the local Slurm cluster is not running ({e}); start it with `{SLURM_UP}`")
    if p.returncode != 0:
        pytest.fail(f"the local Slurm cluster is not running; start it with `{SLURM_UP}` "
                    f"({(p.stderr or p.stdout).strip()})")
