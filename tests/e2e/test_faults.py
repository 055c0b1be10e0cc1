"""Trial faults end as FAILED with a reason and the log tail; the experiment still completes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).parent / "scripts" / "faulty_trial.py"

SPEC = f"""
name: faults
search_space:
  x: {{type: float, low: 0.0, high: 1.0}}
  y: {{type: float, low: 0.0, high: 1.0}}
objectives:
  f1: {{goal: minimize}}
  f2: {{goal: minimize}}
budget: {{max_trials: 9, parallelism: 3, trial_timeout: 25, max_failures: 10}}
trial: {{script: {SCRIPT}}}
optimizer: {{method: sobol, seed: 1}}
"""


def test_every_fault_is_recorded(tmp_path: Path) -> None:
    spec = tmp_path / "faults.yaml"
    spec.write_text(SPEC)
    db = f"sqlite:///{tmp_path}/f.db"
    proc = run_cli("run", str(spec), "--db", db, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["summary"]["status"] == "COMPLETED"
    assert out["summary"]["trials"]["COMPLETED"] == 2 and out["summary"]["trials"]["FAILED"] == 7

    trials = {t["index"]: t for t in json.loads(run_cli("trials", "faults", "--db", db, "--json").stdout)}
    assert trials[0]["status"] == trials[6]["status"] == "COMPLETED"
    reasons = {i: trials[i]["failure_reason"] for i in range(1, 6)}
    assert reasons[1] == "job failed: exit code 1: RuntimeError: simulated training crash"  # its exception's last line
    assert "'f1' is nan" in reasons[2]
    assert "'f2' was never logged (logged: f1, loss)" in reasons[3]
    assert "timed out after 25s" in reasons[4]
    assert "corrupt" in reasons[5] and "broken" in reasons[5]
    assert "killed by SIGKILL" in trials[7]["failure_reason"]
    assert "'f1' was never logged (logged: nothing)" in trials[8]["failure_reason"]
    crash = json.loads(run_cli("trials", "faults", "--db", db, "--trial", "1", "--json").stdout)
    assert "simulated training crash" in crash["log_tail"]
    hang = json.loads(run_cli("trials", "faults", "--db", db, "--trial", "4", "--json").stdout)
    assert "mode hang" in hang["log_tail"]
    ok = json.loads(run_cli("trials", "faults", "--db", db, "--trial", "0", "--json").stdout)
    assert [s for s, _ in ok["curves"]["loss"]] == [0, 1, 2]  # the learning curve is kept
    assert ok["values"]["f1"] == pytest.approx(trials[0]["parameters"]["x"], rel=1e-6)


def test_too_many_failures_fail_the_experiment(tmp_path: Path) -> None:
    spec = tmp_path / "faults.yaml"
    spec.write_text(SPEC.replace("max_failures: 10", "max_failures: 1").replace("max_trials: 9", "max_trials: 5")
                    .replace("parallelism: 3", "parallelism: 1"))
    db = f"sqlite:///{tmp_path}/f.db"
    proc = run_cli("run", str(spec), "--db", db, "--json", cwd=tmp_path)
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["summary"]["status"] == "FAILED" and "max_failures=1" in out["summary"]["reason"]
    status = json.loads(run_cli("status", "faults", "--db", db, "--json").stdout)
    assert status["status"] == "FAILED"
    # trial 0 ok, 1 crash, 2 nan: the second failure stops dispatching
    assert status["trials"]["COMPLETED"] == 1 and status["trials"]["FAILED"] == 2
    assert sum(status["trials"].values()) == 3
