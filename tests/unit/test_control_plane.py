"""The control plane seen from the loop: a scheduler that cannot be reached is a
wait (trials stay RUNNING, candidates queued, the experiment STOPPED only after
`unreachable_timeout`), a job is lost only after `lost_after` seconds of UNKNOWN in
a row, the poll settings of `runner.cfg`, and the service's pooled status queries.

Trials are real local processes (tests/helpers/loop.py's sleepy script). The
runner under the loop is the real local runner behind `Outage`, which answers as
a cluster's control plane does while it is down (raising SchedulerUnreachable) or
while it has forgotten a job (UNKNOWN): a real Slurm cluster with its daemons
stopped is tests/e2e/test_slurm_control_plane.py."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from nasctl.errors import SchedulerUnreachable, SpecError
from nasctl.orchestration.generator import CandidateGenerator
from nasctl.orchestration.loop import Orchestrator
from nasctl.orchestration.progress import Messages
from nasctl.orchestration.reach import SCHEDULER_EVENT, STATUS, Reachability
from nasctl.orchestration.running import FAST_POLL_SECONDS, sleep_seconds
from nasctl.orchestration.views import status_view
from nasctl.runners import JobRequest, JobState, JobStatus, Runner, SubmittedJob, get_runner, runner_settings
from nasctl.runners.polling import ControlSettings
from nasctl.runners.pool import StatusPool
from nasctl.store import Store
from nasctl.types import ExperimentStatus, TrialStatus
from tests.conftest import run_cli
from tests.helpers.loop import ListOptimizer, experiment, in_thread
from tests.helpers.waiting import wait_for


class Outage(Runner):
    """The real local runner, except while `down` (every query and submission raises
    SchedulerUnreachable) or for the handles in `forgotten` (answered UNKNOWN)."""

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        self.inner = get_runner("local_cwd", cfg or {})
        self.scheduler = "testcluster"
        self.poll_interval = 0.1
        self.down = threading.Event()
        self.forgotten: set[str] = set()
        self.cancelled: list[str] = []
        self.store: Store | None = None  # when set: the device leases held at each cancel are kept
        self.leases_at_cancel: dict[str, list[tuple[int, str]]] = {}
        self.submits = self.refused = 0
        self.calls_while_down = 0  # find and submit: each scheduler call a submission makes while it is down
        self.error = "the test cluster's controller does not answer"

    def _check(self) -> None:
        if self.down.is_set():
            raise SchedulerUnreachable(self.error)

    def dryrun(self, request: JobRequest) -> str:
        return self.inner.dryrun(request)

    def submit(self, request: JobRequest) -> SubmittedJob:
        if self.down.is_set():
            self.refused += 1
            self.calls_while_down += 1
        self._check()
        self.submits += 1
        return self.inner.submit(request)

    def status(self, jobs: Sequence[SubmittedJob]) -> Mapping[str, JobStatus]:
        self._check()
        out = dict(self.inner.status(jobs))
        for h in self.forgotten & set(out):
            out[h] = JobStatus(JobState.UNKNOWN, f"the test cluster does not know {h}")
        return out

    def cancel(self, job: SubmittedJob) -> None:
        self.cancelled.append(job.handle)
        if self.store is not None:
            self.leases_at_cancel[job.handle] = [(lease.trial_index, lease.device) for lease in self.store.device_leases()]
        self.inner.cancel(job)

    def log_tail(self, job: SubmittedJob, lines: int = 40) -> str:
        return self.inner.log_tail(job, lines)

    def device_inventory(self) -> Any:
        return self.inner.device_inventory()

    def find(self, request: JobRequest) -> SubmittedJob | None:
        if self.down.is_set():
            self.calls_while_down += 1
        self._check()
        return self.inner.find(request)


def statuses(store: Store, exp_id: int) -> list[str]:
    return [t.status.value for t in store.list_trials(exp_id)]


def test_an_unreachable_scheduler_is_a_wait_not_a_failure(tmp_path: Path) -> None:
    store, exp, spec, gen = experiment(tmp_path, "outage", [1.0, 1.0, 0.5, 0.5], parallelism=2)
    runner = Outage()
    # the outage below lasts 3-10 s: shorter than the timeout, so the experiment waits it out
    orch = Orchestrator(store, exp, spec, runner, gen, metrics_interval=0.1,
                        settings=ControlSettings(poll_interval=0.1, unreachable_timeout=30))
    thread, out = in_thread(orch)
    wait_for("two running trials", lambda: statuses(store, exp.id).count("RUNNING") == 2)
    runner.down.set()
    time.sleep(3.0)  # both trials' processes end during the outage; nobody can tell the loop
    during = store.list_trials(exp.id)
    view = status_view(store, "outage")
    human = run_cli("status", "outage", "--db", f"sqlite:///{tmp_path}/outage.db", env={"COLUMNS": "200"}).stdout
    api, metrics = dashboard_and_metrics(store, tmp_path)
    runner.down.clear()
    thread.join(60)
    assert not thread.is_alive()
    # during the outage: the running trials stayed RUNNING, the next candidates waited (not FAILED)
    assert [t.status for t in during][:2] == [TrialStatus.RUNNING, TrialStatus.RUNNING]
    assert all(t.status in (TrialStatus.RUNNING, TrialStatus.CANDIDATE) for t in during)
    assert view["scheduler_unreachable"]["scheduler"] == "testcluster"
    assert view["scheduler_unreachable"]["since"].endswith("Z")
    assert "does not answer" in view["scheduler_unreachable"]["error"]
    assert "testcluster unreachable since" in human and "trials keep running, candidates wait" in human
    assert api["scheduler_unreachable"] == view["scheduler_unreachable"]
    since = datetime.fromisoformat(view["scheduler_unreachable"]["since"].rstrip("Z")).replace(tzinfo=timezone.utc)
    assert (f'nasctl_scheduler_unreachable_since_seconds{{experiment="outage",scheduler="testcluster"}} '
            f'{since.timestamp():.0f}') in metrics
    # queued and GPU time per active experiment (local jobs never wait; these trials hold no GPU)
    assert 'nasctl_trials_queued{experiment="outage"} 0' in metrics
    assert 'nasctl_gpu_hours{experiment="outage",part="total"} 0' in metrics
    assert api["queued"] == 0 and api["running"] == 2 and api["usage"]["gpu_hours"] == 0, api
    # afterwards: the whole budget, nothing failed, each trial submitted once
    summary = out["summary"]
    assert summary.status == ExperimentStatus.COMPLETED, summary.reason
    assert statuses(store, exp.id) == ["COMPLETED"] * 4 and runner.submits == 4
    kinds = [e.message for e in store.events(exp.id, kinds=[SCHEDULER_EVENT])]
    assert len(kinds) == 2 and "unreachable" in kinds[0] and "answers again" in kinds[1]
    assert status_view(store, "outage")["scheduler_unreachable"] is None


def dashboard_and_metrics(store: Store, tmp_path: Path) -> tuple[dict[str, Any], str]:
    """The dashboard API's experiment summary and the service's /metrics text, from the store."""
    from fastapi.testclient import TestClient

    from nasctl.server.routes import metrics_text
    from nasctl.server.supervisor import Supervisor
    from nasctl.web import create_app

    with TestClient(create_app(store)) as client:
        api = client.get("/api/experiments/outage").json()
    sup = Supervisor(store.url, str(tmp_path / "svc"))
    try:
        return api, metrics_text(sup)
    finally:
        sup.store.close()


def test_submissions_wait_for_the_scheduler_with_a_pause_between_tries(tmp_path: Path) -> None:
    store, exp, spec, gen = experiment(tmp_path, "nosubmit", [0.2, 0.2], parallelism=2)
    runner = Outage()
    runner.down.set()  # down from the start: every submission fails
    orch = Orchestrator(store, exp, spec, runner, gen, metrics_interval=0.1,
                        settings=ControlSettings(poll_interval=0.1, unreachable_timeout=600))
    thread, out = in_thread(orch)
    wait_for("two recorded candidates", lambda: len(store.list_trials(exp.id)) == 2)
    time.sleep(7.0)  # a first try, then one more after the first pause (5 s)
    tries = runner.calls_while_down  # every call a submission makes (find first, then submit)
    assert statuses(store, exp.id) == ["CANDIDATE", "CANDIDATE"]
    runner.down.clear()
    thread.join(60)
    assert 1 <= tries <= 3, tries  # tried again after a pause, not at every 0.1 s tick (70 ticks)
    assert out["summary"].status == ExperimentStatus.COMPLETED
    assert statuses(store, exp.id) == ["COMPLETED", "COMPLETED"] and runner.submits == 2


def test_an_outage_longer_than_unreachable_timeout_stops_the_experiment_resumably(tmp_path: Path) -> None:
    store, exp, spec, gen = experiment(tmp_path, "longout", [0.3, 0.3, 0.3], parallelism=1)
    runner = Outage()
    # what Slurm's tools print when slurmdbd is down: many lines, one reason
    runner.error = ("sacct: error: slurm_persist_conn_open_without_init: failed to open persistent connection\n"
                    "sacct: error: Sending PersistInit msg: Connection refused\nsacct: error: Problem talking to "
                    "the database: Connection refused")
    orch = Orchestrator(store, exp, spec, runner, gen, metrics_interval=0.1,
                        settings=ControlSettings(poll_interval=0.1, unreachable_timeout=1.5))
    thread, out = in_thread(orch)
    wait_for("a running trial", lambda: "RUNNING" in statuses(store, exp.id))
    runner.down.set()
    thread.join(60)
    summary = out["summary"]
    assert summary.status == ExperimentStatus.STOPPED
    assert "\n" not in (summary.reason or "") and "persistent connection ..." in (summary.reason or ""), summary.reason
    last = store.events(exp.id, kinds=[SCHEDULER_EVENT])[-1]
    assert (last.data or {}).get("error") == runner.error  # the whole output is in the event log
    assert "testcluster scheduler has been unreachable since" in (summary.reason or "")
    assert "runner.cfg.unreachable_timeout" in (summary.reason or "") and "nasctl resume longout" in summary.reason
    assert store.get_experiment("longout").status == ExperimentStatus.STOPPED
    assert "FAILED" not in statuses(store, exp.id)  # the running trial was left running, not failed
    # the cluster is back: a resume finishes the budget with what was there
    runner.down.clear()
    exp = store.get_experiment("longout")
    proposed = len(store.list_trials(exp.id))
    gen2 = CandidateGenerator(lambda: _skipping(proposed))
    again = Orchestrator(store, exp, spec, runner, gen2, metrics_interval=0.1,
                         settings=ControlSettings(poll_interval=0.1))
    assert again.run().status == ExperimentStatus.COMPLETED
    assert statuses(store, exp.id) == ["COMPLETED"] * 3


def test_an_outage_stops_the_experiment_exactly_when_it_reaches_unreachable_timeout(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/reach.db", create=True)
    exp = store.create_experiment("reach", {"name": "reach"}, str(tmp_path / "reach"))
    reach = Reachability(store, exp, "testcluster", ControlSettings(poll_interval=1.0, unreachable_timeout=100), Messages())
    reach.failed(STATUS, SchedulerUnreachable("no answer"), now=1000.0)
    assert reach.expired(1000.0 + 99.0) is None  # shorter than the timeout: still a wait
    assert "longer than runner.cfg.unreachable_timeout (100s" in (reach.expired(1000.0 + 100.5) or "")
    reach.answered(STATUS, now=1101.0)
    assert reach.expired(5000.0) is None  # it answered: the outage is over
    store.close()


def _skipping(n: int) -> ListOptimizer:
    """A list optimizer that already proposed its first `n` points (a resumed one)."""
    opt = ListOptimizer([{"x": 0.1 * (k + 1), "s": 0.3} for k in range(3)], [])
    opt.n = n
    return opt


def test_a_job_is_lost_only_after_lost_after_seconds_of_unknown_in_a_row(tmp_path: Path) -> None:
    # trial 0: UNKNOWN for 1 s (less than lost_after), then known again: it completes, not lost.
    # trial 1: UNKNOWN from its start on: lost after 2.5 s, cancelled, retried in a second attempt.
    # each trial holds one of two devices: the lost job is cancelled before its device is freed
    store, exp, spec, gen = experiment(tmp_path, "lost", [2.0, 30.0], parallelism=2,
                                       extra=", max_retries: 1, resources: {gpu: 1}")
    runner = Outage({"devices": [0, 1]})
    runner.store = store
    orch = Orchestrator(store, exp, spec, runner, gen, metrics_interval=0.1,
                        settings=ControlSettings(poll_interval=0.1, lost_after=2.5))
    thread, out = in_thread(orch)
    trials = wait_for("two running trials", lambda: [t for t in store.list_trials(exp.id) if t.job_handle]
                      if statuses(store, exp.id).count("RUNNING") == 2 else None)
    first, second = (t.job_handle or "" for t in sorted(trials, key=lambda t: t.index))
    second_device = next(t.devices for t in trials if t.index == 1)[0]
    runner.forgotten |= {first, second}
    t0 = time.monotonic()
    time.sleep(1.0)
    runner.forgotten.discard(first)  # known again before lost_after: the count starts over
    retried = wait_for("trial 1's second attempt", lambda: next(
        (t for t in store.list_trials(exp.id) if t.index == 1 and len(t.attempts) == 2), None), timeout=30)
    lost_at = time.monotonic() - t0
    runner.forgotten.discard(second)
    assert lost_at >= 2.5  # not before lost_after
    first_attempt = retried.attempts[0]
    assert first_attempt["failure_class"] == "infrastructure" and "was lost" in first_attempt["reason"]
    assert second in runner.cancelled  # the lost job is cancelled before its attempt ends
    assert (1, second_device) in runner.leases_at_cancel[second]  # its device was still leased to it then
    assert first not in runner.cancelled
    wait_for("trial 0 completed", lambda: store.list_trials(exp.id)[0].status == TrialStatus.COMPLETED)
    orch.request_stop("test done", cancel=True)  # trial 1's second attempt would sleep its 30 s
    thread.join(60)
    t0_rec = store.list_trials(exp.id)[0]
    assert t0_rec.status == TrialStatus.COMPLETED and len(t0_rec.attempts) == 1


# --- settings ------------------------------------------------------------------------------------

def test_runner_cfg_control_settings_and_their_defaults() -> None:
    local = get_runner("local_cwd", {"poll_interval": 0.5})
    assert runner_settings(local, {"poll_interval": 0.5}) == ControlSettings(0.5, 600.0, 1800.0)
    assert runner_settings(local, {}).poll_interval == 0.25  # local processes: fast
    slurm = get_runner("slurm", {"lost_after": 120, "unreachable_timeout": 60, "partition": "debug"})
    settings = runner_settings(slurm, {"lost_after": 120, "unreachable_timeout": 60})
    assert settings == ControlSettings(5.0, 120.0, 60.0)  # a cluster: gentle
    assert "lost_after" not in slurm.cfg and slurm.cfg.get("partition") == "debug"  # not passed to TorchX
    for bad in ({"poll_interval": 0}, {"poll_interval": "fast"}, {"lost_after": -1}, {"unreachable_timeout": True},
                {"poll_interval": float("nan")}):
        with pytest.raises(SpecError, match=f"runner.cfg.{next(iter(bad))} must be a number of seconds"):
            get_runner("local_cwd", bad)


def test_a_bad_control_setting_is_a_one_line_error_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("")
    spec = tmp_path / "s.yaml"
    spec.write_text("name: badpoll\nsearch_space: {x: {type: float, low: 0, high: 1}}\n"
                    "objectives: {a: {goal: maximize}}\nbudget: {max_trials: 1}\ntrial: {script: t.py}\n"
                    "runner: {scheduler: local_cwd, cfg: {poll_interval: -2}}\n")
    p = run_cli("run", str(spec), "--db", f"sqlite:///{tmp_path}/b.db", cwd=tmp_path)
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "runner.cfg.poll_interval must be a number of seconds" in lines[0], p.stderr
    assert "e.g. poll_interval: 5" in lines[0]


def test_only_cheap_schedulers_are_polled_faster_near_a_trials_expected_end() -> None:
    durations, started, now = [10.0], [0.0], 9.0  # past 80% of the median trial
    assert sleep_seconds(0.25, False, durations, started, now) == FAST_POLL_SECONDS  # local: yes
    assert sleep_seconds(5.0, False, durations, started, now) == 5.0  # a cluster: no
    assert sleep_seconds(0.25, False, durations, started, 1.0) == 0.25  # not near its end: no


# --- the service's pooled status queries ---------------------------------------------------------

class Counting(Runner):
    """Answers RUNNING for every job, counting queries; `down` makes it unreachable."""

    scheduler = "counting"
    shared_status = True

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.down = False

    def dryrun(self, request: JobRequest) -> str:
        return ""

    def submit(self, request: JobRequest) -> SubmittedJob:
        raise NotImplementedError

    def status(self, jobs: Sequence[SubmittedJob]) -> Mapping[str, JobStatus]:
        self.calls.append(sorted(j.handle for j in jobs))
        if self.down:
            raise SchedulerUnreachable("down")
        return {j.handle: JobStatus(JobState.RUNNING) for j in jobs}

    def cancel(self, job: SubmittedJob) -> None: ...

    def log_tail(self, job: SubmittedJob, lines: int = 40) -> str:
        return ""

    def find(self, request: JobRequest) -> SubmittedJob | None:
        return None


def test_the_service_asks_the_scheduler_once_per_poll_for_every_experiment() -> None:
    clock = [0.0]
    pool = StatusPool(clock=lambda: clock[0])
    inner = Counting()
    loops = [pool.share(inner, {"partition": "debug"}, 5.0) for _ in range(3)]
    jobs = [[SubmittedJob(f"c://{k}-{i}") for i in range(2)] for k in range(3)]
    for runner, mine in zip(loops, jobs):  # each loop asks for its own jobs once
        assert set(runner.status(mine)) == {j.handle for j in mine}
    # first ask: one query; the 2nd and 3rd loops bring new jobs, so each forces one: 3 queries ...
    assert len(inner.calls) == 3
    for _ in range(10):  # ... then, a poll interval later, one query answers all three loops
        clock[0] += 5.0
        for runner, mine in zip(loops, jobs):
            runner.status(mine)
    assert len(inner.calls) == 13 and all(len(c) == 6 for c in inner.calls[3:])
    # an unreachable scheduler is asked once per interval too, and every loop hears it
    clock[0] += 5.0
    inner.down = True
    for runner, mine in zip(loops, jobs):
        with pytest.raises(SchedulerUnreachable):
            runner.status(mine)
    assert len(inner.calls) == 14
    # another configuration (or a cheap local runner) is not pooled with these
    other = pool.share(inner, {"partition": "gpu"}, 5.0)
    inner.down = False
    other.status([SubmittedJob("c://x")])
    assert inner.calls[-1] == ["c://x"]
    local = get_runner("local_cwd")
    assert pool.share(local, {}, 0.25) is local


# --- Kubernetes: an API server that does not answer -------------------------------------------------

def test_kubernetes_api_server_gone_is_unreachable_a_refusal_is_not(tmp_path: Path) -> None:
    import sys

    from kubernetes.client.rest import ApiException

    from nasctl.errors import RunnerError
    from nasctl.runners.kubernetes import KubernetesRunner, unreachable
    from tests.k8s_standin import StandInCluster
    from tests.helpers.runners import local_request

    with StandInCluster() as cluster:
        runner = KubernetesRunner({"api_server": cluster.url, "queue": "default", "image": "nasctl:test",
                                   "log_volume_claim": "logs", "log_mount_path": str(tmp_path),
                                   "python": sys.executable})
        job = runner.submit(local_request(tmp_path, "k8s-up", "pass"))
        assert job.handle in runner.status([job])  # answers while the server is up
    # the server is gone (connection refused): queries and submissions are a wait
    with pytest.raises(SchedulerUnreachable, match="API server does not answer"):
        runner.status([job])
    with pytest.raises(SchedulerUnreachable, match="was not created"):
        runner.submit(local_request(tmp_path, "k8s-down", "pass"))
    runner.close()
    # HTTP answers: a gateway or an unavailable server is a wait; a refusal is an error
    assert unreachable(ApiException(status=503)) and unreachable(ApiException(status=504))
    assert not unreachable(ApiException(status=403)) and not unreachable(ApiException(status=409))
    assert not unreachable(ValueError("bad manifest"))
    assert issubclass(SchedulerUnreachable, RunnerError)


# --- what the user sees ------------------------------------------------------------------------------

def test_live_display_says_since_when_the_scheduler_is_unreachable() -> None:
    from rich.console import Console

    from nasctl.console import ProgressDisplay
    from nasctl.orchestration.progress import Progress

    since = time.mktime((2026, 11, 26, 21, 40, 2, 0, 0, -1))
    p = Progress("e", 8, 2, {"RUNNING": 2}, 0.0, [], False, 0.0, 3.0, None, scheduler="slurm",
                 unreachable_since=since)
    console = Console(record=True, width=140)
    console.print(ProgressDisplay(enabled=False)._render(p))
    assert "slurm unreachable since 21:40:02: trials keep running, candidates wait" in console.export_text()
    console = Console(record=True, width=140)
    console.print(ProgressDisplay(enabled=False)._render(Progress("e", 8, 2, {}, 0.0, [], False, 0.0, 3.0, None)))
    assert "unreachable" not in console.export_text()
