"""The rules of attempts, each with a yes and a no case: is this job lost, how did it
end, may this attempt be retried, what the attempt records say."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from nasctl.metrics import MetricSummary
from nasctl.metrics.tensorboard import TensorBoardReader
from nasctl.orchestration import attempts
from nasctl.orchestration.running import LOST_AFTER_SECONDS, RunningTrial, job_end
from nasctl.runners.base import JobState, JobStatus, SubmittedJob
from nasctl.spec import parse_spec
from nasctl.types import FailureClass, TrialRecord, TrialStatus

SPEC = """
name: a
search_space: {x: {type: float, low: 0, high: 1}}
objectives: {f: {goal: minimize}}
budget: {max_trials: 4}
trial: {script: t.py, max_retries: 2, retry_on: [infrastructure, timeout]}
"""


def _run(tmp_path: Path) -> RunningTrial:
    rec = TrialRecord(1, 1, 0, {"x": 0.5}, TrialStatus.RUNNING, "Sobol", datetime(2026, 1, 1))
    return RunningTrial(rec, SubmittedJob("job-0"), TensorBoardReader(str(tmp_path)), MetricSummary(), 0.0)


def test_a_job_is_lost_only_after_it_was_unknown_long_enough_in_a_row(tmp_path: Path) -> None:
    run = _run(tmp_path)
    unknown = JobStatus(JobState.UNKNOWN, "Slurm does not know job 7")
    assert job_end(run, unknown, 1000.0) is None
    assert job_end(run, unknown, 1000.0 + LOST_AFTER_SECONDS - 1) is None  # not yet
    assert job_end(run, JobStatus(JobState.RUNNING), 1000.0 + LOST_AFTER_SECONDS) is None  # known again: resets
    assert job_end(run, unknown, 1000.0 + LOST_AFTER_SECONDS + 1) is None
    end = job_end(run, unknown, 1000.0 + 2 * LOST_AFTER_SECONDS + 1)  # a full period in a row
    assert end is not None and not end.succeeded and end.failure_class == FailureClass.INFRASTRUCTURE
    assert "was lost" in (end.reason or "")


def test_a_job_end_takes_the_runners_class_else_user_or_cancelled(tmp_path: Path) -> None:
    run = _run(tmp_path)
    node_fail = job_end(run, JobStatus(JobState.FAILED, "Slurm job 7 NODE_FAIL", None,
                                       FailureClass.INFRASTRUCTURE, "node1"), 0.0)
    assert node_fail is not None and node_fail.failure_class == FailureClass.INFRASTRUCTURE and node_fail.node == "node1"
    exit1 = job_end(run, JobStatus(JobState.FAILED, "exit code 1"), 0.0)
    assert exit1 is not None and exit1.failure_class == FailureClass.USER
    cancelled = job_end(run, JobStatus(JobState.CANCELLED), 0.0)
    assert cancelled is not None and cancelled.failure_class == FailureClass.CANCELLED
    done = job_end(run, JobStatus(JobState.SUCCEEDED), 0.0)
    assert done is not None and done.succeeded and done.failure_class is None
    assert job_end(run, JobStatus(JobState.PENDING, "requeued"), 0.0) is None  # a requeued job goes on


def test_may_retry_only_listed_classes_while_retries_are_left() -> None:
    spec = parse_spec(SPEC)
    one = [{"number": 1}]
    assert attempts.may_retry(spec, one, FailureClass.INFRASTRUCTURE)
    assert attempts.may_retry(spec, one, FailureClass.TIMEOUT)
    assert not attempts.may_retry(spec, one, FailureClass.USER)  # never
    assert not attempts.may_retry(spec, one, FailureClass.CANCELLED)  # not listed
    assert not attempts.may_retry(spec, one, None)
    assert attempts.may_retry(spec, [*one, {"number": 2}], FailureClass.INFRASTRUCTURE)  # 1 retry of 2 used
    assert not attempts.may_retry(spec, [*one, {"number": 2}, {"number": 3}], FailureClass.INFRASTRUCTURE)
    default = parse_spec(SPEC.replace(", max_retries: 2, retry_on: [infrastructure, timeout]", ""))
    assert default.trial.max_retries == 2 and default.trial.retry_on == ["infrastructure"]
    assert not attempts.may_retry(default, one, FailureClass.TIMEOUT)


def test_attempt_records_start_end_and_say_when_a_retry_was_under_way() -> None:
    t0, t1 = datetime(2026, 1, 1, 12), datetime(2026, 1, 1, 13)
    started = attempts.started([], SubmittedJob("slurm://torchx/7", {"job_id": "7"}), t0)
    assert started[0]["number"] == 1 and started[0]["ended_at"] is None and started[0]["job"] == "slurm://torchx/7"
    done = attempts.ended(started, FailureClass.INFRASTRUCTURE, "NODE_FAIL", "node1", t1)
    assert done[0]["failure_class"] == "infrastructure" and done[0]["node"] == "node1"
    assert datetime.fromisoformat(done[0]["ended_at"]).hour == 13
    assert attempts.ended(done, FailureClass.USER, "again", None, t1) == done  # an ended attempt stays as it was
    rec = TrialRecord(1, 1, 0, {}, TrialStatus.RUNNING, "Sobol", t0, attempts=done)
    assert attempts.retrying(rec) and attempts.next_number(rec) == 2
    assert not attempts.retrying(TrialRecord(1, 1, 0, {}, TrialStatus.RUNNING, "Sobol", t0, attempts=started))
    job = attempts.last_job(rec)
    assert job is not None and job.handle == "slurm://torchx/7" and job.metadata == {"job_id": "7"}
