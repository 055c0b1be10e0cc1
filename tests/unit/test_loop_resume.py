"""The loop's resume and control paths with a real local runner and a real SQLite
store: re-attaching a job submitted just before a crash, the lease taken over by
another driver, failures counted across a resume, a cancel that comes too late."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nasctl.orchestration import loop
from nasctl.orchestration.generator import CandidateGenerator
from nasctl.orchestration.jobs import build_request, job_name, trial_dir
from nasctl.orchestration.loop import Orchestrator
from nasctl.orchestration.outcomes import CANCEL_IGNORED_EVENT
from nasctl.orchestration.progress import RunSummary
from nasctl.optimizer.ax_optimizer import Candidate
from nasctl.runners.base import JobRequest, SubmittedJob
from nasctl.runners.local import LocalRunner
from nasctl.spec import ExperimentSpec, parse_spec, spec_to_dict
from nasctl.store import Store, requests
from nasctl.types import ExperimentRecord, ExperimentStatus, TrialStatus
from tests.helpers.loop import SLEEPY_SCRIPT, GatedOptimizer, ListOptimizer
from tests.helpers.waiting import wait_for


class CountingRunner(LocalRunner):
    """The real local runner, keeping a list of the jobs it was asked to submit."""

    def __init__(self) -> None:
        super().__init__()
        self.submitted: list[str] = []

    def submit(self, request: JobRequest) -> SubmittedJob:
        self.submitted.append(request.name)
        return super().submit(request)


class FromIndex(ListOptimizer):
    """`ListOptimizer` whose proposals start at trial index `first` (after stored trials)."""

    def __init__(self, points: list[dict[str, float]], first: int) -> None:
        super().__init__([{}] * first + points, [])
        self.n = first


def _setup(tmp_path: Path, max_trials: int, parallelism: int = 1, max_failures: int = 5) -> tuple[
        Store, ExperimentRecord, ExperimentSpec]:
    script = tmp_path / "t.py"
    script.write_text(SLEEPY_SCRIPT)
    spec = parse_spec(
        f"""
name: r
search_space: {{x: {{type: float, low: 0, high: 1}}, s: {{type: float, low: 0, high: 100}}}}
objectives: {{a: {{goal: maximize}}, b: {{goal: maximize}}}}
budget: {{max_trials: {max_trials}, parallelism: {parallelism}, max_failures: {max_failures}}}
trial: {{script: {script}}}
"""
    )
    store = Store(f"sqlite:///{tmp_path}/r.db", create=True)
    exp = store.create_experiment("r", spec_to_dict(spec), str(tmp_path / "work"))
    return store, exp, spec


@pytest.fixture
def runners() -> Iterator[list[LocalRunner]]:
    """Runners a test made, closed at the end (their warm servers stopped)."""
    made: list[LocalRunner] = []
    yield made
    for r in made:
        r.close()


def test_resume_reattaches_a_job_submitted_just_before_a_crash(tmp_path: Path, runners: list[LocalRunner]) -> None:
    """A CANDIDATE whose job was submitted (the orchestrator died before recording
    the handle) is found by its deterministic name and re-attached: not submitted
    again, and stored RUNNING with its job handle, then finished normally."""
    store, exp, spec = _setup(tmp_path, max_trials=1)
    params = {"x": 0.3, "s": 0.0}
    rec = store.add_trial(exp.id, 0, params, "list", job_name(exp.name, 0), trial_dir(exp.work_dir, 0))
    request = build_request(spec, exp.name, exp.work_dir, 0, params)
    os.makedirs(request.trial_dir, exist_ok=True)
    crashed = LocalRunner()  # the orchestrator that submitted, then died
    runners.append(crashed)
    crashed.submit(request)
    # the launcher claims the trial's directory a moment after submit returns; a restart comes later
    wait_for("the launcher's claim", lambda: LocalRunner().find(request) is not None)
    assert store.get_trial(exp.id, 0).job_handle is None  # the crash: the handle was never stored

    runner = CountingRunner()
    runners.append(runner)
    events_before = store.events(exp.id)[-1].id
    orch = Orchestrator(store, exp, spec, runner, CandidateGenerator(lambda: FromIndex([], 1)),
                        poll_interval=0.05, metrics_interval=0.1)
    summary = orch.run()

    assert runner.submitted == []  # found, not launched a second time
    assert summary.reattached == 1 and summary.status == ExperimentStatus.COMPLETED, summary
    t = store.get_trial(exp.id, 0)
    assert t.status == TrialStatus.COMPLETED and t.values["a"] == pytest.approx(0.3)
    # the re-attach was stored: RUNNING with the found job's handle, before the trial finished
    assert t.job_handle and t.job_handle.startswith("local_cwd://") and t.started_at is not None
    kinds = [e.kind for e in store.events(exp.id, after_id=events_before) if e.trial_index == rec.index]
    assert kinds[:2] == ["submitted", "finished"], kinds
    resumed = [e.message for e in store.events(exp.id, kinds=["resumed"])]
    assert resumed == ["resumed with 1 trials: 1 re-attached, 0 recorded candidates to submit"]


def _run_in_thread(orch: Orchestrator) -> tuple[threading.Thread, dict[str, RunSummary]]:
    result: dict[str, RunSummary] = {}
    t = threading.Thread(target=lambda: result.setdefault("summary", orch.run()), daemon=True)
    t.start()
    return t, result


def test_an_orchestrator_that_lost_its_lease_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    runners: list[LocalRunner]) -> None:
    """Another driver takes the lease (this one looked dead to it): the next heartbeat
    finds it gone and the loop stops, leaving its running trial to the new owner."""
    monkeypatch.setattr(loop, "HEARTBEAT_SECONDS", 0.2)
    store, exp, spec = _setup(tmp_path, max_trials=2)
    runner = LocalRunner()
    runners.append(runner)
    orch = Orchestrator(store, exp, spec, runner,
                        CandidateGenerator(lambda: ListOptimizer([{"x": 0.1, "s": 120.0}, {"x": 0.2, "s": 0.0}], [])),
                        poll_interval=0.05, metrics_interval=0.1)
    thread, result = _run_in_thread(orch)
    try:
        wait_for("trial 0 to run", lambda: any(t.status == TrialStatus.RUNNING for t in store.list_trials(exp.id)))
        store.acquire_lease(exp.id, "elsewhere:1:0", stale_after=30, is_alive=lambda owner: False)
        thread.join(30)
        assert not thread.is_alive(), "the orchestrator kept driving an experiment whose lease it lost"
    finally:
        for t in store.list_trials(exp.id, [TrialStatus.RUNNING]):
            runner.cancel(SubmittedJob(t.job_handle or "", t.runner_metadata))
    summary = result["summary"]
    assert summary.status == ExperimentStatus.STOPPED
    assert summary.reason == "another orchestrator took over this experiment's lease"
    assert summary.left_running == 1
    assert store.get_experiment("r").lease_owner == "elsewhere:1:0"  # not released on the new owner's behalf
    assert len(store.list_trials(exp.id)) == 1  # nothing was launched after the lease was lost


def test_failures_before_a_resume_count_toward_max_failures(tmp_path: Path, runners: list[LocalRunner]) -> None:
    store, exp, spec = _setup(tmp_path, max_trials=4, max_failures=1)
    for i in (0, 1):
        t = store.add_trial(exp.id, i, {"x": 0.1, "s": 0.0}, "list", job_name(exp.name, i), trial_dir(exp.work_dir, i))
        store.finish_trial(t.id, TrialStatus.FAILED, failure_reason="exit 1")
    runner = CountingRunner()
    runners.append(runner)
    orch = Orchestrator(store, exp, spec, runner,
                        CandidateGenerator(lambda: FromIndex([{"x": 0.5, "s": 0.0}, {"x": 0.6, "s": 0.0}], 2)),
                        poll_interval=0.05, metrics_interval=0.1)
    summary = orch.run()
    assert summary.status == ExperimentStatus.FAILED, summary
    assert summary.reason is not None and "2 trials failed, more than budget.max_failures=1" in summary.reason
    assert runner.submitted == [] and [t.index for t in store.list_trials(exp.id)] == [0, 1]


def test_a_cancel_after_the_trial_finished_is_recorded_as_ignored(tmp_path: Path,
                                                                   runners: list[LocalRunner]) -> None:
    store, exp, spec = _setup(tmp_path, max_trials=2)
    gate, log = threading.Event(), []

    class Sleepless(GatedOptimizer):
        def generate(self, n: int) -> list[Candidate]:
            return [Candidate(c.index, {**c.parameters, "s": 0.0}, c.method) for c in super().generate(n)]

    runner = LocalRunner()
    runners.append(runner)
    orch = Orchestrator(store, exp, spec, runner, CandidateGenerator(lambda: Sleepless(gate, log)),
                        poll_interval=0.05, metrics_interval=0.1)
    thread, result = _run_in_thread(orch)
    try:
        wait_for("trial 0 to complete",
                 lambda: [t.status for t in store.list_trials(exp.id)] == [TrialStatus.COMPLETED])
        requests.request_cancel(store, exp.id, 0, "too late")
        wait_for("the loop to read the request", lambda: bool(store.events(exp.id, kinds=[CANCEL_IGNORED_EVENT])))
    finally:
        gate.set()
        thread.join(60)
    assert result["summary"].status == ExperimentStatus.COMPLETED
    (ev,) = store.events(exp.id, kinds=[CANCEL_IGNORED_EVENT])
    assert ev.trial_index == 0 and ev.message == "cancel of trial 0 ignored: it had already ended COMPLETED"
    assert store.get_trial(exp.id, 0).status == TrialStatus.COMPLETED


def test_a_recorded_candidate_is_submitted_once_on_resume(tmp_path: Path, runners: list[LocalRunner]) -> None:
    """A CANDIDATE recorded before a crash, never submitted, is submitted by the
    resumed loop, once; the summary's counts add up to the trials stored."""
    store, exp, spec = _setup(tmp_path, max_trials=1)
    store.add_trial(exp.id, 0, {"x": 0.4, "s": 0.0}, "list", job_name(exp.name, 0), trial_dir(exp.work_dir, 0))
    os.makedirs(trial_dir(exp.work_dir, 0))  # the crash came after its folder was made, before the submit
    runner = CountingRunner()
    runners.append(runner)
    orch = Orchestrator(store, exp, spec, runner, CandidateGenerator(lambda: FromIndex([], 1)),
                        poll_interval=0.05, metrics_interval=0.1)
    summary = orch.run()
    assert runner.submitted == ["r-0"]
    assert summary.status == ExperimentStatus.COMPLETED and summary.reattached == 0
    assert summary.counts == {**{s.value: 0 for s in TrialStatus}, "COMPLETED": 1}
    resumed = [e.message for e in store.events(exp.id, kinds=["resumed"])]
    assert resumed == ["resumed with 1 trials: 0 re-attached, 1 recorded candidates to submit"]


def test_a_late_cancel_leaves_the_waiting_candidates_alone(tmp_path: Path, runners: list[LocalRunner]) -> None:
    """Trial 0 has ended, trial 1 runs, trial 2 waits for a slot: a cancel of trial 0
    is ignored (and said so) and does not touch trial 2."""
    store, exp, spec = _setup(tmp_path, max_trials=3, parallelism=1)
    runner = LocalRunner()
    runners.append(runner)
    points = [{"x": 0.1, "s": 0.0}, {"x": 0.2, "s": 120.0}, {"x": 0.3, "s": 0.0}]
    orch = Orchestrator(store, exp, spec, runner, CandidateGenerator(lambda: ListOptimizer(points, [])),
                        poll_interval=0.05, metrics_interval=0.1, lookahead=1)
    thread, result = _run_in_thread(orch)
    try:
        wait_for("trial 1 to run and trial 2 to wait", lambda: [t.status for t in store.list_trials(exp.id)] == [
            TrialStatus.COMPLETED, TrialStatus.RUNNING, TrialStatus.CANDIDATE])
        requests.request_cancel(store, exp.id, 0, "too late")
        wait_for("the loop to read the request", lambda: bool(store.events(exp.id, kinds=[CANCEL_IGNORED_EVENT])))
        assert store.get_trial(exp.id, 2).status == TrialStatus.CANDIDATE
        # a cancel of the waiting candidate itself takes it out, and is not reported as ignored
        requests.request_cancel(store, exp.id, 2, "not needed")
        wait_for("trial 2 to be abandoned", lambda: store.get_trial(exp.id, 2).status == TrialStatus.ABANDONED)
    finally:
        requests.request_stop(store, exp.id, "test over", cancel=True)
        thread.join(60)
    assert result["summary"].status == ExperimentStatus.STOPPED
    assert [t.status for t in store.list_trials(exp.id)] == [TrialStatus.COMPLETED, TrialStatus.ABANDONED,
                                                              TrialStatus.ABANDONED]
    assert [e.trial_index for e in store.events(exp.id, kinds=[CANCEL_IGNORED_EVENT])] == [0]
    assert store.get_trial(exp.id, 2).failure_reason == "cancelled on request"
