"""Queued is not running: the rules that follow an attempt through the scheduler's
queue, its restarts, and what it costs in running time and GPU-hours."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from nasctl.errors import SpecError
from nasctl.orchestration import attempts as A
from nasctl.orchestration.ledger import TrialLedger
from nasctl.orchestration.usage import attempt_usage, queued, trial_usage
from nasctl.runners.base import JobState, JobStatus, SubmittedJob
from nasctl.runners.slurm import NodeOffer, SlurmRecord, _gres_gpus, check_fits, map_state
from nasctl.spec import spec_from_dict
from nasctl.types import FailureClass, TrialRecord, TrialStatus
from tests.conftest import ROOT, run_cli

T0 = 1_800_000_000.0


def at(t: float) -> datetime:
    return datetime.fromtimestamp(t, timezone.utc).replace(tzinfo=None)


def submitted(queued_: bool = True, gpus: float = 2.0) -> A.Attempt:
    return A.started([], SubmittedJob("slurm://torchx/7"), at(T0), queued=queued_, gpus=gpus)[0]


def trial(attempts: list[A.Attempt], status: TrialStatus = TrialStatus.RUNNING) -> TrialRecord:
    return TrialRecord(1, 1, 0, {}, status, "sobol", at(T0), attempts=attempts)


def test_a_queued_job_keeps_the_schedulers_reason_and_runs_from_its_start() -> None:
    a = submitted()
    assert a["running_since"] is None and queued(trial([a]))
    b, restart = A.observe(a, JobStatus(JobState.PENDING, "Priority"), T0 + 5, None)
    assert b["pending_reason"] == "Priority" and restart is None
    same, _ = A.observe(b, JobStatus(JobState.PENDING, "Priority"), T0 + 10, None)
    assert same is b  # nothing to store
    c, restart = A.observe(b, JobStatus(JobState.RUNNING, node="node1", running_since=T0 + 40), T0 + 45, None)
    assert restart is None and c["pending_reason"] is None and c["node"] == "node1"
    assert A.epoch(c["running_since"]) == T0 + 40 and c["queued_s"] == pytest.approx(40)
    assert not queued(trial([c]))
    done = A.ended([c], None, None, None, at(T0 + 100))[-1]
    use = attempt_usage(done, T0 + 1000)
    assert use.run_s == pytest.approx(60) and use.queued_s == pytest.approx(40)
    assert use.gpu_hours == pytest.approx(2 * 60 / 3600) and use.lost_gpu_s == 0


def test_without_the_schedulers_start_the_poll_that_sees_it_run_starts_it() -> None:
    c, _ = A.observe(submitted(), JobStatus(JobState.RUNNING), T0 + 7, None)
    assert A.epoch(c["running_since"]) == T0 + 7


def test_a_local_job_runs_from_submission() -> None:
    a = submitted(queued_=False, gpus=0.5)
    assert A.epoch(a["running_since"]) == T0 and not queued(trial([a]))
    assert attempt_usage(a, T0 + 3600).gpu_hours == pytest.approx(0.5)


def test_a_running_job_back_in_the_queue_is_a_restart_that_resumes_or_starts_over() -> None:
    c, _ = A.observe(submitted(), JobStatus(JobState.RUNNING, node="node1", running_since=T0), T0 + 1, None)
    d, restart = A.observe(c, JobStatus(JobState.PENDING, "BeginTime"), T0 + 100, "/t/ckpt/last.ckpt")
    assert restart == {"at": d["restarts"][0]["at"], "node": "node1", "reason": "BeginTime",
                       "resumed_from": "/t/ckpt/last.ckpt"}
    assert d["running_since"] is None and d["pending_reason"] == "BeginTime" and d["run_s"] == pytest.approx(100)
    assert "resumes from its checkpoint /t/ckpt/last.ckpt" in A.restart_message(3, d, restart, "slurm")
    # no checkpoint: the run before is redone, and its device time is lost
    e, restart2 = A.observe(c, JobStatus(JobState.PENDING, "NodeDown"), T0 + 100, None)
    assert restart2 is not None and "started over" in A.restart_message(3, e, restart2, "slurm")
    assert attempt_usage(e, T0 + 100).lost_gpu_s == pytest.approx(2 * 100)
    assert attempt_usage(d, T0 + 100).lost_gpu_s == 0


def test_a_later_start_than_recorded_is_a_restart_missed_between_polls() -> None:
    c, _ = A.observe(submitted(), JobStatus(JobState.RUNNING, running_since=T0), T0 + 1, None)
    same, none = A.observe(c, JobStatus(JobState.RUNNING, running_since=T0 + 1), T0 + 50, None)
    assert none is None and same is c  # within the tolerance: the same run
    d, restart = A.observe(c, JobStatus(JobState.RUNNING, running_since=T0 + 200), T0 + 210, "/ck")
    assert restart is not None and restart["resumed_from"] == "/ck" and A.epoch(d["running_since"]) == T0 + 200


def test_a_job_that_ended_before_any_poll_saw_it_run_ran_from_the_schedulers_start() -> None:
    done = A.ended([submitted()], None, None, None, at(T0 + 100), ran_from=T0 + 30)[-1]
    use = attempt_usage(done, T0 + 500)
    assert use.queued_s == pytest.approx(30) and use.run_s == pytest.approx(70)
    never_ran = A.ended([submitted()], FailureClass.UNSCHEDULABLE, "can never run", None, at(T0 + 20))[-1]
    assert attempt_usage(never_ran, T0 + 500).run_s == 0 and attempt_usage(never_ran, T0).queued_s == 20


def test_failed_attempts_count_as_lost_gpu_time_and_old_records_still_count() -> None:
    ran, _ = A.observe(submitted(), JobStatus(JobState.RUNNING, running_since=T0), T0, None)
    failed = A.ended([ran], FailureClass.INFRASTRUCTURE, "node failed", None, at(T0 + 360))
    second = A.started(failed, SubmittedJob("slurm://torchx/8"), at(T0 + 400), queued=False, gpus=2.0)
    done = A.ended(second, None, None, None, at(T0 + 760))
    use = trial_usage(trial(done, TrialStatus.COMPLETED), T0 + 9999)
    assert use.gpu_hours == pytest.approx(2 * 720 / 3600) and use.lost_gpu_hours == pytest.approx(2 * 360 / 3600)
    legacy = {"number": 1, "started_at": at(T0).isoformat(), "ended_at": at(T0 + 10).isoformat()}
    assert attempt_usage(legacy, T0 + 99).run_s == pytest.approx(10)


def test_the_gpu_budget_stops_new_trials_once_spent() -> None:
    spec = spec_from_dict({"name": "g", "search_space": {"x": {"type": "float", "low": 0, "high": 1}},
                           "objectives": {"y": {"goal": "maximize"}},
                           "budget": {"max_trials": 10, "max_gpu_hours": 1.0},
                           "trial": {"script": "t.py"}})
    led = TrialLedger(spec)
    assert led.may_create and not led.gpu_exhausted
    done = A.ended([submitted(queued_=False, gpus=1.0)], None, None, None, at(T0 + 1800))[-1]
    led.attempt_ended(done)
    assert led.may_create and led.gpu_hours == pytest.approx(0.5)
    led.running_gpu_seconds = 1800.0
    assert led.gpu_exhausted and not led.may_create


def test_slurm_reasons_that_waiting_cannot_clear_end_the_job_unschedulable() -> None:
    held = map_state(SlurmRecord("5", "e-0-0", "PENDING", None, "PartitionConfig"))
    assert held.state == JobState.FAILED and held.failure_class == FailureClass.UNSCHEDULABLE
    assert "PartitionConfig" in (held.message or "")
    waits = map_state(SlurmRecord("5", "e-0-0", "PENDING", None, "Resources"))
    assert waits.state == JobState.PENDING and waits.message == "Resources"
    runs = map_state(SlurmRecord("5", "e-0-0", "RUNNING", None, "None", "node2", "2026-11-28T10:00:00"))
    assert runs.running_since == datetime.fromisoformat("2026-11-28T10:00:00").timestamp()


def test_a_request_no_node_offers_is_refused_naming_the_resource() -> None:
    offers = [NodeOffer("node1", 2, 8000, 0), NodeOffer("node2", 4, 4000, 1)]
    check_fits("debug", offers, 2, 8000, 0)
    with pytest.raises(SpecError, match=r"trial.resources.cpu asks for 64 CPUs .* more than 4"):
        check_fits("debug", offers, 64, 1000, 0)
    with pytest.raises(SpecError, match=r"mem_mb asks for 500000 MB .* more than 8000"):
        check_fits("debug", offers, 1, 500000, 0)
    with pytest.raises(SpecError, match=r"no node .* has 4 CPUs, 8000 MB and 0 GPUs at once"):
        check_fits("debug", offers, 4, 8000, 0)
    assert _gres_gpus("gpu:a100:2(S:0-1),gpu:1") == 3 and _gres_gpus("(null)") == 0


def test_max_gpu_hours_ends_the_search_once_the_trials_have_held_that_many_devices(tmp_path: Path) -> None:
    """Local trials on nasctl's own placement (devices 0 and 1 stand in for GPUs: the
    trial never touches them): each holds one device while it runs."""
    script = ROOT / "tests" / "e2e" / "scripts" / "resumable_trial.py"
    spec = tmp_path / "g.yaml"
    spec.write_text(
        "name: gpu-budget\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize}, f2: {goal: minimize}}\n"
        "budget: {max_trials: 40, parallelism: 2, max_gpu_hours: 0.002}\n"  # 7.2 device-seconds
        f"trial: {{script: {script}, resources: {{cpu: 1, mem_mb: 500, gpu: 1}}, preload: false}}\n"
        "runner: {scheduler: local_cwd, cfg: {devices: [0, 1]}}\n"
        "optimizer: {method: sobol, seed: 1}\n")
    db = f"sqlite:///{tmp_path}/g.db"
    p = run_cli("run", str(spec), "--db", db, "--workdir", str(tmp_path / "runs"), env={"NASCTL_TEST_SLEEP": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert "budget.max_gpu_hours=0.002 spent" in p.stderr, p.stderr[-3000:]
    status = json.loads(run_cli("status", "gpu-budget", "--db", db, "--json").stdout)
    done = status["trials"]["COMPLETED"]
    assert status["status"] == "COMPLETED" and 2 <= done < 40, status
    assert status["gpu_hours"] >= 0.002 and status["usage"]["gpu_hours_lost"] == 0, status
    rows = json.loads(run_cli("trials", "gpu-budget", "--db", db, "--json").stdout)
    # gpu_hours is rounded to 6 decimals (half a step: 5e-7 h) and duration_s to 3 (5e-4 s): both roundings
    rounding = 5e-7 + 5e-4 / 3600
    assert all(r["gpu_hours"] == pytest.approx(r["duration_s"] / 3600, abs=rounding) for r in rows if r["duration_s"]), [
        (r["status"], r["gpu_hours"], r["duration_s"]) for r in rows]
    assert sum(r["gpu_hours"] for r in rows) == pytest.approx(status["gpu_hours"], rel=1e-3)
    assert "GPU-hours" in run_cli("status", "gpu-budget", "--db", db).stdout


def test_after_a_resume_the_report_gives_this_runs_time_and_the_time_since_creation() -> None:
    from nasctl.cli.render import run_report
    from nasctl.console import console
    from nasctl.orchestration.progress import RunSummary
    from nasctl.types import ExperimentStatus

    s = RunSummary("e", ExperimentStatus.COMPLETED, None, {"COMPLETED": 4}, 0.5, [0], 165.0, [])
    view = {"experiment": "e", "objectives": {"f": {"goal": "maximize"}}, "front": [], "reference_point": {"f": 0.0},
            "inferred_reference": [], "hypervolume": 0.5, "feasible": 4, "completed": 4, "excluded": {}}
    with console.capture() as resumed:
        run_report(s, view, "sqlite:///x.db", since_created=3 * 3600.0)
    assert "in 165s this run; 3.0 h since it was created" in resumed.get()
    with console.capture() as first:
        run_report(s, view, "sqlite:///x.db", since_created=170.0)
    assert "in 165s (completed 4)" in first.get() and "since it was created" not in first.get()
