"""Why an attempt ended: each runner's failure classes, the exit-record rules they
share (nasctl/runners/outcome.py), and the launcher's claim across a scheduler's
restart of the same job. Launchers, local trials and the Kubernetes stand-in run
as real processes; the Slurm cluster is not needed here (tests/e2e/test_slurm_attempts.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nasctl.runners import JobRequest, JobState, JobStatus, SubmittedJob, get_runner
from nasctl.runners.kubernetes import KubernetesRunner, pod_status
from nasctl.runners.launcher import CANCEL_MARKER, CLAIM, DUPLICATE_EXIT, EXIT, LAUNCH, read_json
from nasctl.runners.local import LocalRunner
from nasctl.runners.outcome import record_status, settle, signal_class
from nasctl.types import FailureClass
from tests.helpers.runners import local_request
from tests.helpers.waiting import wait_for
from tests.k8s_standin import StandInCluster

INFRA, USER, TIMEOUT, CANCELLED = (FailureClass.INFRASTRUCTURE, FailureClass.USER, FailureClass.TIMEOUT,
                                   FailureClass.CANCELLED)


# --- the shared rules ---------------------------------------------------------------------------

def test_an_exit_record_of_zero_wins_over_any_final_scheduler_state() -> None:
    done = {"returncode": 0, "ended": 1.0}
    for ended in (JobStatus(JobState.FAILED, "Slurm job 4 TIMEOUT: ...", None, TIMEOUT, "node1"),
                  JobStatus(JobState.FAILED, "Slurm job 4 NODE_FAIL: ...", None, INFRA),
                  JobStatus(JobState.CANCELLED, "Slurm job 4: CANCELLED by 0", None, CANCELLED)):
        st = settle(ended, done)
        assert (st.state, st.failure_class, st.exit_code) == (JobState.SUCCEEDED, None, 0)
        assert ended.message in (st.message or "") and st.node == ended.node
    # no record, or a record of a failure: the scheduler's reading stands
    timeout = JobStatus(JobState.FAILED, "TIMEOUT", None, TIMEOUT)
    assert settle(timeout, None) == timeout
    assert settle(timeout, {"returncode": 1}) == timeout
    assert settle(timeout, {"returncode": -15, "signal": "SIGTERM"}) == timeout
    # a job still pending or running (a requeued job's stale record) is left alone
    pending = JobStatus(JobState.PENDING, "BeginTime")
    assert settle(pending, done) == pending


def test_a_plain_scheduler_failure_takes_the_records_reason() -> None:
    failed = JobStatus(JobState.FAILED, "Slurm job 4 FAILED: the job exited with a non-zero code", 137, USER, "n1")
    killed = settle(failed, {"returncode": -9, "signal": "SIGKILL"})
    assert (killed.state, killed.failure_class, killed.node) == (JobState.FAILED, INFRA, "n1")
    assert "FAILED" in (killed.message or "") and "killed by SIGKILL" in (killed.message or "")
    assert settle(failed, {"returncode": 3}) == failed  # the trial's own exit: as the scheduler said


@pytest.mark.parametrize(("record", "state", "cls", "words"), [
    ({"returncode": 0}, JobState.SUCCEEDED, None, None),
    ({"returncode": 1}, JobState.FAILED, USER, "exit code 1"),
    ({"returncode": -9, "signal": "SIGKILL"}, JobState.FAILED, INFRA, "killed by SIGKILL (not sent by nasctl)"),
    ({"returncode": 1, "signal": "SIGTERM"}, JobState.FAILED, INFRA, "SIGTERM"),
    ({"returncode": -11, "signal": "SIGSEGV"}, JobState.FAILED, USER, "killed by SIGSEGV (crashed)"),
    ({"returncode": -15, "signal": "SIGTERM", "cancelled": True}, JobState.CANCELLED, CANCELLED, "SIGTERM"),
    ({"returncode": None, "error": "the warm server ended"}, JobState.FAILED, INFRA, "warm server"),
])
def test_exit_records(record: dict[str, Any], state: JobState, cls: FailureClass | None, words: str | None) -> None:
    st = record_status(record)
    assert (st.state, st.failure_class) == (state, cls)
    if words:
        assert words in (st.message or "")


def test_signal_classes() -> None:
    assert [signal_class(s) for s in ("SIGKILL", "SIGTERM", "SIGHUP", "SIGINT")] == [INFRA] * 4
    assert [signal_class(s) for s in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE")] == [USER] * 4


# --- the launcher: claim, restart, signals ------------------------------------------------------

def launcher(sdir: Path, code: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("TORCHX_JOB_ID", "SLURM_STEP_ID", "SLURM_JOB_ID")}
    return subprocess.Popen([sys.executable, "-m", "nasctl.runners.launcher", "--state-dir", str(sdir), "--",
                             sys.executable, "-c", code], env={**full, **(env or {})}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run_launcher(sdir: Path, code: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = launcher(sdir, code, env)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


RECORD_RUN = "import os, sys; open({runs!r}, 'a').write(os.environ.get('NASCTL_RESUME_FROM', '-') + '\\n')"
"""A trial that appends the checkpoint it was told to resume from ('-': none) to a file."""


def test_a_restart_of_the_same_job_runs_again_and_resumes_from_the_checkpoint(tmp_path: Path) -> None:
    sdir, runs, ckpt = tmp_path / "job", tmp_path / "runs.txt", tmp_path / "ckpt"
    env = {"TORCHX_JOB_ID": "slurm://torchx/77", "NASCTL_CHECKPOINT_DIR": str(ckpt)}
    first = RECORD_RUN.format(runs=str(runs)) + f"; os.makedirs({str(ckpt)!r}); open({str(ckpt / 'last.ckpt')!r}, 'w')"
    rc, _ = run_launcher(sdir, first + "; sys.exit(3)", env)
    assert rc == 3 and json.loads((sdir / CLAIM).read_text())["job"] == "slurm://torchx/77"
    first_start = read_json(str(sdir / LAUNCH))["started"]  # type: ignore[index]

    rc, err = run_launcher(sdir, RECORD_RUN.format(runs=str(runs)), env)  # Slurm runs the requeued job again
    assert rc == 0, err
    assert runs.read_text().splitlines() == ["-", str(ckpt / "last.ckpt")]
    assert f"restart 1 of job slurm://torchx/77: resuming from {ckpt / 'last.ckpt'}" in err
    launch = read_json(str(sdir / LAUNCH))
    assert launch is not None and launch["resumed_from"] == str(ckpt / "last.ckpt")
    (earlier,) = launch["restarts"]
    assert earlier["started"] == first_start and earlier["exit"]["returncode"] == 3
    assert read_json(str(sdir / EXIT))["returncode"] == 0  # type: ignore[index]
    assert json.loads((sdir / CLAIM).read_text())["restarts"] == 1

    # once the trial has exited 0, another restart of the job runs nothing
    rc, err = run_launcher(sdir, RECORD_RUN.format(runs=str(runs)), env)
    assert rc == 0 and "already exited 0; not running it again" in err
    assert len(runs.read_text().splitlines()) == 2


def test_a_restart_without_a_checkpoint_starts_over_and_says_so(tmp_path: Path) -> None:
    sdir, runs = tmp_path / "job", tmp_path / "runs.txt"
    env = {"TORCHX_JOB_ID": "slurm://torchx/78", "NASCTL_CHECKPOINT_DIR": str(tmp_path / "none")}
    assert run_launcher(sdir, RECORD_RUN.format(runs=str(runs)) + "; sys.exit(1)", env)[0] == 1
    rc, err = run_launcher(sdir, RECORD_RUN.format(runs=str(runs)), env)
    assert rc == 0 and f"no checkpoint {tmp_path / 'none' / 'last.ckpt'} yet; the trial starts over" in err
    assert runs.read_text().splitlines() == ["-", "-"]
    assert len(read_json(str(sdir / LAUNCH))["restarts"]) == 1  # type: ignore[index]


@pytest.mark.parametrize("second_env", [{"TORCHX_JOB_ID": "slurm://torchx/80"}, {}])
def test_another_job_or_an_unnamed_launch_is_a_duplicate(tmp_path: Path, second_env: dict[str, str]) -> None:
    sdir, runs = tmp_path / "job", tmp_path / "runs.txt"
    assert run_launcher(sdir, RECORD_RUN.format(runs=str(runs)) + "; sys.exit(1)",
                        {"TORCHX_JOB_ID": "slurm://torchx/79"})[0] == 1
    rc, err = run_launcher(sdir, RECORD_RUN.format(runs=str(runs)), second_env)
    assert rc == DUPLICATE_EXIT and "claimed by slurm://torchx/79); not running it twice" in err
    assert runs.read_text().splitlines() == ["-"]


def test_a_claim_in_the_old_format_refuses_every_launch(tmp_path: Path) -> None:
    sdir = tmp_path / "job"
    sdir.mkdir()
    (sdir / CLAIM).write_text("12345")  # a launcher of an earlier nasctl wrote only its pid
    rc, _ = run_launcher(sdir, "print('ran')", {"TORCHX_JOB_ID": "slurm://torchx/81"})
    assert rc == DUPLICATE_EXIT and not (sdir / LAUNCH).exists()


WAIT_FOR_SIGNALS = """
import signal, sys, time
out = {out!r}
def on(signum, _frame):
    open(out, 'a').write(signal.Signals(signum).name + '\\n')
    if signum == signal.SIGUSR1 and {exit_on_usr1}:
        sys.exit(0)
signal.signal(signal.SIGUSR1, on)
open(out, 'a').write('ready\\n')
time.sleep(60)
sys.exit(4)
"""


def started(out: Path) -> bool:
    return out.exists() and "ready" in out.read_text()


def test_the_launcher_forwards_a_warning_signal_as_a_checkpoint_request(tmp_path: Path) -> None:
    sdir, out, ckpt = tmp_path / "job", tmp_path / "signals.txt", tmp_path / "ckpt"
    proc = launcher(sdir, WAIT_FOR_SIGNALS.format(out=str(out), exit_on_usr1=True), {"NASCTL_CHECKPOINT_DIR": str(ckpt)})
    wait_for("the trial to start", lambda: started(out))
    proc.send_signal(signal.SIGUSR1)  # to the launcher only
    assert proc.wait(30) == 0
    assert out.read_text().split() == ["ready", "SIGUSR1"]
    # a warning, not a stop signal and no cancellation
    assert read_json(str(sdir / EXIT)) == {"returncode": 0, "ended": pytest.approx(time.time(), abs=30),
                                           "warned": ["SIGUSR1"]}
    assert read_json(str(ckpt / "checkpoint.request"))["signal"] == "SIGUSR1"  # type: ignore[index]


IGNORES_SIGNALS = """
import sys, time
open({out!r}, 'a').write('ready\\n')
time.sleep(1.5)
sys.exit(0)
"""


def test_a_trial_that_does_not_handle_warnings_is_not_killed_by_one(tmp_path: Path) -> None:
    """Any script without a handler: the launcher starts it with the warnings ignored.
    Under Slurm, `--signal` reaches every process of the step (here: sent to the trial itself)."""
    sdir, out = tmp_path / "job", tmp_path / "signals.txt"
    proc = launcher(sdir, IGNORES_SIGNALS.format(out=str(out)), {"SLURM_STEP_ID": "0"})
    wait_for("the trial to start", lambda: started(out))
    child = read_json(str(sdir / LAUNCH))["child_pid"]  # type: ignore[index]
    os.kill(child, signal.SIGUSR1)
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(30) == 0
    assert read_json(str(sdir / EXIT))["warned"] == ["SIGUSR1"]  # type: ignore[index]


def test_a_trial_killed_by_the_warning_nasctl_asked_for_is_a_timeout_not_infrastructure() -> None:
    st = record_status({"returncode": -10, "signal": "SIGUSR1", "warned": ["SIGUSR1"]})
    assert st.failure_class == FailureClass.TIMEOUT and "not sent by nasctl" not in (st.message or ""), st
    assert record_status({"returncode": -10, "signal": "SIGUSR1"}).failure_class == FailureClass.INFRASTRUCTURE


def test_under_a_slurm_step_the_launcher_leaves_warnings_to_slurm(tmp_path: Path) -> None:
    """Slurm signals every process of a step itself: forwarding would deliver each warning twice."""
    sdir, out = tmp_path / "job", tmp_path / "signals.txt"
    proc = launcher(sdir, WAIT_FOR_SIGNALS.format(out=str(out), exit_on_usr1=True), {"SLURM_STEP_ID": "0"})
    wait_for("the trial to start", lambda: started(out))
    proc.send_signal(signal.SIGUSR1)
    time.sleep(0.5)  # nothing may arrive: give a forwarded signal time to show
    assert proc.poll() is None and out.read_text().split() == ["ready"]
    child = read_json(str(sdir / LAUNCH))["child_pid"]  # type: ignore[index]
    os.kill(child, signal.SIGUSR1)  # what Slurm does to every process of the step
    assert proc.wait(30) == 0 and out.read_text().split() == ["ready", "SIGUSR1"]


def test_under_a_slurm_step_the_launcher_leaves_sigterm_to_slurm(tmp_path: Path) -> None:
    """A second SIGTERM would reach a trial while it exits in good order, and kill it."""
    sdir, out = tmp_path / "job", tmp_path / "signals.txt"
    proc = launcher(sdir, WAIT_FOR_SIGNALS.format(out=str(out), exit_on_usr1=True), {"SLURM_STEP_ID": "0"})
    wait_for("the trial to start", lambda: started(out))
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert proc.poll() is None  # the trial still runs: the launcher passed nothing on
    os.kill(read_json(str(sdir / LAUNCH))["child_pid"], signal.SIGUSR1)  # type: ignore[index]
    assert proc.wait(30) == 0
    done = read_json(str(sdir / EXIT))
    assert done is not None and (done["returncode"], done["signal"]) == (0, "SIGTERM") and "cancelled" not in done


def test_an_outside_sigterm_is_not_a_cancellation(tmp_path: Path) -> None:
    sdir, out = tmp_path / "job", tmp_path / "signals.txt"
    proc = launcher(sdir, WAIT_FOR_SIGNALS.format(out=str(out), exit_on_usr1=False))
    wait_for("the trial to start", lambda: started(out))
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    done = read_json(str(sdir / EXIT))
    assert done is not None and done["signal"] == "SIGTERM" and "cancelled" not in done
    assert record_status(done).failure_class == INFRA

    # the same with nasctl's marker in place: a cancellation
    sdir2, out2 = tmp_path / "job2", tmp_path / "signals2.txt"
    proc = launcher(sdir2, WAIT_FOR_SIGNALS.format(out=str(out2), exit_on_usr1=False))
    wait_for("the trial to start", lambda: started(out2))
    (sdir2 / CANCEL_MARKER).write_text("{}")
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    done = read_json(str(sdir2 / EXIT))
    assert done is not None and done["cancelled"] is True and record_status(done).failure_class == CANCELLED


# --- the local runner -----------------------------------------------------------------------------

@pytest.fixture
def local() -> Iterator[LocalRunner]:
    runner = LocalRunner({})
    yield runner
    runner.close()


def running_launch(runner: LocalRunner, job: SubmittedJob) -> dict[str, Any]:
    """launch.json once the trial process runs."""
    def ready() -> dict[str, Any] | None:
        launch = read_json(os.path.join(job.metadata["state_dir"], LAUNCH))
        return launch if launch and launch.get("child_pid") else None
    launch: dict[str, Any] = wait_for("the trial to start", ready)
    assert runner.status([job])[job.handle].state == JobState.RUNNING
    return launch


def ended(runner: LocalRunner, job: SubmittedJob) -> JobStatus:
    return wait_for("the job to end", lambda: (st := runner.status([job])[job.handle]).state.is_terminal and st)


def test_local_exit_1_is_the_trials_own_failure(local: LocalRunner, tmp_path: Path) -> None:
    job = local.submit(local_request(tmp_path, "exit1", "import sys; sys.exit(1)"))
    st = ended(local, job)
    assert (st.state, st.failure_class, st.exit_code, st.message) == (JobState.FAILED, USER, 1, "exit code 1")
    assert st.node == os.uname().nodename


def test_local_trial_killed_by_an_outsider_is_infrastructure(local: LocalRunner, tmp_path: Path) -> None:
    job = local.submit(local_request(tmp_path, "killed", "import time; time.sleep(120)"))
    os.kill(running_launch(local, job)["child_pid"], signal.SIGKILL)
    st = ended(local, job)
    assert (st.state, st.failure_class) == (JobState.FAILED, INFRA) and "killed by SIGKILL" in (st.message or "")


def test_local_launcher_killed_without_a_record_is_infrastructure(local: LocalRunner, tmp_path: Path) -> None:
    job = local.submit(local_request(tmp_path, "vanished", "import time; time.sleep(120)"))
    launch = running_launch(local, job)
    os.kill(launch["pid"], signal.SIGKILL)  # the launcher: nothing records the end
    try:
        os.kill(launch["child_pid"], signal.SIGKILL)
    except ProcessLookupError:
        pass  # TorchX, seeing its replica end, may have ended the process group first
    st = ended(local, job)
    assert (st.state, st.failure_class) == (JobState.FAILED, INFRA)
    assert "without recording an exit status" in (st.message or "")


def test_local_outside_sigterm_is_infrastructure_and_cancel_is_cancelled(local: LocalRunner, tmp_path: Path) -> None:
    outside = local.submit(local_request(tmp_path, "outside", "import time; time.sleep(120)"))
    ours = local.submit(local_request(tmp_path, "ours", "import time; time.sleep(120)"))
    os.killpg(running_launch(local, outside)["pid"], signal.SIGTERM)  # what local.cancel sends, minus the marker
    running_launch(local, ours)
    local.cancel(ours)
    st = ended(local, outside)
    assert (st.state, st.failure_class, st.message) == (JobState.FAILED, INFRA, "killed by SIGTERM (not sent by nasctl)")
    st = ended(local, ours)
    assert (st.state, st.failure_class) == (JobState.CANCELLED, CANCELLED)
    local.cancel(ours)  # idempotent, and the record stays a cancellation
    assert local.status([ours])[ours.handle].failure_class == CANCELLED


# --- the in-process runner ------------------------------------------------------------------------

def test_inprocess_exception_is_user_and_cancel_is_cancelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = f"nasctl_outcome_funcs_{os.getpid()}"
    (tmp_path / f"{mod}.py").write_text(
        "import threading\n"
        "GATE = threading.Event()\n"
        "def boom(p):\n    raise ValueError('bad x')\n"
        "def slow(p):\n    GATE.wait(30)\n    return {'f': 1.0}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    runner = get_runner("inprocess", {"workers": 1})

    def request(name: str, target: str) -> JobRequest:
        return JobRequest(name, sys.executable, ["-m", "nasctl.search_spaces.function", f"{mod}:{target}",
                                                 "--parameters", "{}"],
                          {"NASCTL_LOG_DIR": str(tmp_path / name / "tb")}, str(tmp_path / name))
    try:
        boom = runner.submit(request("boom", "boom"))
        st = wait_for("boom to fail", lambda: (s := runner.status([boom])[boom.handle]).state.is_terminal and s)
        assert (st.state, st.failure_class) == (JobState.FAILED, USER) and "bad x" in (st.message or "")
        slow = runner.submit(request("slow", "slow"))
        queued = runner.submit(request("queued", "slow"))  # waits for the one worker
        runner.cancel(queued)
        st = runner.status([queued])[queued.handle]
        assert (st.state, st.failure_class) == (JobState.CANCELLED, CANCELLED)
        runner.cancel(slow)
    finally:
        sys.modules[mod].GATE.set()
        runner.close()


# --- Kubernetes (the stand-in API server) --------------------------------------------------------

@pytest.fixture
def k8s(tmp_path: Path) -> Iterator[tuple[StandInCluster, KubernetesRunner]]:
    with StandInCluster() as cluster:
        runner = KubernetesRunner({"api_server": cluster.url, "queue": "default", "image": "nasctl:test",
                                   "log_volume_claim": "logs", "log_mount_path": str(tmp_path),
                                   "python": sys.executable})
        yield cluster, runner
        runner.close()


def k8s_job(runner: KubernetesRunner, tmp_path: Path, name: str, code: str) -> tuple[SubmittedJob, str]:
    job = runner.submit(local_request(tmp_path, name, code))
    wait_for("the pod to run the trial", lambda: (launch := read_json(os.path.join(job.metadata["state_dir"], LAUNCH)))
             and launch.get("child_pid"))
    return job, job.handle.rpartition(":")[2]


@pytest.mark.parametrize(("reason", "disruption", "grace", "cls"), [
    ("Evicted", None, None, INFRA),  # kubelet's node-pressure eviction: killed at once, no exit record
    ("NodeLost", None, None, INFRA),
    ("", "PreemptionByScheduler", 5.0, INFRA),  # SIGTERM first: the pod's reason wins over the exit record
    ("DeadlineExceeded", None, 5.0, TIMEOUT),
])
def test_kubernetes_pods_ended_by_the_cluster(k8s: tuple[StandInCluster, KubernetesRunner], tmp_path: Path,
                                              reason: str, disruption: str | None, grace: float | None,
                                              cls: FailureClass) -> None:
    cluster, runner = k8s
    job, name = k8s_job(runner, tmp_path, "evicted", "import time; time.sleep(120)")
    cluster.evict("default", name, reason=reason, disruption=disruption, grace=grace)
    st = wait_for("the job to fail", lambda: (s := runner.status([job])[job.handle]).state.is_terminal and s)
    assert (st.state, st.failure_class, st.node) == (JobState.FAILED, cls, "standin-node")
    assert (reason or disruption or "?") in (st.message or "")
    if grace is not None:
        assert read_json(os.path.join(job.metadata["state_dir"], EXIT))["signal"] == "SIGTERM"  # type: ignore[index]


def test_kubernetes_without_leave_to_list_pods_judges_by_the_exit_record(
        k8s: tuple[StandInCluster, KubernetesRunner], tmp_path: Path) -> None:
    cluster, runner = k8s
    cluster.pods_forbidden = True
    failed = runner.submit(local_request(tmp_path, "exit3", "import sys; sys.exit(3)"))
    st = wait_for("the job to fail", lambda: (s := runner.status([failed])[failed.handle]).state.is_terminal and s)
    assert (st.state, st.failure_class, st.message) == (JobState.FAILED, USER, "exit code 3")
    job, name = k8s_job(runner, tmp_path, "evicted", "import time; time.sleep(120)")
    cluster.evict("default", name)  # SIGKILL: no exit record, and no pod to say why
    st = wait_for("the job to fail", lambda: (s := runner.status([job])[job.handle]).state.is_terminal and s)
    assert (st.state, st.failure_class) == (JobState.FAILED, INFRA)
    assert "recorded no exit (could not list pods" in (st.message or "") and "Forbidden" in (st.message or "")


def test_kubernetes_failed_container_is_user_and_delete_is_cancelled(k8s: tuple[StandInCluster, KubernetesRunner],
                                                                     tmp_path: Path) -> None:
    cluster, runner = k8s
    failed = runner.submit(local_request(tmp_path, "exit3", "import sys; sys.exit(3)"))
    st = wait_for("the job to fail", lambda: (s := runner.status([failed])[failed.handle]).state.is_terminal and s)
    assert (st.state, st.failure_class, st.exit_code) == (JobState.FAILED, USER, 3)
    job, _ = k8s_job(runner, tmp_path, "deleted", "import time; time.sleep(120)")
    runner.cancel(job)
    st = runner.status([job])[job.handle]
    assert (st.state, st.failure_class) == (JobState.CANCELLED, CANCELLED)
    assert read_json(os.path.join(job.metadata["state_dir"], EXIT))["cancelled"] is True  # type: ignore[index]


def test_pod_status_reads_reasons_conditions_and_containers() -> None:
    assert pod_status({"status": {"phase": "Running"}}) is None
    evicted = pod_status({"metadata": {"name": "p"}, "spec": {"nodeName": "n7"},
                          "status": {"phase": "Failed", "reason": "Evicted", "message": "low on memory"}})
    assert evicted is not None and (evicted.failure_class, evicted.node) == (INFRA, "n7")
    assert evicted.message == "pod p: Evicted (low on memory)"
    taint = pod_status({"status": {"phase": "Failed", "conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}]}})
    assert taint is not None and taint.failure_class == INFRA and "DeletionByTaintManager" in (taint.message or "")
    oom = pod_status({"status": {"phase": "Failed", "containerStatuses": [
        {"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}})
    assert oom is not None and (oom.failure_class, oom.exit_code) == (USER, 137)
