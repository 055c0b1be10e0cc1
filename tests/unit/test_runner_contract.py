"""The runner contract (nasctl.runners.base.Runner), run against every registered runner
with real jobs. A new runner joins by adding its name to RUNNERS.

slurm runs against the local Slurm cluster (`scripts/slurm-local.sh up`; the
tests fail without it). kubernetes runs against the stand-in API server of
tests/k8s_standin.py, which runs each pod as a local process."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

import pytest

from nasctl.errors import UnknownRunnerError
from nasctl.runners import JobRequest, JobState, Runner, SubmittedJob, available_runners, get_runner
from nasctl.types import FailureClass

from tests.cluster import require_slurm
from tests.helpers.runners import wait_terminal
from tests.k8s_standin import StandInCluster

RUNNERS = ["local_cwd", "slurm", "kubernetes"]
# inprocess and simulated run only trial.function calls, not commands: tests/unit/test_inprocess.py
# and tests/unit/test_simulated.py hold their versions of this suite.
FUNCTION_RUNNERS = ["inprocess", "simulated"]


def test_every_builtin_runner_is_covered() -> None:
    assert sorted(available_runners()) == sorted(RUNNERS + FUNCTION_RUNNERS)


@pytest.fixture(scope="module")
def k8s_standin() -> Iterator[StandInCluster]:
    with StandInCluster() as cluster:
        yield cluster


@pytest.fixture(params=RUNNERS)
def runner_cfg(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """(scheduler, runner.cfg) for each runner, with its cluster available."""
    if request.param == "slurm":
        require_slurm()
    if request.param == "kubernetes":
        standin = request.getfixturevalue("k8s_standin")
        return request.param, {"api_server": standin.url, "queue": "default", "image": "nasctl:test",
                               "log_volume_claim": "nasctl-logs", "log_mount_path": str(tmp_path),
                               "python": sys.executable}
    return request.param, {}


@pytest.fixture
def runner(runner_cfg: tuple[str, dict[str, Any]]) -> Runner:
    return get_runner(*runner_cfg)


@pytest.fixture
def make_request(tmp_path: Path) -> Callable[[str, str], JobRequest]:
    def make(name: str, code: str) -> JobRequest:
        return JobRequest(
            name=name,
            entrypoint=sys.executable,
            args=["-c", code],
            env={"NASCTL_TRIAL_ID": "0", "NASCTL_LOG_DIR": str(tmp_path / name / "tb")},
            trial_dir=str(tmp_path / name),
        )

    return make


def test_dryrun_has_no_side_effects(runner: Runner, make_request: Callable[[str, str], JobRequest]) -> None:
    req = make_request("dry", "print('x')")
    text = runner.dryrun(req)
    assert sys.executable in text and "NASCTL_TRIAL_ID" in text
    assert not os.path.exists(req.trial_dir)


def test_submit_poll_logs(runner: Runner, make_request: Callable[[str, str], JobRequest]) -> None:
    ok = runner.submit(make_request("ok", "import os; print('hello from', os.environ['NASCTL_TRIAL_ID'])"))
    bad = runner.submit(make_request("bad", "import sys; print('about to fail', file=sys.stderr); sys.exit(3)"))
    # only JSON is persisted: handle and metadata must survive a round trip
    for job in (ok, bad):
        assert isinstance(job.handle, str)
        assert json.loads(json.dumps(job.metadata)) == job.metadata
    assert wait_terminal(runner, ok) == JobState.SUCCEEDED
    assert wait_terminal(runner, bad) == JobState.FAILED
    both = runner.status([ok, bad])  # one call answers for many jobs
    assert set(both) == {ok.handle, bad.handle}
    assert both[ok.handle].failure_class is None
    assert both[bad.handle].failure_class == FailureClass.USER  # the trial's own non-zero exit
    assert "hello from 0" in runner.log_tail(ok)
    assert "about to fail" in runner.log_tail(bad)
    # logs live in the trial's directory, not a temporary one
    assert Path(ok.metadata["stdout"]).is_relative_to(Path(make_request("ok", "").trial_dir))


def test_cancel_is_idempotent(runner: Runner, make_request: Callable[[str, str], JobRequest]) -> None:
    job = runner.submit(make_request("slow", "import time; time.sleep(120)"))
    deadline = time.monotonic() + 30
    while runner.status([job])[job.handle].state not in (JobState.RUNNING, JobState.PENDING):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    runner.cancel(job)
    assert wait_terminal(runner, job) in (JobState.CANCELLED, JobState.FAILED)
    runner.cancel(job)  # again: not an error


def test_unknown_job_is_reported_not_raised(runner: Runner) -> None:
    fake = SubmittedJob(handle=f"{runner.scheduler}://torchx/never-submitted-123", metadata={})
    assert runner.status([fake])[fake.handle].state == JobState.UNKNOWN
    assert runner.log_tail(fake) == ""


def test_unknown_scheduler_names_the_choices() -> None:
    with pytest.raises(UnknownRunnerError, match="'local' is not a known scheduler.*local_cwd"):
        get_runner("local")
    with pytest.raises(UnknownRunnerError) as ei:
        get_runner("mesos")
    assert ei.value.exit_code == 2


def test_another_process_can_poll_and_cancel(runner: Runner, make_request: Callable[[str, str], JobRequest],
                                             runner_cfg: tuple[str, dict[str, Any]]) -> None:
    req = make_request("detached", "import time; print('working', flush=True); time.sleep(120)")
    job = runner.submit(req)
    fresh = get_runner(*runner_cfg)  # what a restarted orchestrator holds: only handle + metadata
    stored = SubmittedJob(**json.loads(json.dumps({"handle": job.handle, "metadata": job.metadata})))
    deadline = time.monotonic() + 30
    while fresh.status([stored])[stored.handle].state != JobState.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    while "working" not in fresh.log_tail(stored):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    fresh.cancel(stored)
    assert wait_terminal(fresh, stored) == JobState.CANCELLED
    assert wait_terminal(runner, job) == JobState.CANCELLED
    assert runner.status([job])[job.handle].failure_class == FailureClass.CANCELLED


def test_find_and_no_double_launch(runner: Runner, make_request: Callable[[str, str], JobRequest],
                                   tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    req = make_request("once", f"open({str(marker)!r}, 'a').write('ran\\n')")
    assert runner.find(req) is None
    first = runner.submit(req)
    second = runner.submit(req)  # e.g. a restarted orchestrator that did not see the first submission
    assert wait_terminal(runner, first) == JobState.SUCCEEDED
    assert wait_terminal(runner, second) == JobState.SUCCEEDED  # both report the one real run
    assert marker.read_text() == "ran\n"
    found = runner.find(req)
    assert found is not None and found.handle in (first.handle, second.handle)  # whichever claimed it
    assert runner.status([found])[found.handle].state == JobState.SUCCEEDED


def test_local_duplicate_is_starting_while_the_claimant_has_not_written_its_start(
        make_request: Callable[[str, str], JobRequest]) -> None:
    """Of two submissions of one trial, one launcher claims it and the other exits
    at once (code 75). Until the claimant has written launch.json, the duplicate's
    job is starting, not failed; once the claimant is gone without a trace, it failed."""
    import subprocess

    from nasctl.runners.launcher import CLAIM

    runner = get_runner("local_cwd", {})
    req = make_request("dup", "print('ran')")
    sdir = Path(req.trial_dir) / "job"
    sdir.mkdir(parents=True)
    (sdir / CLAIM).write_text(str(os.getpid()))  # this test is the claimant, still starting
    job = runner.submit(req)
    deadline = time.monotonic() + 60
    while runner._reap(job) is None or runner._reap(job).state == JobState.RUNNING:  # noqa: SLF001
        assert time.monotonic() < deadline, "the duplicate launcher did not exit"
        time.sleep(0.05)
    assert "not running it twice" in runner.log_tail(job)
    assert runner.status([job])[job.handle].state == JobState.PENDING
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (sdir / CLAIM).write_text(str(gone.pid))  # a claimant that ended before writing launch.json
    assert runner.status([job])[job.handle].state == JobState.FAILED
