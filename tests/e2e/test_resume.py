"""Stop, Ctrl-C, SIGTERM and `nasctl stop`: trials keep running and `nasctl resume`
re-attaches them; the lease keeps a second orchestrator out."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import psutil
import pytest

from nasctl.store import Store
from nasctl.types import TrialStatus
from tests.conftest import run_cli
from tests.helpers.cli import start
from tests.helpers.resume import check_results, trial_processes, wait_running, write_spec

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _no_leftover_trials(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Kill whatever trial processes a failing test left behind (only this test's)."""
    yield
    for p in psutil.process_iter():
        try:
            if str(tmp_path) in p.environ().get("NASCTL_TEST_HOLD", "") + p.environ().get("NASCTL_LOG_DIR", ""):
                p.kill()
        except psutil.Error:
            continue


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_detaches_and_resume_reattaches(tmp_path: Path, sig: signal.Signals) -> None:
    name = f"sig-{sig.name.lower()}"
    spec, db = write_spec(tmp_path, name), f"sqlite:///{tmp_path}/r.db"
    hold, runs = tmp_path / "hold", tmp_path / "runs.log"
    hold.touch()
    env = {"NASCTL_TEST_HOLD": str(hold), "NASCTL_TEST_RUNS": str(runs)}
    proc = start(["run", str(spec), "--db", db], tmp_path, env)
    wait_running(db, name, 2, proc, hold)
    # a second orchestrator is refused while the first is alive
    second = run_cli("resume", name, "--db", db, cwd=tmp_path)
    assert second.returncode == 2 and "already being driven by process" in second.stderr, second.stderr
    pids = {p.pid for p in trial_processes(name, hold)}
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert "2 trials are still running" in out
    status = json.loads(run_cli("status", name, "--db", db, "--json").stdout)
    assert status["status"] == "STOPPED" and status["trials"]["RUNNING"] == 2 and status["lease_owner"] is None
    assert status["orchestrator_alive"] is False
    assert {p.pid for p in trial_processes(name, hold)} == pids  # the trials were left running

    plan = json.loads(run_cli("resume", name, "--dryrun", "--json", "--db", db).stdout)
    assert plan["reattach_running"] == [0, 1] and plan["new_trials_to_propose"] == 2
    hold.unlink()  # let the held trials finish
    resumed = run_cli("resume", name, "--db", db, "--json", cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["summary"]["reattached"] == 2
    check_results(db, name, runs, 4)


def test_stop_command(tmp_path: Path) -> None:
    name = "stopme"
    spec, db = write_spec(tmp_path, name, max_trials=6), f"sqlite:///{tmp_path}/s.db"
    hold, runs = tmp_path / "hold", tmp_path / "runs.log"
    hold.touch()
    env = {"NASCTL_TEST_HOLD": str(hold), "NASCTL_TEST_RUNS": str(runs)}
    proc = start(["run", str(spec), "--db", db], tmp_path, env)
    wait_running(db, name, 2, proc, hold)
    res = json.loads(run_cli("stop", name, "--db", db, "--json").stdout)
    assert res["requested"] is True and res["cancel"] is False
    proc.communicate(timeout=60)
    assert proc.returncode == 1
    status = json.loads(run_cli("status", name, "--db", db, "--json").stdout)
    assert status["status"] == "STOPPED" and status["status_reason"] == "stopped (by `nasctl stop`)"
    assert status["trials"]["RUNNING"] == 2 and len(trial_processes(name, hold)) == 2
    # no orchestrator now: --cancel cancels the trials itself
    res = json.loads(run_cli("stop", name, "--cancel", "--db", db, "--json").stdout)
    assert res["requested"] is False and sorted(res["cancelled"]) == [0, 1]
    deadline = time.monotonic() + 15
    while trial_processes(name, hold):
        assert time.monotonic() < deadline, "cancelled trials still run"
        time.sleep(0.1)
    status = json.loads(run_cli("status", name, "--db", db, "--json").stdout)
    assert status["trials"]["ABANDONED"] == 2 and status["trials"]["RUNNING"] == 0
    # resume finishes the budget with new trials; abandoned ones count against it
    hold.unlink()
    resumed = run_cli("resume", name, "--db", db, "--json", cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    status = json.loads(run_cli("status", name, "--db", db, "--json").stdout)
    assert status["trials"] == {**status["trials"], "COMPLETED": 4, "ABANDONED": 2}


def test_stop_cancel_with_live_orchestrator(tmp_path: Path) -> None:
    name = "stopcancel"
    spec, db = write_spec(tmp_path, name), f"sqlite:///{tmp_path}/c.db"
    hold = tmp_path / "hold"
    hold.touch()
    proc = start(["run", str(spec), "--db", db], tmp_path, {"NASCTL_TEST_HOLD": str(hold)})
    wait_running(db, name, 2, proc, hold)
    assert json.loads(run_cli("stop", name, "--cancel", "--db", db, "--json").stdout)["requested"] is True
    proc.communicate(timeout=60)
    status = json.loads(run_cli("status", name, "--db", db, "--json").stdout)
    assert status["status"] == "STOPPED" and status["trials"]["ABANDONED"] == 2
    deadline = time.monotonic() + 15
    while trial_processes(name, hold):
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_cancel_one_trial_on_request(tmp_path: Path) -> None:
    """What the dashboard's "cancel trial" records: the loop cancels that trial only."""
    from nasctl.store import requests

    name = "cancelone"
    spec, db = write_spec(tmp_path, name, max_trials=3), f"sqlite:///{tmp_path}/o.db"
    hold = tmp_path / "hold"
    hold.touch()
    proc = start(["run", str(spec), "--db", db, "--json"], tmp_path, {"NASCTL_TEST_HOLD": str(hold)})
    wait_running(db, name, 2, proc, hold)
    store = Store(db)
    exp = store.get_experiment(name)
    requests.request_cancel(store, exp.id, 0, "not promising")
    deadline = time.monotonic() + 30
    while store.get_trial(exp.id, 0).status != TrialStatus.ABANDONED:
        assert time.monotonic() < deadline, "the cancel request was not honoured"
        time.sleep(0.1)
    hold.unlink()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    trials = {t.index: t for t in store.list_trials(exp.id)}
    assert trials[0].status == TrialStatus.ABANDONED and trials[0].failure_reason == "cancelled on request"
    assert trials[1].status == trials[2].status == TrialStatus.COMPLETED
