"""Checks for the external clusters some tests use. A missing cluster fails the test
(never skips it), with the command that starts it."""

from __future__ import annotations

import subprocess
import time

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
    resume_drained_nodes()


def resume_drained_nodes(timeout: float = 60.0) -> None:
    """Resume the nodes Slurm drained after an earlier test and wait until both are usable.

    A controller outage can leave a job step unable to report its end; slurmd then
    drains the node ("Kill task failed"), and every later test on the two-node
    cluster would run on one node. What the tests do to nodes themselves (set one
    down) they undo; this undoes what Slurm did on its own."""
    deadline = time.monotonic() + timeout
    while True:
        p = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=30)
        states = dict(line.split()[:2] for line in p.stdout.splitlines() if len(line.split()) >= 2)
        if len(states) >= 2 and all(s.rstrip("*~#") in ("idle", "mixed", "allocated", "completing")
                                    for s in states.values()):
            return
        for node, state in states.items():
            if any(word in state for word in ("drain", "down", "fail")):
                subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], capture_output=True,
                               timeout=30)
        if time.monotonic() > deadline:
            pytest.fail(f"Slurm nodes not usable after {timeout:.0f} s: {states}; restart with `{SLURM_UP}`")
        time.sleep(1)
