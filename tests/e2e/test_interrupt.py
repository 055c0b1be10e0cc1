"""Ctrl-C (SIGINT) and SIGTERM stop a real `nasctl run` cleanly: experiment STOPPED,
running trials cancelled and ABANDONED, no trial process left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from nasctl.store import Store
from nasctl.types import TrialStatus
from tests.conftest import run_cli

pytestmark = pytest.mark.e2e


def _trial_processes(experiment: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("NASCTL_EXPERIMENT") == experiment:
                found.append(p)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    script = tmp_path / "sleepy.py"
    script.write_text("import time, sys\nprint('training', flush=True)\ntime.sleep(300)\n")
    name = f"stop-{sig.name.lower()}"
    spec = tmp_path / "s.yaml"
    spec.write_text(
        f"name: {name}\nsearch_space: {{x: {{type: float, low: 0, high: 1}}}}\n"
        "objectives: {a: {goal: maximize}, b: {goal: minimize}}\n"
        f"budget: {{max_trials: 5, parallelism: 2}}\ntrial: {{script: {script}}}\noptimizer: {{method: sobol}}\n"
    )
    db = f"sqlite:///{tmp_path}/s.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nasctl", "run", str(spec), "--db", db],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.communicate()
            if (tmp_path / "s.db").exists():
                try:
                    store = Store(db)
                    exp = store.get_experiment(name)
                    running = store.list_trials(exp.id, [TrialStatus.RUNNING])
                    store.close()
                    if len(running) == 2 and len(_trial_processes(name)) == 2:
                        break
                except Exception:  # the database is still being created
                    pass
            assert time.monotonic() < deadline, "trials never started"
            time.sleep(0.2)
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    status = json.loads(run_cli("status", name, "--db", db, "--json").stdout)
    assert status["status"] == "STOPPED"
    expected = "Ctrl-C" if sig == signal.SIGINT else "SIGTERM"
    assert status["status_reason"] == f"stopped by {expected}"
    assert status["trials"]["ABANDONED"] == 2 and status["trials"]["RUNNING"] == 0
    assert status["lease_owner"] is None
    deadline = time.monotonic() + 10
    while _trial_processes(name):
        assert time.monotonic() < deadline, "trial processes survived the stop"
        time.sleep(0.2)
