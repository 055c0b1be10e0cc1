"""Attempts and retries: a trial runs as one or more attempts.

An attempt that ends in a failure class of `trial.retry_on` (default
infrastructure: a node failure, a preemption, a lost job, an outside kill)
runs again as the same trial (same index, same parameters) from the trial's
last checkpoint, up to `trial.max_retries` times. A `user` failure (the
trial's own code) is never retried. Retries do not count against
`budget.max_failures` or `budget.max_trials`, and the optimizer sees one
outcome per trial.

Each attempt is a JSON record on the trial: {number, started_at, ended_at,
failure_class, reason, node, job, job_metadata}; the last one may still run
(`ended_at` None). A retry is written ahead: the ended attempt is stored
first (the trial still RUNNING), then its job is cancelled, then the trial
goes back to CANDIDATE with its devices freed. A loop resumed in between finds
a RUNNING trial whose last attempt has ended and finishes the retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from nasctl.runners.base import SubmittedJob
from nasctl.spec import ExperimentSpec
from nasctl.types import FailureClass, TrialRecord

Attempt = dict[str, Any]
RETRY_EVENT = "retry"
"""Event kind: an attempt ended and the trial runs again."""


def _iso(t: datetime) -> str:
    return t.replace(tzinfo=timezone.utc).isoformat() if t.tzinfo is None else t.isoformat()


def started(attempts: Sequence[Attempt], job: SubmittedJob, now: datetime) -> list[Attempt]:
    """The attempts with a new one, started now as `job`."""
    return [*attempts, {"number": len(attempts) + 1, "started_at": _iso(now), "ended_at": None,
                        "failure_class": None, "reason": None, "node": None, "job": job.handle,
                        "job_metadata": dict(job.metadata)}]


def ended(attempts: Sequence[Attempt], failure_class: FailureClass | None, reason: str | None,
          node: str | None, now: datetime) -> list[Attempt]:
    """The attempts with the last one ended now (unchanged when there is none, or it has ended)."""
    if not attempts or attempts[-1].get("ended_at") is not None:
        return list(attempts)
    last = {**attempts[-1], "ended_at": _iso(now), "failure_class": failure_class.value if failure_class else None,
            "reason": reason}
    if node:
        last["node"] = node
    return [*attempts[:-1], last]


def next_number(trial: TrialRecord) -> int:
    """The number of the attempt a queued trial runs next (1 for a new trial)."""
    return len(trial.attempts) + 1


def retrying(trial: TrialRecord) -> bool:
    """A RUNNING trial whose last attempt has ended: a retry was under way when the loop stopped."""
    return bool(trial.attempts) and trial.attempts[-1].get("ended_at") is not None


def may_retry(spec: ExperimentSpec, attempts: Sequence[Attempt], failure_class: FailureClass | None) -> bool:
    """Whether an attempt that ended in `failure_class` runs again: its class is in
    `trial.retry_on` and fewer than `trial.max_retries` retries have run (the
    attempts include the one that ended)."""
    if failure_class is None or failure_class.value not in spec.trial.retry_on:
        return False
    return len(attempts) - 1 < spec.trial.max_retries


def last_job(trial: TrialRecord) -> SubmittedJob | None:
    """The job of the trial's last attempt, as it was submitted (to cancel it again)."""
    if not trial.attempts or not trial.attempts[-1].get("job"):
        return None
    last = trial.attempts[-1]
    return SubmittedJob(str(last["job"]), dict(last.get("job_metadata") or {}))


def retry_message(trial: TrialRecord, attempts: Sequence[Attempt], resume: str | None, max_retries: int) -> str:
    """The event that says an attempt ended and the trial runs again, and from where."""
    last = attempts[-1]
    number = int(last["number"])
    start = f"from its checkpoint {resume}" if resume else "from the start (it left no checkpoint)"
    return (f"trial {trial.index} attempt {number} ended ({last.get('failure_class')}: {last.get('reason')}); "
            f"retry {number} of {max_retries} runs as attempt {number + 1} {start}")
