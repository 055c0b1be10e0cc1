"""How a trial's end is recorded: in the store first (with its log tail and what it
reported about itself), then in the ledger, early stopping and the optimizer.

The store comes first so that a crash in between loses nothing: a resumed loop
rebuilds the ledger and the optimizer from the store (nasctl/orchestration/resume.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from nasctl.errors import MetricsError, NotFoundError, RunnerError
from nasctl import failpoints
from nasctl.orchestration.context import RunContext
from nasctl.orchestration import attempts as attempts_mod
from nasctl.orchestration.early_stopping import EARLY_STOPPED_EVENT
from nasctl.orchestration.fidelity import checkpoint_of
from nasctl.orchestration.progress import fmt_values
from nasctl.orchestration.usage import attempts_usage
from nasctl.orchestration.jobs import trial_dir
from nasctl.orchestration.running import (
    LOG_TAIL_LINES,
    RunningTrial,
    disk_full,
    metric_values,
    read_trial_info,
    started_epoch,
)
from nasctl.runners.base import SubmittedJob
from nasctl.types import FailureClass, Observation, TrialRecord, TrialStatus


def exception_line(log: str | None) -> str | None:
    """The last line of the last Python traceback in `log` (`ValueError: bad lr`), or None:
    what a trial's failure reason adds to `job failed: exit code 1`."""
    lines = (log or "").splitlines()
    start = max((k for k, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")), default=-1)
    if start < 0:
        return None
    for line in lines[start + 1:]:
        if line.strip() and not line[0].isspace():
            return line.strip()[:300]
    return None


CANCEL_IGNORED_EVENT = "cancel_ignored"
"""Event kind: a cancel request came for a trial that had already ended."""


@dataclass(frozen=True)
class Outcome:
    """A trial's end as the loop decided it.

    Attributes:
        status: the terminal status.
        reason: why it did not complete (None when it did).
        values: the metric values to store (completed, early-stopped or partial).
        stopped_values: an early-stopped trial's projected values, for the optimizer.
        observations: the last curves, stored in the same transaction as the end.
        reader_state: where reading its logs stopped.
        failure_class: why an attempt failed (FAILED and ABANDONED ends).
        node: where the attempt ran, when the scheduler says.
        ended_at: when the job ended (epoch) by the scheduler's clock, where it says;
            otherwise the end is recorded when the loop sees it.
        ran_from: when the job's last run began (epoch), where the scheduler says: a
            job that ended before a poll saw it run is counted as running from then.
        device_seconds: what the result took, where the runner accounts it itself
            (`JobStatus.device_seconds`); otherwise the attempts' own account.
    """

    status: TrialStatus
    reason: str | None = None
    values: dict[str, float] | None = None
    stopped_values: dict[str, float] | None = None
    observations: Sequence[Observation] = ()
    reader_state: dict[str, Any] | None = None
    failure_class: FailureClass | None = None
    node: str | None = None
    ended_at: float | None = None
    ran_from: float | None = None
    device_seconds: float | None = None

    def end_time(self, started: float, now: float) -> datetime:
        """When the trial ended, as the store keeps times: the scheduler's end where
        known (an outage between the end and the poll that saw it does not stretch the
        trial), never before `started` (epoch) nor after `now` (the loop's clock)."""
        at = now if self.ended_at is None else max(started, min(now, self.ended_at))
        return datetime.fromtimestamp(at, timezone.utc).replace(tzinfo=None)


class TrialOutcomes:
    """Records trial ends for one experiment: in the store, the ledger, early stopping
    and the optimizer; cancels jobs and reads log tails through the runner.

    Args:
        ctx: the run's context.
    """

    def __init__(self, ctx: RunContext) -> None:
        self.store, self.exp, self.spec, self.runner = ctx.store, ctx.exp, ctx.spec, ctx.runner
        self.gen, self.ledger, self.stopper, self._messages = ctx.generator, ctx.ledger, ctx.stopper, ctx.messages
        self._clock = ctx.clock  # when trials end

    def result(self, run: RunningTrial, node: str | None) -> Outcome:
        """The outcome of a trial whose job succeeded: its last logs are read (and kept
        to be stored with its end, in one transaction) and its values taken by the
        spec's rules; COMPLETED, or FAILED (user) when an objective is missing or
        not finite or the log is corrupt."""
        try:
            new = run.read_new()
        except MetricsError as e:
            return Outcome(TrialStatus.FAILED, str(e), failure_class=FailureClass.USER, node=node)
        if self.stopper is not None:
            self.stopper.observe(run.index, new)
        values, problems = metric_values(self.spec, run.summary)
        if problems:
            return Outcome(TrialStatus.FAILED, "; ".join(problems), values, observations=new,
                           reader_state=run.reader_state, failure_class=FailureClass.USER, node=node)
        return Outcome(TrialStatus.COMPLETED, None, values, observations=new, reader_state=run.reader_state,
                       node=node)

    def end_running(self, run: RunningTrial, outcome: Outcome) -> TrialRecord | None:
        """A running trial's attempt ended. A failure whose class `trial.retry_on`
        lists, with retries left, is retried: returns the trial, queued again as
        CANDIDATE. Otherwise the trial ends: its job is cancelled if it failed (no
        orphan keeps a node or a GPU), then its log tail (unless it completed),
        what it wrote about itself (trial_info.json) and, for a failure, whether
        the disk was full are stored; returns None."""
        if outcome.status == TrialStatus.FAILED:
            attempts = attempts_mod.ended(run.trial.attempts, outcome.failure_class, outcome.reason, outcome.node,
                                          outcome.end_time(run.started, self._clock.time()), outcome.ran_from)
            if attempts_mod.may_retry(self.spec, attempts, outcome.failure_class):
                self.ledger.attempt_ended(attempts[-1])
                return self.retry(run.trial, run.job, attempts)
            self.cancel(run)
            if outcome.failure_class == FailureClass.CANCELLED:
                # a person cancelled the job (scancel, kubectl delete): the trial did not fail,
                # it is not counted against budget.max_failures
                outcome = dataclasses.replace(outcome, status=TrialStatus.ABANDONED)
        reason = outcome.reason
        tail = self.runner.log_tail(run.job, LOG_TAIL_LINES) if outcome.status != TrialStatus.COMPLETED else None
        if outcome.status == TrialStatus.FAILED:
            raised = exception_line(tail) if outcome.failure_class == FailureClass.USER else None
            reason = f"{reason}: {raised}" if raised and reason and raised not in reason else reason
            full = disk_full(self.exp.work_dir)
            reason = f"{reason} ({full})" if full else reason
        info, problem = read_trial_info(str(run.reader.log_dir))
        if problem:
            self.store.add_event(self.exp.id, "warning", problem, trial_index=run.index)
        self.finish(run.trial, TrialStatus.RUNNING, outcome, reason=reason, log_tail=tail, info=info)
        return None

    def retry(self, trial: TrialRecord, job: SubmittedJob, attempts: list[attempts_mod.Attempt]) -> TrialRecord:
        """Run the trial again: the ended attempt is stored first (write-ahead), its job
        cancelled, then the trial goes back to CANDIDATE with its devices freed."""
        self.store.set_attempts(trial.id, attempts)
        failpoints.hit("during_retry")
        self.cancel_job(job, trial.index)
        resume = checkpoint_of(trial.log_dir or trial_dir(self.exp.work_dir, trial.index))
        message = attempts_mod.retry_message(trial, attempts, resume, self.spec.trial.max_retries)
        rec = self.store.retry_trial(trial.id, attempts, message)
        self.ledger.move(TrialStatus.RUNNING, TrialStatus.CANDIDATE)
        self._messages.note(message)
        return rec

    def finish(self, rec: TrialRecord, was: TrialStatus, outcome: Outcome, *, reason: str | None = None,
               log_tail: str | None = None, info: dict[str, Any] | None = None) -> None:
        """Store a trial's end (`reason` overrides the outcome's), then tell the ledger,
        early stopping and the optimizer."""
        status, values = outcome.status, outcome.values
        reason = reason if reason is not None else outcome.reason
        failed = status in (TrialStatus.FAILED, TrialStatus.ABANDONED)
        cls = outcome.failure_class if failed else None
        started = started_epoch(rec)
        ended = outcome.end_time(started, self._clock.time()) if outcome.ended_at is not None else self._clock.now()
        attempts = attempts_mod.ended(rec.attempts, cls, reason if failed else None, outcome.node, ended,
                                      outcome.ran_from)
        self.store.finish_trial(rec.id, status, values, reason, log_tail, info=info,
                                observations=outcome.observations, reader_state=outcome.reader_state,
                                failure_class=cls.value if cls else None, attempts=attempts or None,
                                ended_at=ended)
        failpoints.hit("after_finish_trial")
        if rec.attempts and rec.attempts[-1].get("ended_at") is None and attempts:
            self.ledger.attempt_ended(attempts[-1])
        self.ledger.move(was, status)
        if status == TrialStatus.FAILED:
            self.ledger.failed(cls.value if cls else None, reason)
        if self.stopper is not None:
            if status == TrialStatus.COMPLETED:
                assert values is not None
                self.stopper.complete(rec.index, values)
            else:
                self.stopper.forget(rec.index)
        if status == TrialStatus.COMPLETED:
            assert values is not None
            end = ended.replace(tzinfo=timezone.utc).timestamp()
            cost = outcome.device_seconds if outcome.device_seconds is not None else \
                attempts_usage(status, attempts or [], end).cost
            self.gen.complete(rec.index, values, cost)
            seconds = end - started if rec.started_at is not None else None
            self.ledger.complete(rec.index, values, seconds)
            self._messages.note(f"trial {rec.index} completed: " + fmt_values(values, self.spec.objectives))
        elif status == TrialStatus.FAILED:
            self.gen.fail(rec.index, reason)
            self._messages.note(f"trial {rec.index} failed: {reason}")
        elif status == TrialStatus.EARLY_STOPPED:
            self.gen.early_stop(rec.index, outcome.stopped_values)
            self._messages.note(f"trial {rec.index} {reason}")
        else:
            self.gen.abandon(rec.index)

    def judge(self, running: Mapping[int, RunningTrial], now: float, early: bool
              ) -> Iterator[tuple[int, Outcome, float]]:
        """The running trials to end now, one at a time (each is ended before the next is
        judged), with the trial time their end saves: with `early`, those early stopping
        finds cannot reach the Pareto front (nasctl/orchestration/early_stopping.py), then
        those past `budget.trial_timeout`. Each one's job is cancelled first.

        An early stop is recorded as an event first (with the step, the dominating
        trials and the estimated time saved), then the job is cancelled and the trial
        ends EARLY_STOPPED with its partial values; its curves stay in the store. A
        crash in between leaves it RUNNING, and the resumed loop judges it again from
        the same stored curves.
        """
        if early and self.stopper is not None:
            for index, run in list(running.items()):
                ran = run.running_for(now)
                decision = self.stopper.judge(index, ran) if ran is not None else None
                if decision is None:
                    continue
                self.store.add_event(self.exp.id, EARLY_STOPPED_EVENT, f"trial {index} {decision.reason}",
                                     trial_index=index, data=decision.event_data())
                self.cancel(run)
                values, _ = metric_values(self.spec, run.summary)
                yield index, Outcome(TrialStatus.EARLY_STOPPED, decision.reason, values,
                                     stopped_values=decision.projected), decision.seconds_saved
        limit = self.spec.budget.trial_timeout
        if limit is None:
            return
        for index, run in list(running.items()):
            ran = run.running_for(now)
            if ran is not None and ran > limit:
                self.cancel(run)
                yield index, Outcome(TrialStatus.FAILED, f"timed out after {limit:g}s of running "
                                     "(budget.trial_timeout)", failure_class=FailureClass.TIMEOUT), 0.0

    def cancel_ignored(self, index: int) -> None:
        """A cancel request for a trial that is no longer running or waiting: say so in the audit trail."""
        try:
            why = f"it had already ended {self.store.get_trial(self.exp.id, index).status.value}"
        except NotFoundError:
            why = "no such trial"
        self.store.add_event(self.exp.id, CANCEL_IGNORED_EVENT, f"cancel of trial {index} ignored: {why}",
                             trial_index=index)

    def cancel(self, run: RunningTrial) -> None:
        """Cancel a trial's job; a runner error becomes a warning event (the trial ends anyway)."""
        self.cancel_job(run.job, run.index)

    def cancel_job(self, job: SubmittedJob, index: int) -> None:
        """Cancel a job (idempotent); a runner error becomes a warning event."""
        try:
            self.runner.cancel(job)
        except RunnerError as e:
            self.store.add_event(self.exp.id, "warning", str(e), trial_index=index)
