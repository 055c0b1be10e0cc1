"""Checks for the external clusters some tests use. A missing cluster fails the test
(never skips it), with the command that starts it."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import ROOT

SLURM_UP = f"{ROOT / 'scripts' / 'slurm-local.sh'} up"


def require_slurm() -> None:
    """Fail the calling test unless the local Slurm cluster answers sinfo and sacct with
    both nodes usable. `slurm-local.sh ready` resumes nodes that Slurm drained on its
    own after an earlier test (a controller outage can leave a job step unable to
    report its end; slurmd then drains the node, "Kill task failed"), so that no
    test runs on a one-node cluster. What the tests do to nodes themselves (set one
    down) they undo."""
    try:
        p = subprocess.run([str(ROOT / "scripts" / "slurm-local.sh"), "ready"], capture_output=True, text=True,
                           timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.fail(f"the local Slurm cluster is not running ({e}); start it with `{SLURM_UP}`")
    if p.returncode != 0:
        pytest.fail(f"the local Slurm cluster is not running or not both nodes are usable; start it with "
                    f"`{SLURM_UP}` ({(p.stderr or p.stdout).strip()})")
