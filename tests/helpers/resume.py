"""Experiments of tests/e2e/scripts/resumable_trial.py trials run by the CLI: spec, trial processes, result checks."""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from nasctl.store import Store
from nasctl.types import TrialStatus
from tests.conftest import run_cli

SCRIPT = Path(__file__).parent.parent / "e2e" / "scripts" / "resumable_trial.py"


def write_spec(tmp_path: Path, name: str, max_trials: int = 4, parallelism: int = 2, method: str = "sobol",
               initial: int = 4, script: Path = SCRIPT, trial: str = "", runner: str = "{}") -> Path:
    """A two-objective spec over x, y in [0, 1] whose trials run `script`; `trial`
    adds keys to the trial section, `runner` is local_cwd's cfg."""
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(
        f"name: {name}\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize, threshold: 1.1}, f2: {goal: minimize, threshold: 2.1}}\n"
        f"budget: {{max_trials: {max_trials}, parallelism: {parallelism}, max_failures: 0}}\n"
        f"trial: {{script: {script}{', ' + trial if trial else ''}}}\n"
        f"runner: {{scheduler: local_cwd, cfg: {runner}}}\n"
        f"optimizer: {{method: {method}, initial_trials: {initial}, seed: 7}}\n"
    )
    return spec


def trial_processes(experiment: str, hold: Path | None = None) -> list[psutil.Process]:
    """Training processes (not launchers) of this experiment, started by this test."""
    found = []
    for p in psutil.process_iter():
        try:
            cmd = " ".join(p.cmdline())
            env = p.environ()
            if (env.get("NASCTL_EXPERIMENT") == experiment and "resumable_trial" in cmd
                    and "nasctl.runners.launcher" not in cmd
                    and (hold is None or env.get("NASCTL_TEST_HOLD") == str(hold))):
                found.append(p)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def wait_running(db: str, name: str, n: int, proc: subprocess.Popen[str] | None, hold: Path,
                 timeout: float = 120) -> None:
    """Return once `n` trials of `name` are RUNNING in the store and as processes; fail
    if `proc` (the orchestrator) ends first or after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None:
            assert proc.poll() is None, proc.communicate()
        try:
            store = Store(db)
            running = store.list_trials(store.get_experiment(name).id, [TrialStatus.RUNNING])
            store.close()
            if len(running) >= n and len(trial_processes(name, hold)) >= n:
                return
        except Exception:  # not created yet
            pass
        assert time.monotonic() < deadline, f"{n} trials never ran"
        time.sleep(0.1)


def check_results(db: str, name: str, runs: Path, max_trials: int) -> list[dict]:
    """Check that `name` COMPLETED with exactly `max_trials` trials, each run once (the
    indices in `runs`) with its own configuration and results; return its trials as JSON."""
    status = json.loads(run_cli("status", name, "--db", db, "--json").stdout)
    assert status["status"] == "COMPLETED", status
    assert status["trials"]["COMPLETED"] == max_trials and sum(status["trials"].values()) == max_trials
    trials = json.loads(run_cli("trials", name, "--db", db, "--json").stdout)
    launches = runs.read_text().split()
    assert sorted(launches, key=int) == [str(i) for i in range(max_trials)], "a trial ran twice or never"
    params = {(t["parameters"]["x"], t["parameters"]["y"]) for t in trials}
    assert len(params) == max_trials, "a configuration was proposed twice"
    for t in trials:  # the real results of each trial's own run
        x, y = t["parameters"]["x"], t["parameters"]["y"]
        assert t["values"]["f1"] == pytest.approx(x, rel=1e-5)
        assert t["values"]["f2"] == pytest.approx(1 - math.sqrt(x) + y, rel=1e-5)
        detail = json.loads(run_cli("trials", name, "--db", db, "--trial", str(t["index"]), "--json").stdout)
        assert [s for s, _ in detail["curves"]["loss"]] == [0, 1, 2]
    return trials

