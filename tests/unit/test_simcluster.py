"""The simulated cluster (nasctl/runners/simcluster.py) and the `simulated` runner on it:
learning curves readable epoch by epoch, a checkpoint per epoch, devices shared by
`trials_per_device`, seeded preemptions that go through the real retry path and
resume from the checkpoint after the requeue delay, and the real loop placing trials
on the cluster's devices, the same on every run."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from nasctl.errors import SpecError
from nasctl.metrics.tensorboard import read_scalars
from nasctl.orchestration.control import start_experiment
from nasctl.runners import JobRequest, JobState, get_runner
from nasctl.runners.simcluster import SimCluster, SimJob, hazard_for_share, preemption_after
from nasctl.runners.simulated import SimulatedRunner, cluster_accounting
from nasctl.spec import parse_spec
from nasctl.store import Store
from nasctl.types import FailureClass, TrialStatus

FUNCS = '''
def curve(p):
    e = p["epochs"]
    return {"err": (1 - p["x"]) * 0.5 ** e + 0.01, "size": 1 + 10 * p["x"], "cost": 100.0 * e * (1 + p["x"])}

def breaks_at_3(p):
    if p["epochs"] >= 3:
        raise ValueError("diverged at epoch 3")
    return {"err": 0.5, "size": 1.0, "cost": 10.0 * p["epochs"]}
'''


def _job(key: str, at: float, epochs: int, seconds: float = 10.0, **kw: Any) -> SimJob:
    return SimJob(key, at, kw.pop("first", 0), epochs, lambda k: seconds * k, **kw)


def _run(cluster: SimCluster) -> list[tuple[str, str, int, float]]:
    out = []
    while (t := cluster.next_time()) is not None:
        out += [(e.kind, e.job.key, e.epoch, t) for e in cluster.step(t)]
    return out


def test_epochs_end_one_after_the_other_and_device_time_is_counted() -> None:
    cluster = SimCluster()
    a = cluster.add(_job("a", 0.0, 3))  # epochs of 10, 20, 30 s
    b = cluster.add(_job("b", 0.0, 2, first=1, gpus=2))  # resumed after epoch 1: only epoch 2
    events = _run(cluster)
    assert [(k, key, ep, t) for k, key, ep, t in events if key == "a"] == [
        ("epoch", "a", 1, 10.0), ("epoch", "a", 2, 30.0), ("epoch", "a", 3, 60.0)]
    assert [(k, ep, t) for k, key, ep, t in events if key == "b"] == [("epoch", 2, 20.0)]
    assert a.end_kind == b.end_kind == "completed" and a.ended == 60.0
    assert a.gpu_seconds == 60.0 and b.gpu_seconds == 40.0 and a.lost_seconds == 0.0  # 2 devices x 20 s


def test_a_shared_device_runs_each_job_slower_and_splits_its_time() -> None:
    cluster = SimCluster()
    a = cluster.add(_job("a", 0.0, 1, seconds=10.0, devices=("0",)))
    b = cluster.add(_job("b", 0.0, 1, seconds=10.0, devices=("0",)))  # 2 on device 0 when it starts
    c = cluster.add(_job("c", 0.0, 1, seconds=10.0, devices=("1",)))
    _run(cluster)
    assert (a.ended, b.ended, c.ended) == (10.0, 20.0, 10.0)  # a started alone; b shares with a
    assert b.gpu_seconds == pytest.approx(10.0)  # a device-hour shared is counted once


def test_preemption_loses_the_epoch_in_progress_and_a_requeued_job_waits() -> None:
    cluster = SimCluster()
    a = cluster.add(_job("a", 0.0, 3, preempt_after=25.0))  # epoch 1 ends at 10, epoch 2 would at 30
    events = _run(cluster)
    assert events == [("epoch", "a", 1, 10.0), ("preempt", "a", 1, 25.0)]
    assert a.end_kind == "preempted" and a.epochs_done == 1
    assert a.gpu_seconds == 25.0 and a.lost_seconds == 15.0
    retry = cluster.add(_job("a-a2", 25.0, 3, first=1, delay=120.0))
    assert retry.running_since is None and cluster.next_time() == 145.0
    events = _run(cluster)
    assert events[0] == ("start", "a-a2", 0, 145.0) and events[-1] == ("epoch", "a-a2", 3, 195.0)
    cluster.cancel("a-a2", 999.0)  # idempotent on an ended job
    assert retry.end_kind == "completed"


def test_the_preemption_hazard_is_seeded_and_has_its_rate() -> None:
    rate = hazard_for_share(0.1, 3600.0)
    assert rate == pytest.approx(-math.log(0.9))
    draws = [preemption_after(f"job-{i}", 0, rate, 1) for i in range(4000)]
    assert draws == [preemption_after(f"job-{i}", 0, rate, 1) for i in range(4000)]
    assert draws != [preemption_after(f"job-{i}", 1, rate, 1) for i in range(4000)]
    share = sum(d < 3600.0 for d in draws) / len(draws)
    assert 0.085 < share < 0.115  # 10% of one-hour jobs on one device
    assert preemption_after("x", 0, 0.0, 1) == math.inf
    with pytest.raises(ValueError):
        hazard_for_share(1.0, 10.0)


def _request(tmp_path: Path, name: str, target: str, params: dict[str, Any], attempt: int = 1,
             resume: str | None = None) -> JobRequest:
    tdir = tmp_path / "trials" / name
    env = {"NASCTL_TRIAL_ID": "0", "NASCTL_LOG_DIR": str(tdir / "tb"),
           "NASCTL_CHECKPOINT_DIR": str(tdir / "checkpoints")}
    if resume:
        env["NASCTL_RESUME_FROM"] = resume
    return JobRequest(name=name + ("" if attempt == 1 else f"-a{attempt}"), entrypoint=sys.executable,
                      args=["-m", "nasctl.search_spaces.function", target, "--parameters", json.dumps(params)],
                      env=env, trial_dir=str(tdir), attempt=attempt)


def test_a_curve_is_readable_epoch_by_epoch_and_a_preempted_attempt_resumes(tmp_path: Path, funcs: str) -> None:
    cfg = {"epochs_parameter": "epochs", "duration_metric": "cost", "preempt_rate": 0.0, "requeue_delay": 50}
    runner = get_runner("simulated", cfg)
    assert isinstance(runner, SimulatedRunner)
    req = _request(tmp_path, "t0", f"{funcs}:curve", {"x": 0.5, "epochs": 3})
    job = runner.submit(req)
    assert job.metadata["simulated_end"] == pytest.approx(450.0)  # 3 epochs of 150 s
    assert runner.advance() and runner.clock().elapsed == 150.0
    seen = read_scalars(req.env["NASCTL_LOG_DIR"])
    assert sorted({(o.metric, o.step) for o in seen}) == [("cost", 1), ("err", 1), ("size", 1)]
    assert runner.status([job])[job.handle].state == JobState.RUNNING  # readable while it runs
    ckpt = tmp_path / "trials" / "t0" / "checkpoints" / "last.ckpt"
    assert json.loads(ckpt.read_text())["epoch"] == 1
    # the same trial's next attempt (as the retry path submits it) waits, then resumes after epoch 1
    runner.cancel(job)
    assert runner.status([job])[job.handle].state == JobState.CANCELLED
    retry = runner.submit(_request(tmp_path, "t0", f"{funcs}:curve", {"x": 0.5, "epochs": 3}, attempt=2,
                                   resume=str(ckpt)))
    assert retry.handle != job.handle and retry.metadata["outcome"].endswith("inprocess-a2.json")
    pending = runner.status([retry])[retry.handle]
    assert pending.state == JobState.PENDING and "requeue_delay" in (pending.message or "")
    while runner.advance():
        pass
    assert runner.clock().elapsed == pytest.approx(150.0 + 50.0 + 300.0)  # epochs 2 and 3 only
    assert runner.status([retry])[retry.handle].state == JobState.SUCCEEDED
    steps = sorted({o.step for o in read_scalars(req.env["NASCTL_LOG_DIR"]) if o.metric == "err"})
    assert steps == [1, 2, 3]
    (acct,) = [a for a in cluster_accounting(str(tmp_path)) if a["attempt"] == 2]
    assert acct["first_epoch"] == 1 and acct["running_since"] == 200.0 and acct["gpu_seconds"] == 300.0


def test_preemption_is_an_infrastructure_failure_and_a_raising_epoch_the_trials_own(
        tmp_path: Path, funcs: str) -> None:
    cfg = {"epochs_parameter": "epochs", "duration_metric": "cost"}
    runner = get_runner("simulated", {**cfg, "preempt_rate": 1e6})  # preempted at once
    job = runner.submit(_request(tmp_path, "p", f"{funcs}:curve", {"x": 0.1, "epochs": 2}))
    calm = get_runner("simulated", cfg)
    bad = calm.submit(_request(tmp_path, "b", f"{funcs}:breaks_at_3", {"x": 0.1, "epochs": 4}))
    for r in (runner, calm):
        while r.advance():
            pass
    st = runner.status([job])[job.handle]
    assert st.state == JobState.FAILED and st.failure_class == FailureClass.INFRASTRUCTURE
    assert "preempted" in (st.message or "")
    # a fresh process reads both ends from their outcome files
    fresh = get_runner("simulated")
    assert fresh.status([job])[job.handle].failure_class == FailureClass.INFRASTRUCTURE
    st = fresh.status([bad])[bad.handle]
    assert st.state == JobState.FAILED and st.failure_class == FailureClass.USER
    assert "diverged at epoch 3" in fresh.log_tail(bad)
    steps = sorted({o.step for o in read_scalars(str(tmp_path / "trials" / "b" / "tb")) if o.metric == "err"})
    assert steps == [1, 2]  # the epochs before the failure stay readable


def test_bad_cluster_cfg_is_refused_with_the_fix() -> None:
    for cfg, msg in (({"preempt_rate": -1}, "non-negative"), ({"epochs_parameter": 3}, "parameter name"),
                     ({"trials_per_device": 2}, "without runner.cfg.devices"),
                     ({"devices": [0, 0]}, "twice"), ({"devices": [0], "trials_per_device": 0}, ">= 1")):
        with pytest.raises(SpecError, match=msg):
            get_runner("simulated", cfg)
    runner = get_runner("simulated", {"devices": [0, 1]})
    with pytest.raises(SpecError, match="only 2"):
        runner.check_gpu(3)
    with pytest.raises(SpecError, match="no devices"):
        get_runner("simulated").check_gpu(1)


def _curve_spec(name: str, funcs: str, budget: str, trial: str = "", cfg: str = "") -> str:
    """A spec of `curve` trials (4 epochs, one GPU each) on two simulated devices; `budget`,
    `trial` and `cfg` add to its budget, trial and runner.cfg mappings."""
    return f"""
name: {name}
search_space:
  x: {{type: float, low: 0, high: 1}}
  epochs: {{type: fixed, value: 4}}
objectives: {{err: {{goal: minimize}}, size: {{goal: minimize}}}}
budget: {{{budget}}}
trial: {{function: "{funcs}:curve", resources: {{gpu: 1}}{trial}}}
optimizer: {{method: sobol, seed: 3}}
runner:
  scheduler: simulated
  cfg: {{devices: [0, 1], epochs_parameter: epochs, duration_metric: cost, seed: 7{cfg}}}
"""


def _cluster_run(tmp_path: Path, funcs: str, name: str) -> tuple[Store, Any, list[Any]]:
    spec = _curve_spec(name, funcs, "max_trials: 10, parallelism: 4", trial=", max_retries: 5", cfg=", preempt_rate: 4.0")
    path = tmp_path / f"{name}.yaml"
    path.write_text(spec)
    store = Store(f"sqlite:///{tmp_path}/{name}.db", create=True)
    summary = start_experiment(store, parse_spec(path.read_text()), str(tmp_path))
    assert summary.status.value == "COMPLETED", summary.reason
    return store, summary, cluster_accounting(str(tmp_path / name))


def test_the_loop_places_trials_on_the_clusters_devices_and_retries_preempted_ones_from_checkpoints(
        tmp_path: Path, funcs: str) -> None:
    """Parallelism 4 on 2 devices: never more than 2 jobs run at once (the others wait for
    devices as candidates); preempted attempts go through the retry path, wait the
    requeue delay and resume after their last epoch; every trial completes; and a second
    run is the same, job for job."""
    store, _, jobs = _cluster_run(tmp_path, funcs, "c1")
    exp = store.get_experiment("c1")
    trials = store.list_trials(exp.id)
    assert len(trials) == 10 and all(t.status == TrialStatus.COMPLETED for t in trials)
    spans = [(j["running_since"], j["ended"]) for j in jobs]
    for s, _ in spans:
        assert sum(1 for s2, e2 in spans if s2 <= s < e2) <= 2
    preempted = [j for j in jobs if j["end"] == "preempted"]
    retries = [j for j in jobs if j["attempt"] > 1]
    assert preempted and len(retries) == len(preempted)
    for r in retries:
        assert r["running_since"] >= r["submitted"] + 120.0  # the requeue delay
    assert any(r["first_epoch"] > 0 for r in retries)  # resumed from a checkpoint, not from scratch
    by_trial: dict[str, list[dict[str, Any]]] = {}
    for j in jobs:
        by_trial.setdefault(j["trial_dir"], []).append(j)
    for attempts in by_trial.values():
        for before, after in zip(attempts, attempts[1:]):
            assert after["first_epoch"] == before["epochs_done"]  # nothing redone but the lost epoch
    retried = [t for t in trials if len(t.attempts) > 1]
    assert retried and all(a["failure_class"] == "infrastructure" for t in retried for a in t.attempts[:-1])
    _, _, again = _cluster_run(tmp_path, funcs, "c2")
    key = ("attempt", "parameters", "submitted", "running_since", "ended", "end", "gpu_seconds", "first_epoch")
    assert [[j[k] for k in key] for j in again] == [[j[k] for k in key] for j in jobs]


def test_promotions_on_the_cluster_continue_from_the_rung_below(tmp_path: Path, funcs: str) -> None:
    """With optimizer.fidelity the promoted trials' jobs start after the epochs their
    source trial trained (its checkpoint), and pay only the epochs they add."""
    spec = f"""
name: mf2
search_space:
  x: {{type: float, low: 0, high: 1}}
objectives: {{err: {{goal: minimize}}, size: {{goal: minimize}}}}
budget: {{max_trials: 12, parallelism: 4}}
trial: {{function: "{funcs}:curve", resources: {{gpu: 1}}}}
optimizer: {{method: sobol, seed: 1, fidelity: {{parameter: epochs, min: 1, max: 9, eta: 3}}}}
runner:
  scheduler: simulated
  cfg: {{devices: [0, 1, 2, 3], epochs_parameter: epochs, duration_metric: cost, seed: 2}}
"""
    store = Store(f"sqlite:///{tmp_path}/mf2.db", create=True)
    summary = start_experiment(store, parse_spec(spec), str(tmp_path))
    assert summary.status.value == "COMPLETED", summary.reason
    trials = {t.index: t for t in store.list_trials(store.get_experiment("mf2").id)}
    promoted = [t for t in trials.values() if t.promoted_from is not None]
    assert promoted
    by_dir = {os.path.basename(j["trial_dir"]): j for j in cluster_accounting(str(tmp_path / "mf2"))}
    for t in promoted:
        job = by_dir[f"trial_{t.index:04d}"]
        source = trials[t.promoted_from]
        assert job["first_epoch"] == source.parameters["epochs"]
        assert job["last_epoch"] == t.parameters["epochs"]


@pytest.mark.timeout(300)  # a loop that keeps proposing once the budget is spent never ends
def test_gpu_hours_and_their_budget_are_the_clusters_device_time(tmp_path: Path, funcs: str) -> None:
    """On the simulated clock a trial's attempts are timed by that clock: the store's
    GPU-hours are the cluster's device-seconds (preempted attempts included), and
    budget.max_gpu_hours stops new trials once the cluster has spent it; the running
    ones finish and nothing more is proposed."""
    spec = _curve_spec("gh", funcs, "max_trials: 40, parallelism: 2, max_gpu_hours: 0.5", trial=", max_retries: 5",
                       cfg=", preempt_rate: 2.0")
    from nasctl.orchestration.usage import trial_usage

    store = Store(f"sqlite:///{tmp_path}/gh.db", create=True)
    summary = start_experiment(store, parse_spec(spec), str(tmp_path))
    assert summary.status.value == "COMPLETED", summary.reason
    trials = store.list_trials(store.get_experiment("gh").id)
    jobs = cluster_accounting(str(tmp_path / "gh"))
    cluster_hours = sum(j["gpu_seconds"] for j in jobs) / 3600.0
    stored_hours = sum(trial_usage(t, 0.0).gpu_hours for t in trials)
    # each trial takes 400-800 device-seconds: the half hour is spent after a few, not 40
    assert 2 <= len(trials) < 10 and all(t.status == TrialStatus.COMPLETED for t in trials), trials
    assert stored_hours == pytest.approx(cluster_hours, rel=1e-6) and stored_hours >= 0.5
    assert any(len(t.attempts) > 1 for t in trials)  # a preempted attempt's device time is in both
    # a retry waits the requeue delay (120 s) in the queue: the store's wait is the cluster's
    assert all(a["queued_s"] == pytest.approx(120.0, abs=1e-3) for t in trials for a in t.attempts[1:])
    # what the last trials to start had spent when they started: under the budget
    starts = sorted(j["submitted"] for j in jobs if j["attempt"] == 1)
    spent_at = [sum(max(0.0, min(s, j["ended"]) - j["running_since"]) for j in jobs if j["running_since"] is not None)
                for s in starts]
    assert all(h < 0.5 * 3600 for h in spent_at), spent_at
    assert len(summary.generation_seconds) <= len(trials)  # no proposal asked for once the budget was spent


def test_trial_timeout_is_judged_on_the_simulated_clock(tmp_path: Path, funcs: str) -> None:
    """Trials of 400-800 simulated seconds against budget.trial_timeout 300: each one
    times out at the loop's first tick past 300 s of its run (the cluster's next
    event: an epoch of it or of the other trial ends), however few real seconds it took."""
    spec = _curve_spec("tt", funcs, "max_trials: 2, parallelism: 2, trial_timeout: 300, max_failures: 10")
    store = Store(f"sqlite:///{tmp_path}/tt.db", create=True)
    start_experiment(store, parse_spec(spec), str(tmp_path))
    trials = store.list_trials(store.get_experiment("tt").id)
    assert len(trials) == 2 and all(t.status == TrialStatus.FAILED and "trial_timeout" in (t.failure_reason or "")
                                    for t in trials), [(t.status, t.failure_reason) for t in trials]
    for t in trials:
        epoch = 100.0 * (1 + t.parameters["x"])  # the curve's cost per epoch
        ran = t.attempts[-1]["run_s"]
        assert 300 < ran <= 300 + epoch + 1e-6, (ran, epoch)
