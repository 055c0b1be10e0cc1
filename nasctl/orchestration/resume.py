"""Resume: rebuild a loop's state from what the store holds for an experiment.

Finished trials are counted (and fed to early stopping), RUNNING ones are
re-attached to their jobs (keeping their devices), and recorded CANDIDATEs are
either found already submitted before a crash (`Runner.find`, by the job's
deterministic name) and re-attached, or queued to be submitted once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nasctl.errors import SchedulerUnreachable
from nasctl.leases import utcnow
from nasctl.orchestration.context import RunContext
from nasctl.orchestration import attempts as attempts_mod
from nasctl.orchestration.early_stopping import EARLY_STOPPED_EVENT, seconds_saved, stop_records
from nasctl.orchestration.launch import TrialLauncher
from nasctl.orchestration.outcomes import TrialOutcomes
from nasctl.orchestration.running import RunningTrial
from nasctl.runners.base import SubmittedJob
from nasctl.types import TrialRecord, TrialStatus


@dataclass
class Resumed:
    """What a resumed loop starts from."""

    running: dict[int, RunningTrial] = field(default_factory=dict)
    queued: list[TrialRecord] = field(default_factory=list)
    seconds_saved: float = 0.0  # by the early stops recorded so far


class Resumer:
    """Reads an experiment's trials back into a ledger, re-attaching and queueing.

    Args:
        ctx: the run's context (its runner is asked for jobs submitted before a crash,
            its ledger filled here, its early stopping fed the stored curves, its
            owner adopts the trials' devices).
        launcher: builds the request a recorded candidate's job was submitted with.
        outcomes: finishes a retry that was under way, and cancels ended attempts' jobs.
    """

    def __init__(self, ctx: RunContext, launcher: TrialLauncher, outcomes: TrialOutcomes) -> None:
        self.store, self.exp, self.runner, self.launcher = ctx.store, ctx.exp, ctx.runner, launcher
        self.ledger, self.stopper, self.owner, self._messages = ctx.ledger, ctx.stopper, ctx.owner, ctx.messages
        self.outcomes = outcomes

    def resume(self) -> Resumed:
        out = Resumed()
        stopped = []
        for t in self.store.list_trials(self.exp.id):
            self.ledger.load(t)
            if t.status.is_terminal:
                if t.status == TrialStatus.COMPLETED:
                    self._feed_stopper(t)
                elif t.status == TrialStatus.EARLY_STOPPED:
                    stopped.append(t.index)
            elif t.status == TrialStatus.RUNNING and attempts_mod.retrying(t):
                self._finish_retry(out, t)
            elif t.status == TrialStatus.RUNNING:
                if t.devices:
                    self.store.adopt_devices(self.exp.id, t.index, self.owner)  # the trial keeps its devices
                self._attach(out, t, SubmittedJob(t.job_handle or "", dict(t.runner_metadata)))
            else:
                self._candidate(out, t)
        if stopped:
            events = self.store.events(self.exp.id, limit=1_000_000, kinds=[EARLY_STOPPED_EVENT])
            out.seconds_saved = seconds_saved(stop_records(events, stopped))
        self.ledger.update_front()
        if self.ledger.created:
            self.store.add_event(
                self.exp.id, "resumed",
                f"resumed with {self.ledger.created} trials: {len(out.running)} re-attached, "
                f"{len(out.queued)} recorded candidates to submit",
            )
        return out

    def _feed_stopper(self, t: TrialRecord) -> None:
        if self.stopper is None:
            return
        self.stopper.track(t.index, t.parameters)
        wanted = self.stopper.curve_metrics
        obs = self.store.observations(t.id, wanted[0] if len(wanted) == 1 else None)
        self.stopper.observe(t.index, [o for o in obs if o.metric in wanted])
        self.stopper.complete(t.index, t.values)

    def _finish_retry(self, out: Resumed, t: TrialRecord) -> None:
        """A RUNNING trial whose last attempt had ended: the loop stopped in the middle
        of retrying it. Its job is cancelled (again) and it is queued for its next attempt."""
        self.ledger.move(None, TrialStatus.RUNNING)
        job = attempts_mod.last_job(t) or SubmittedJob(t.job_handle or "", dict(t.runner_metadata))
        out.queued.append(self.outcomes.retry(t, job, t.attempts))

    def _candidate(self, out: Resumed, t: TrialRecord) -> None:
        """A recorded CANDIDATE: submitted before a crash, or not? (A retried trial's
        ended attempt has its job cancelled again first: cancelling is idempotent.)"""
        last = attempts_mod.last_job(t)
        if last is not None:
            self.outcomes.cancel_job(last, t.index)
        request = self.launcher.request(t)
        try:
            found = self.runner.find(request)
        except SchedulerUnreachable:  # cannot tell now: queued, and looked for again before it is submitted
            self.launcher.uncertain.add(t.index)
            found = None
        if found is None:
            if request.gpu:
                self.store.release_devices(self.exp.id, t.index)  # leased, never launched
            self.ledger.move(None, TrialStatus.CANDIDATE)
            out.queued.append(t)
            return
        devices = self.store.adopt_devices(self.exp.id, t.index, self.owner) if request.gpu else []
        if request.gpu and not devices and found.metadata.get("devices"):
            # its lease was reclaimed once its job ended; the job says where it ran
            devices = str(found.metadata["devices"]).split(",")
        t = self.store.mark_trial_running(t.id, found.handle, self.runner.scheduler, found.metadata,
                                          devices=devices or None,
                                          attempts=attempts_mod.started(t.attempts, found, utcnow()))
        self._attach(out, t, found)
        self._messages.note(f"trial {t.index} was submitted before a crash: re-attached to {found.handle}")

    def _attach(self, out: Resumed, t: TrialRecord, job: SubmittedJob) -> None:
        out.running[t.index] = RunningTrial.attached(t, job, self.exp.work_dir, self.store.reader_state(t.id))
        self.ledger.move(None, TrialStatus.RUNNING)
        if self.stopper is not None:
            self.stopper.track(t.index, t.parameters)
            self.stopper.observe(t.index, self.store.observations(t.id))
