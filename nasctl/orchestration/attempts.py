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
(`ended_at` None). `started_at` is when its job was submitted; on a scheduler with
a queue (`Runner.queues`) the job may wait before it runs, and may go back to the
queue (a Slurm requeue after a preemption or a node failure). The record follows
that too (`observe`): `running_since` (ISO UTC; None while the job waits),
`pending_reason` (the scheduler's reason while it waits), `queued_since`,
`first_run_at`, the seconds spent waiting (`queued_s`) and running (`run_s`) in
waits and runs that have ended, `restarts` ({at, node, reason, resumed_from,
ran_again_at}: each time the job went back to the queue after it ran) and `gpus`
(the devices it holds while it runs).
A record without `running_since` (stored before queues were followed) ran from
`started_at` to `ended_at`. A retry is written ahead: the ended attempt is stored
first (the trial still RUNNING), then its job is cancelled, then the trial
goes back to CANDIDATE with its devices freed. A loop resumed in between finds
a RUNNING trial whose last attempt has ended and finishes the retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from nasctl.runners.base import JobState, JobStatus, SubmittedJob
from nasctl.spec import ExperimentSpec
from nasctl.types import FailureClass, TrialRecord

Attempt = dict[str, Any]
RETRY_EVENT = "retry"
"""Event kind: an attempt ended and the trial runs again."""
RESTART_EVENT = "restart"
"""Event kind: a running job went back to the scheduler's queue (requeue, preemption,
node failure) and runs again as the same attempt."""
QUEUE_EVENT = "queue"
"""Event kind: a queued job's reason to wait changed, or it started to run."""
RESTART_TOLERANCE_SECONDS = 2.0
"""A run start the scheduler reports this much later than the recorded one is a new
run: the job was requeued and restarted between two polls."""


def _iso(t: datetime) -> str:
    return t.replace(tzinfo=timezone.utc).isoformat() if t.tzinfo is None else t.isoformat()


def _iso_epoch(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat()


def epoch(text: object) -> float | None:
    """An attempt's ISO time as epoch seconds (None for None)."""
    if not text:
        return None
    t = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def started(attempts: Sequence[Attempt], job: SubmittedJob, now: datetime, queued: bool = False,
            gpus: float = 0.0) -> list[Attempt]:
    """The attempts with a new one, started now as `job`: running at once, or waiting in
    the scheduler's queue (`queued`) until a poll sees it run; `gpus` is the devices it
    holds while it runs."""
    at = _iso(now)
    return [*attempts, {"number": len(attempts) + 1, "started_at": at, "ended_at": None,
                        "failure_class": None, "reason": None, "node": None, "job": job.handle,
                        "job_metadata": dict(job.metadata), "running_since": None if queued else at,
                        "first_run_at": None if queued else at,
                        "pending_reason": None, "queued_since": at if queued else None, "queued_s": 0.0,
                        "run_s": 0.0, "restarts": [], "gpus": gpus}]


def _fold(a: Attempt, until: float, ran_from: float | None = None) -> Attempt:
    """The attempt with its current wait or run ended at `until` (epoch): its seconds
    added to `queued_s` or `run_s`. A job that ended before any poll saw it run
    (`ran_from`: the scheduler's start of its run, where it says) ran from then."""
    if "running_since" not in a:
        return a  # an attempt recorded before queues were followed: started_at to ended_at
    a = dict(a)
    running, queued = epoch(a.get("running_since")), epoch(a.get("queued_since"))
    if running is None and ran_from is not None and queued is not None and queued <= ran_from <= until:
        a["queued_s"] = float(a.get("queued_s") or 0.0) + ran_from - queued
        a["running_since"], a["queued_since"], running, queued = _iso_epoch(ran_from), None, ran_from, None
        a["first_run_at"] = a.get("first_run_at") or a["running_since"]
    if running is not None:
        a["run_s"] = float(a.get("run_s") or 0.0) + max(0.0, until - running)
    elif queued is not None:
        a["queued_s"] = float(a.get("queued_s") or 0.0) + max(0.0, until - queued)
        a["queued_since"] = None
    return a


def ended(attempts: Sequence[Attempt], failure_class: FailureClass | None, reason: str | None,
          node: str | None, now: datetime, ran_from: float | None = None) -> list[Attempt]:
    """The attempts with the last one ended now (unchanged when there is none, or it has
    ended); its last wait or run is added to its seconds (`ran_from`: where the
    scheduler says when the job's last run began)."""
    if not attempts or attempts[-1].get("ended_at") is not None:
        return list(attempts)
    last = {**_fold(attempts[-1], now.replace(tzinfo=timezone.utc).timestamp() if now.tzinfo is None
                    else now.timestamp(), ran_from),
            "ended_at": _iso(now), "failure_class": failure_class.value if failure_class else None, "reason": reason}
    if node:
        last["node"] = node
    return [*attempts[:-1], last]


def observe(attempt: Attempt, status: JobStatus, now: float,
            checkpoint: str | None) -> tuple[Attempt, dict[str, Any] | None]:
    """What one poll of a job that has not ended says about its attempt: the attempt
    (the same object when nothing changed) and the restart it saw, if any.

    A PENDING job waits: its scheduler's reason is kept; a job that had run and waits
    again was put back in the queue (a restart: it will resume from `checkpoint`, the
    trial's last, or start over when there is none). A RUNNING job runs since the
    scheduler's start of its run (or `now`, where the scheduler does not say); a start
    later than the recorded one is a restart that happened between two polls.
    """
    if "running_since" not in attempt or status.state not in (JobState.PENDING, JobState.RUNNING):
        return attempt, None
    running = epoch(attempt.get("running_since"))
    restart: dict[str, Any] | None = None
    if status.state == JobState.PENDING:
        # a scheduler between two evaluations may give no reason (Slurm's "None"): keep the last one
        reason = status.message or (attempt.get("pending_reason") if running is None else None)
        if running is None:
            if attempt.get("pending_reason") == reason:
                return attempt, None
            return {**attempt, "pending_reason": reason}, None
        restart = {"at": _iso_epoch(now), "node": attempt.get("node"), "reason": reason, "resumed_from": checkpoint}
        a = {**_fold(attempt, now), "running_since": None, "queued_since": _iso_epoch(now), "pending_reason": reason}
        a["restarts"] = [*(attempt.get("restarts") or []), restart]
        return a, restart
    since = status.running_since if status.running_since is not None and status.running_since <= now else None
    submitted = epoch(attempt.get("started_at"))
    if since is not None and submitted is not None:
        # the scheduler's clock, or its whole seconds, may put the start a moment before the submission was recorded
        since = max(since, submitted)
    if running is not None:
        if since is None or since <= running + RESTART_TOLERANCE_SECONDS:
            if status.node and status.node != attempt.get("node"):
                return {**attempt, "node": status.node}, None
            return attempt, None
        # requeued and started again between two polls: the run before ended unseen
        restart = {"at": _iso_epoch(since), "node": attempt.get("node"), "reason": "requeued",
                   "resumed_from": checkpoint, "ran_again_at": _iso_epoch(since)}
        a = {**_fold(attempt, since), "restarts": [*(attempt.get("restarts") or []), restart]}
    else:
        a = _fold(attempt, since if since is not None else now)
        start = _iso_epoch(since if since is not None else now)
        a["first_run_at"] = a.get("first_run_at") or start
        if a.get("restarts") and not a["restarts"][-1].get("ran_again_at"):
            a["restarts"] = [*a["restarts"][:-1], {**a["restarts"][-1], "ran_again_at": start}]
    a.update(running_since=_iso_epoch(since if since is not None else now), queued_since=None, pending_reason=None)
    if status.node:
        a["node"] = status.node
    return a, restart


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


def restart_message(index: int, attempt: Attempt, restart: dict[str, Any], scheduler: str) -> str:
    """The event that says a running job went back to the scheduler's queue."""
    where = f" on {restart['node']}" if restart.get("node") else ""
    why = f" ({restart['reason']})" if restart.get("reason") else ""
    how = (f"it resumes from its checkpoint {restart['resumed_from']}" if restart.get("resumed_from")
           else "it started over (no checkpoint yet)")
    return (f"trial {index} attempt {attempt['number']}: {scheduler} put its job back in the queue{where}{why}; "
            f"restart {len(attempt.get('restarts') or [])}, {how}")


def segments(a: Attempt, now: float) -> list[dict[str, Any]]:
    """The attempt's time as {phase: queued | running, start, end} pieces (ISO UTC),
    oldest first: the wait before its first run, each run, each wait after a restart
    (the dashboard's timeline draws them)."""
    end = a.get("ended_at") or _iso_epoch(now)
    if "running_since" not in a:
        return [{"phase": "running", "start": a.get("started_at"), "end": end}]
    pieces: list[dict[str, Any]] = []

    def add(phase: str, start: object, stop: object) -> None:
        if start and stop and str(start) != str(stop):
            pieces.append({"phase": phase, "start": start, "end": stop})

    first = a.get("first_run_at")
    add("queued", a.get("started_at"), first or end)
    run_start = first
    for r in a.get("restarts") or []:
        if run_start is None:
            break
        add("running", run_start, r.get("at"))
        add("queued", r.get("at"), r.get("ran_again_at") or end)
        run_start = r.get("ran_again_at")
    if run_start is not None:
        add("running", run_start, end)
    return pieces


def queue_change(index: int, before: Attempt, after: Attempt, scheduler: str) -> str | None:
    """The event for a job that started to run after a wait, or whose reason to wait
    changed (None for anything else: a node learnt, nothing new)."""
    if before.get("running_since") is None and after.get("running_since") is not None:
        waited = float(after.get("queued_s") or 0.0) - float(before.get("queued_s") or 0.0)
        where = f" on {after['node']}" if after.get("node") else ""
        return f"trial {index} runs{where} after {waited:.0f}s in {scheduler}'s queue"
    if after.get("running_since") is None and after.get("pending_reason") != before.get("pending_reason"):
        return f"trial {index} waits in {scheduler}'s queue: {after.get('pending_reason') or 'no reason given'}"
    return None
