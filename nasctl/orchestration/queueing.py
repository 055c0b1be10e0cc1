"""What the loop learns from each poll of its jobs: their ends, and before they end,
whether they wait or run, their restarts and their GPU time.

A cluster's job may wait in the scheduler's queue before it runs, and go back to
it (a requeue after a preemption or a node failure). Each poll's answer for a job
that has not ended is kept on its attempt (nasctl/orchestration/attempts.py,
`observe`); a restart is an event and a line of the live display that says
whether the trial resumes from its checkpoint or starts over. The device time of
the running attempts is counted for `budget.max_gpu_hours` (the ledger decides).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from nasctl.errors import MetricsError
from nasctl.orchestration.context import RunContext
from nasctl.orchestration import attempts as attempts_mod
from nasctl.orchestration.early_stopping import EarlyStopper
from nasctl.orchestration.fidelity import checkpoint_of
from nasctl.orchestration.jobs import trial_dir
from nasctl.orchestration.outcomes import Outcome, TrialOutcomes
from nasctl.orchestration.running import RunningTrial, job_end
from nasctl.orchestration.usage import attempt_usage
from nasctl.runners.base import JobStatus
from nasctl.types import FailureClass, TrialStatus


class JobWatch:
    """Reads the polls of one experiment's jobs.

    Args:
        ctx: the run's context (attempts and events go to its store; its runner says
            whether jobs can wait in a queue, `Runner.queues`; its ledger counts the
            device time, budget.max_gpu_hours).
    """

    def __init__(self, ctx: RunContext) -> None:
        self.store, self.exp, self.runner, self.ledger, self.messages = (ctx.store, ctx.exp, ctx.runner, ctx.ledger,
                                                                         ctx.messages)
        self.clock = ctx.clock  # what a poll's times are on
        self._said_spent = False  # budget.max_gpu_hours spent, and said so

    def read(self, statuses: Mapping[str, JobStatus], running: Mapping[int, RunningTrial], now: float,
             lost_after: float, outcomes: TrialOutcomes) -> list[tuple[int, Outcome]]:
        """One poll's answers: the trials whose jobs ended, with their outcomes (in the
        order of `running`); what the others' answers say is kept on their attempts."""
        ended = []
        for index, run in list(running.items()):
            status = statuses.get(run.job.handle)
            end = job_end(run, status, now, lost_after)
            if end is None:
                if status is not None:
                    self.follow(run, status)
                continue
            outcome = outcomes.result(run, end.node) if end.succeeded else Outcome(
                TrialStatus.FAILED, end.reason, failure_class=end.failure_class, node=end.node)
            ended.append((index, dataclasses.replace(outcome, ended_at=end.ended_at, ran_from=end.ran_from,
                                                     device_seconds=end.device_seconds)))
        return ended

    def read_metrics(self, running: Mapping[int, RunningTrial], stopper: EarlyStopper | None,
                     outcomes: TrialOutcomes) -> list[tuple[int, Outcome]]:
        """Read what the running trials logged since the last read, store it and show it to
        early stopping; returns the trials whose logs are corrupt (their jobs cancelled),
        with their outcomes."""
        broken = []
        for index, run in list(running.items()):
            try:
                new = run.read_new()
            except MetricsError as e:
                outcomes.cancel(run)
                broken.append((index, Outcome(TrialStatus.FAILED, str(e), failure_class=FailureClass.USER)))
                continue
            if new:
                self.store.add_observations(run.trial.id, new, reader_state=run.reader_state)
                if stopper is not None:
                    stopper.observe(index, new)
        return broken

    def follow(self, run: RunningTrial, status: JobStatus) -> None:
        """Keep what a poll says of a job that has not ended on its attempt: queued (with
        the scheduler's reason) or running (since when), and restarts. A local job runs
        at once: its PENDING is its start, not a wait."""
        if not run.trial.attempts or not self.runner.queues:
            return
        last = run.trial.attempts[-1]
        ckpt = checkpoint_of(run.trial.log_dir or trial_dir(self.exp.work_dir, run.index)) \
            if last.get("running_since") is not None else None
        attempt, restart = attempts_mod.observe(last, status, self.clock.time(), ckpt)
        if attempt is last:
            return
        run.trial = self.store.set_attempts(run.trial.id, [*run.trial.attempts[:-1], attempt])
        if restart is not None:
            message = attempts_mod.restart_message(run.index, attempt, restart, self.runner.scheduler)
            self.store.add_event(self.exp.id, attempts_mod.RESTART_EVENT, message, trial_index=run.index,
                                 data=restart)
            self.messages.note(message)
            return
        change = attempts_mod.queue_change(run.index, last, attempt, self.runner.scheduler)
        if change is not None:  # an event, so that the dashboard's live pages see it
            self.store.add_event(self.exp.id, attempts_mod.QUEUE_EVENT, change, trial_index=run.index)

    def count_gpu_time(self, running: Iterable[RunningTrial]) -> None:
        """The device time of the running attempts, for budget.max_gpu_hours (said once when it is spent)."""
        now = self.clock.time()
        runs = list(running)
        self.ledger.running_gpu_seconds = sum(attempt_usage(r.trial.attempts[-1], now).gpu_s
                                              for r in runs if r.trial.attempts)
        # said once, whichever way the budget was spent: by running attempts, or by an
        # attempt that ended between two ticks (then it is already spent at this tick)
        if self.ledger.gpu_exhausted and not self._said_spent:
            self._said_spent = True
            self.messages.note(f"budget.max_gpu_hours={self.ledger.spec.budget.max_gpu_hours:g} spent "
                               f"({self.ledger.gpu_hours:.2f} GPU-hours): no new trial starts; "
                               f"{len(runs)} running trials finish")

    @staticmethod
    def waiting(running: Mapping[int, RunningTrial], now: float) -> list[int]:
        """The running trials whose jobs wait in the scheduler's queue (none of them runs)."""
        return [index for index, run in running.items() if run.running_for(now) is None]
