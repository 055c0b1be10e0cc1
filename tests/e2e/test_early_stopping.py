"""Early stopping end to end: real TorchX local_cwd trials that log curves slowly.

Hopeless trials end EARLY_STOPPED with their process gone and their partial
curve kept, good ones complete, the time saved is reported, a trial that was
running when the orchestrator stopped is judged by the resumed one, and a later
resume keeps every state.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from nasctl.store import Store
from nasctl.types import TrialStatus
from tests.conftest import run_cli
from tests.helpers.cli import start

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).parent / "scripts" / "curve_trial.py"
BAD = {3, 5}


def write_spec(tmp_path: Path, name: str) -> Path:
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(
        f"name: {name}\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, epochs: {type: fixed, value: 10}}\n"
        "objectives: {val_acc: {goal: maximize}, num_params: {goal: minimize}}\n"
        "budget: {max_trials: 6, parallelism: 2, max_failures: 0}\n"
        f"trial: {{script: {SCRIPT}}}\n"
        "optimizer: {method: sobol, seed: 3}\n"
        "early_stopping: {min_progress: 3, min_fraction: 0.25, min_completed: 3}\n"
    )
    return spec


def trials(db: str, name: str) -> dict[int, object]:
    store = Store(db)
    try:
        return {t.index: t for t in store.list_trials(store.get_experiment(name).id)}
    finally:
        store.close()


def test_hopeless_trials_are_stopped_and_stay_stopped(tmp_path: Path) -> None:
    name, db = "es-e2e", f"sqlite:///{tmp_path}/es.db"
    spec = write_spec(tmp_path, name)
    hold = tmp_path / "hold"
    hold.touch()
    env = {"NASCTL_TEST_BAD": ",".join(map(str, sorted(BAD))), "NASCTL_TEST_HOLD": str(hold)}
    # Phase 1: good trials run quickly; bad trial 3 waits on the hold file, logging nothing.
    proc = start(["run", str(spec), "--db", db], tmp_path, env)
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, proc.communicate()
        try:
            ts = trials(db, name)
        except Exception:  # not created yet
            ts = {}
        done = [i for i, t in ts.items() if t.status == TrialStatus.COMPLETED]  # type: ignore[attr-defined]
        if len(done) >= 3 and 3 in ts and ts[3].status == TrialStatus.RUNNING:  # type: ignore[attr-defined]
            break
        assert time.monotonic() < deadline, f"never got 3 completed trials and trial 3 running: {ts}"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # leave trial 3 running for the resume
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert trials(db, name)[3].status == TrialStatus.RUNNING  # type: ignore[attr-defined]

    # Phase 2: once the resumed loop has re-attached trial 3, release it: bad trials log one
    # epoch a second (10 epochs) and the resumed loop judges them.
    resume = start(["resume", name, "--db", db, "--json"], tmp_path, env)
    store = Store(db)
    exp = store.get_experiment(name)
    deadline = time.monotonic() + 90
    while not store.events(exp.id, kinds=["resumed"]):
        assert resume.poll() is None, resume.communicate()
        assert time.monotonic() < deadline, "the resumed loop never started"
        time.sleep(0.1)
    store.close()
    hold.unlink()
    out, err = resume.communicate(timeout=120)
    assert resume.returncode == 0, err
    summary = json.loads(out)["summary"]
    assert summary["early_stopped"] == 2 and summary["seconds_saved"] > 0, summary
    assert summary["trials"]["COMPLETED"] == 4 and summary["reattached"] >= 1

    work = tmp_path / "nasctl_runs" / name / "trials"
    store = Store(db)
    exp = store.get_experiment(name)
    for t in store.list_trials(exp.id):
        tdir = work / f"trial_{t.index:04d}"
        if t.index in BAD:
            assert t.status == TrialStatus.EARLY_STOPPED, (t.index, t.status, t.failure_reason)
            reason = t.failure_reason or ""
            assert reason.startswith("early stopped at step ") and "dominated by trial" in reason, reason
            # the process is gone and never got to the end
            assert not (tdir / "finished").exists()
            pid = int((tdir / "trial.pid").read_text())
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
            # its partial values and curve are kept
            curve = [o.step for o in store.observations(t.id, "val_acc")]
            assert 3 <= len(curve) < 10 and t.values["num_params"] == 5000.0
            assert t.values["val_acc"] < 0.3
        else:
            assert t.status == TrialStatus.COMPLETED and (tdir / "finished").exists()
    events = store.events(exp.id, kinds=["early_stopped"])
    assert sorted(e.trial_index for e in events) == sorted(BAD)  # type: ignore[type-var]
    assert all(e.data and e.data["seconds_saved"] > 0 and e.data["dominated_by"] for e in events)
    saved = sum(e.data["seconds_saved"] for e in events if e.data)
    store.close()

    status = json.loads(run_cli("status", name, "--db", db, "--json").stdout)
    assert status["trials"]["EARLY_STOPPED"] == 2
    assert status["early_stopping"]["trials_stopped"] == 2
    assert status["early_stopping"]["seconds_saved"] == pytest.approx(saved, abs=0.1)
    text = run_cli("status", name, "--db", db).stdout
    assert "2 trials stopped on val_acc" in text

    # Phase 3: a later resume (budget spent) keeps every state and the figures.
    again = run_cli("resume", name, "--db", db, "--json", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)["summary"]
    assert summary["early_stopped"] == 2 and summary["seconds_saved"] == pytest.approx(saved, abs=0.1)
    final = trials(db, name)
    assert {i for i, t in final.items() if t.status == TrialStatus.EARLY_STOPPED} == BAD  # type: ignore[attr-defined]
    assert os.path.exists(tmp_path / "nasctl_runs" / name)
