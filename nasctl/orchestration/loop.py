"""The scheduler loop: propose -> record -> submit -> poll -> collect -> learn.

Write-ahead: a proposal is recorded as a CANDIDATE trial before it is
submitted, and its job handle right after submission (nasctl/orchestration/
proposals.py, launch.py). Job names and trial directories are deterministic
(`<experiment>-<index>`), so a restarted loop can tell "recorded but never
submitted" from "submitted but not recorded" (`Runner.find`). Everything the
loop knows is in the store, so `run` on an experiment that already has trials
resumes it (resume.py): finished trials are kept, running ones re-attached,
recorded candidates submitted (once).

The `Orchestrator` drives; its collaborators own the rest: the trial ledger
(counts, results, budget), the proposals (the optimizer's thread, look-ahead),
the launcher (requests, devices, submission), the running trials' rules
(running.py) and early stopping. Trial failures (non-zero exit, missing or NaN
metric, corrupt log, timeout) make the trial FAILED with its reason and log
tail; the experiment ends FAILED once `budget.max_failures` is exceeded. With
`early_stopping` in the spec, running trials are judged on their curves after
every metrics read and hopeless ones end EARLY_STOPPED. With
`optimizer.fidelity`, the candidates include promotions (recorded with
`promoted_from` before they start, launched with the checkpoint of the trial
they continue), and the front is made of top-rung results.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import traceback
from collections import deque

from nasctl.errors import SchedulerUnreachable
from nasctl.leases import LEASE_STALE_SECONDS, owner_alive, owner_id
from nasctl.orchestration.early_stopping import EarlyStopper
from nasctl.orchestration.generator import CandidateGenerator, GeneratorFailed
from nasctl.orchestration.launch import CannotLaunch, TrialLauncher
from nasctl.orchestration.ledger import TrialLedger
from nasctl.orchestration.outcomes import Outcome, TrialOutcomes
from nasctl.orchestration.context import RunContext
from nasctl.orchestration.progress import Messages, Progress, ProgressSink, RunSummary
from nasctl.orchestration.proposals import Proposals
from nasctl.orchestration.reach import STATUS, SUBMIT, Reachability
from nasctl.orchestration.resume import Resumer
from nasctl.orchestration.running import RunningTrial, sleep_seconds
from nasctl.orchestration.queueing import JobWatch
from nasctl.runners.base import Runner
from nasctl.runners.polling import ControlSettings
from nasctl.spec import ExperimentSpec
from nasctl.store import Store, requests
from nasctl.types import ExperimentRecord, ExperimentStatus, FailureClass, TrialRecord, TrialStatus

HEARTBEAT_SECONDS = 5.0
REQUEST_POLL_SECONDS = 1.0
TICK_SECONDS = 1.0
"""The loop's longest pause: stop requests, proposals and metrics are looked at this
often even when the scheduler is polled less often (runner.cfg.poll_interval)."""
GENERATOR_JOIN_SECONDS = 120.0
"""How long a finishing run waits for a proposal in progress (2 s after a double Ctrl-C)."""
INTERRUPTED = "interrupted (Ctrl-C twice)"


class _Stop(Exception):
    """Leave the loop: `cancel` cancels running trials, otherwise they are left to a later resume."""

    def __init__(self, reason: str, cancel: bool) -> None:
        super().__init__(reason)
        self.reason, self.cancel = reason, cancel


class Orchestrator:
    """Drives one experiment until its budget is spent, it fails, or it is stopped.

    Resumes from whatever the store holds for the experiment (nothing, for a new one).

    Args:
        store: the database (source of truth).
        experiment: the experiment record.
        spec: its spec.
        runner: where trials run.
        generator: proposes candidates on its own thread (not yet started); for a
            resumed experiment its optimizer must be restored from the same trials.
        poll_interval: seconds between status queries (overrides `settings`).
        settings: the timing toward the scheduler (runner.cfg: poll_interval,
            lost_after, unreachable_timeout); default: the runner's own poll interval.
        metrics_interval: seconds between incremental reads of running trials' logs.
        on_progress: receives a `Progress` snapshot after every tick.
        lookahead: candidates kept ready beyond the free slots, once a trial has
            completed; None for the adaptive rule (nasctl/orchestration/proposals.py).
    """

    def __init__(self, store: Store, experiment: ExperimentRecord, spec: ExperimentSpec, runner: Runner,
                 generator: CandidateGenerator, *, poll_interval: float | None = None, metrics_interval: float = 2.0,
                 on_progress: ProgressSink | None = None, lookahead: int | None = None,
                 settings: ControlSettings | None = None) -> None:
        self.store, self.exp, self.spec, self.runner, self.gen = store, experiment, spec, runner, generator
        settings = settings or ControlSettings(runner.poll_interval)
        self.settings = settings if poll_interval is None else dataclasses.replace(settings, poll_interval=poll_interval)
        self.poll_interval, self.metrics_interval, self.on_progress = self.settings.poll_interval, metrics_interval, on_progress
        self.owner, self.clock = owner_id(), runner.clock()  # real time, or a simulating runner's
        self.messages = Messages()
        self.reach = Reachability(store, experiment, runner.scheduler, self.settings, self.messages)
        self.ledger = TrialLedger(spec)
        self._stopper = EarlyStopper(spec) if spec.early_stopping is not None else None
        self.ctx = RunContext(store, experiment, spec, runner, generator, self.ledger, self.messages, self._stopper,
                              self.owner, self.clock)
        self.proposals = Proposals(self.ctx, lookahead)
        self.outcomes = TrialOutcomes(self.ctx)
        self.jobs = JobWatch(self.ctx)
        self.launcher = TrialLauncher(self.ctx, self.outcomes, owner_alive)
        self._running: dict[int, RunningTrial] = {}
        self._ready: deque[TrialRecord] = deque()
        self._stop: _Stop | None = None
        self._stop_lock = threading.Lock()
        self._last_event_id = 0
        self._reattached, self._saved = 0, 0.0  # trials re-attached on resume; early stopping's seconds saved
        self._t0 = self.clock.monotonic()
        self._wake = threading.Event()  # set when a job ended, a proposal is ready or a stop was asked for
        self._notified = False  # the runner wakes the loop when a job ends (no fast polling needed)
        self._job_ended = threading.Event()  # set by such a runner: poll now

    # --- public ----------------------------------------------------------------
    def request_stop(self, reason: str = "stopped by user", cancel: bool = False) -> None:
        """Stop at the next loop step (safe from signal handlers and other threads)."""
        with self._stop_lock:
            if self._stop is None or (cancel and not self._stop.cancel):
                self._stop = _Stop(reason, cancel)
        self._wake.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop is not None

    @property
    def generation_seconds(self) -> list[float]:
        """Seconds of every proposal this loop has received (for the service's metrics)."""
        return list(self.proposals.seconds)

    def run(self) -> RunSummary:
        """Drive the experiment to its end; returns how it ended."""
        self._start()
        status, reason = ExperimentStatus.COMPLETED, None
        try:
            reason = self._loop()
            status = ExperimentStatus.COMPLETED if reason is None else ExperimentStatus.FAILED
            if self._ready:
                self._abandon_ready(reason or "budget reached")
        except _Stop as stop:
            status, reason = ExperimentStatus.STOPPED, stop.reason
            if stop.cancel:
                self._cancel_running("cancelled by `nasctl stop --cancel`")
                self._abandon_ready("experiment stopped")
        except KeyboardInterrupt:  # a second Ctrl-C: leave at once, trials stay re-attachable
            status, reason = ExperimentStatus.STOPPED, INTERRUPTED
        except GeneratorFailed as e:
            status, reason = ExperimentStatus.FAILED, str(e)
            self.store.add_event(self.exp.id, "error", str(e), data={"traceback": e.details})
            self._cancel_running("optimizer failed")
            self._abandon_ready("optimizer failed")
        except Exception as e:  # the loop's catch-all: record, clean up, re-raise
            status, reason = ExperimentStatus.FAILED, f"orchestrator error: {type(e).__name__}: {e}"
            try:
                self.store.add_event(self.exp.id, "error", reason, data={"traceback": traceback.format_exc()})
            finally:
                self._close(status, reason)
            raise
        self._close(status, reason)
        led = self.ledger
        return RunSummary(self.exp.name, status, reason, dict(led.counts), led.hypervolume, list(led.front),
                          self.clock.monotonic() - self._t0, list(self.proposals.seconds), self._reattached,
                          len(self._running), self._saved, list(self.proposals.cpu_seconds))

    # --- the loop ----------------------------------------------------------------
    def _start(self) -> None:
        self.store.acquire_lease(self.exp.id, self.owner, LEASE_STALE_SECONDS, owner_alive)
        events = self.store.events(self.exp.id, after_id=0, limit=1, newest=True)
        self._last_event_id = events[0].id if events else 0
        self.store.set_experiment_status(self.exp.id, ExperimentStatus.RUNNING)
        resumed = Resumer(self.ctx, self.launcher, self.outcomes).resume()
        self._running, self._ready = resumed.running, deque(resumed.queued)
        self._reattached, self._saved = len(resumed.running), resumed.seconds_saved
        self.proposals.start()
        self._notified = self.runner.notify_on_end(self._on_job_end)
        self.gen.wake = self._wake.set
        self.gen.start()

    def _on_job_end(self) -> None:
        self._job_ended.set()
        self._wake.set()

    def _loop(self) -> str | None:
        """Tick until nothing runs and the budget is spent or the run failed; returns why it failed."""
        failed: str | None = None
        last_metrics = last_beat = last_requests = last_status = 0.0
        pause = self.poll_interval
        while True:
            self._wake.clear()  # what happens from here on ends the pause below early
            now = self.clock.monotonic()
            if now - last_requests >= REQUEST_POLL_SECONDS:
                self._check_requests()
                last_requests = now
            if self._stop is not None:
                raise self._stop
            self._ready.extend(self.proposals.collect())
            changed = False
            if now - last_status >= pause or self._job_ended.is_set():
                self._job_ended.clear()
                changed, last_status = self._poll_jobs(), now
            read = now - last_metrics >= self.metrics_interval
            if read:
                for index, outcome in self.jobs.read_metrics(self._running, self._stopper, self.outcomes):
                    self._end_running(index, outcome)
                last_metrics = now
            self._judge_running(early=read)
            expired = self.reach.expired(self.clock.time())
            if expired is not None:
                self.reach.record_last_error()
                raise _Stop(expired, cancel=False)
            if failed is None:
                failed = self.ledger.failures_exceeded(self.exp.name)
                if failed is not None:
                    self.messages.note(failed)
                    if self.ledger.unschedulable:
                        self._cancel_queued("the experiment stopped: its jobs can never run")
            self.jobs.count_gpu_time(self._running.values())
            if failed is None:
                self._dispatch()
                self.proposals.request_more(len(self._running), len(self._ready))
            if now - last_beat >= HEARTBEAT_SECONDS:
                if not self.store.heartbeat(self.exp.id, self.owner):
                    raise _Stop("another orchestrator took over this experiment's lease", cancel=False)
                last_beat = now
            if changed:
                self.ledger.update_front()
            self._emit()
            if not self._running and (failed is not None or self._budget_spent()):
                return failed
            pause = sleep_seconds(self.poll_interval, self._notified, self.ledger.durations,
                                  (r.started for r in self._running.values()), self.clock.time())
            self.clock.wait(self._wake, min(pause, TICK_SECONDS, max(0.0, last_status + pause - self.clock.monotonic())),
                            busy=self.proposals.pending)

    def _budget_spent(self) -> bool:
        led = self.ledger  # with budget.max_gpu_hours spent, what waits to start is abandoned when the run ends
        return led.gpu_exhausted or ((not led.may_create or led.fidelity.exhausted) and not self._ready
                                     and not self.proposals.pending)

    def _close(self, status: ExperimentStatus, reason: str | None) -> None:
        self.gen.stop()
        self.launcher.stop_waiting(self._ready)
        if self._running:
            self.messages.note(f"{len(self._running)} trials left running; "
                               f"`nasctl resume {self.exp.name}` re-attaches them")
        try:
            self.store.set_experiment_status(self.exp.id, status, reason, owner=self.owner)  # unless taken over
            self.store.release_lease(self.exp.id, self.owner)
        finally:
            self.ledger.update_front()
            self._emit(done=True)
            self.runner.close()
            # a proposal in progress finishes first: seconds, unless the user is leaving (Ctrl-C twice)
            self.gen.join(GENERATOR_JOIN_SECONDS if reason != INTERRUPTED else 2.0)

    # --- steps -------------------------------------------------------------------
    def _check_requests(self) -> None:
        """Stop/cancel requests recorded in the store by `nasctl stop` or the dashboard."""
        for ev in requests.requests_after(self.store, self.exp.id, self._last_event_id):
            self._last_event_id = max(self._last_event_id, ev.event_id)
            if ev.kind == requests.STOP_REQUESTED:
                self.request_stop(f"stopped ({ev.reason})" if ev.reason else "stopped on request", ev.cancel)
            elif ev.trial_index is not None and ev.trial_index in self._running:
                self.outcomes.cancel(self._running[ev.trial_index])
                self._end_running(ev.trial_index, Outcome(TrialStatus.ABANDONED, "cancelled on request",
                                                          failure_class=FailureClass.CANCELLED))
            elif ev.trial_index is not None:
                queued = next((r for r in self._ready if r.index == ev.trial_index), None)
                if queued is not None:
                    self._ready.remove(queued)
                    self.launcher.waiting.discard(queued.index)
                    self.outcomes.finish(queued, TrialStatus.CANDIDATE, Outcome(TrialStatus.ABANDONED, "cancelled on request"))
                else:
                    self.outcomes.cancel_ignored(ev.trial_index)

    def _dispatch(self) -> None:
        """Launch queued candidates, in order, while slots (and devices) are free; while
        the scheduler refuses submissions for want of being reached, only after its pause."""
        free = self.spec.budget.parallelism - len(self._running)
        if not self._ready or free <= 0 or self.ledger.gpu_exhausted or not self.reach.may_submit(self.clock.time()):
            return
        try:
            launched, unreachable = self.launcher.launch_ready(self._ready, free)
        except CannotLaunch as e:  # every trial would fail: stop, candidates stay recorded for resume
            raise _Stop(str(e), cancel=False) from None
        for run in launched:
            self._running[run.index] = run
            if self._stopper is not None:
                self._stopper.track(run.index, run.trial.parameters)
        if unreachable is not None:
            self.reach.failed(SUBMIT, unreachable, self.clock.time())
        elif launched:
            self.reach.answered(SUBMIT, self.clock.time())

    def _poll_jobs(self) -> bool:
        """One status query for every running job; act on those that ended. A scheduler
        that cannot be reached leaves them all running (nasctl/orchestration/reach.py)."""
        if not self._running:
            self.reach.answered(STATUS, self.clock.time(), needed=False)
            return False
        try:
            statuses = self.runner.status([r.job for r in self._running.values()])
        except SchedulerUnreachable as e:
            self.reach.failed(STATUS, e, self.clock.time())
            return False
        now = self.clock.time()
        self.reach.answered(STATUS, now)
        ended = self.jobs.read(statuses, self._running, now, self.settings.lost_after, self.outcomes)
        for index, outcome in ended:
            self._end_running(index, outcome)
        return bool(ended)


    def _judge_running(self, early: bool) -> None:
        """Early stopping (`early`: after a metrics read) and `budget.trial_timeout`: both end
        running trials and cancel their jobs, so both wait while the scheduler is unreachable."""
        if self.reach.waiting:
            return
        for index, outcome, saved in self.outcomes.judge(self._running, self.clock.time(), early):
            self._saved += saved
            self._end_running(index, outcome)

    # --- ending trials -----------------------------------------------------------
    def _end_running(self, index: int, outcome: Outcome) -> None:
        again = self.outcomes.end_running(self._running.pop(index), outcome)
        if again is not None:  # retried: its next attempt starts before any new trial
            self._ready.appendleft(again)

    def _cancel_queued(self, why: str) -> None:
        """Cancel the jobs that wait in the queue: nothing is left queued when the jobs can never run."""
        for index in self.jobs.waiting(self._running, self.clock.time()):
            self.outcomes.cancel(self._running[index])
            self._end_running(index, Outcome(TrialStatus.ABANDONED, why, failure_class=FailureClass.CANCELLED))
    def _cancel_running(self, why: str) -> None:
        for index, run in list(self._running.items()):
            self.outcomes.cancel(run)
            self._end_running(index, Outcome(TrialStatus.ABANDONED, why, failure_class=FailureClass.CANCELLED))

    def _abandon_ready(self, why: str) -> None:
        while self._ready:
            self.outcomes.finish(self._ready.popleft(), TrialStatus.CANDIDATE, Outcome(TrialStatus.ABANDONED, why))

    def _emit(self, done: bool = False) -> None:
        if self.on_progress is None:
            return
        led, props = self.ledger, self.proposals
        self.on_progress(Progress(
            experiment=self.exp.name, max_trials=self.spec.budget.max_trials,
            parallelism=self.spec.budget.parallelism, counts=dict(led.counts), hypervolume=led.hypervolume,
            front=led.front_values(), generating=props.pending, generating_seconds=self.gen.busy_seconds,
            elapsed=self.clock.monotonic() - self._t0,
            last_generation_seconds=props.seconds[-1] if props.seconds else None,
            messages=self.messages.recent(), done=done, waiting_for_devices=len(self.launcher.waiting),
            scheduler=self.runner.scheduler, unreachable_since=self.reach.since,
            queued=len(self.jobs.waiting(self._running, self.clock.time())),
            gpu_hours=led.gpu_hours, max_gpu_hours=self.spec.budget.max_gpu_hours,
        ))


def install_signal_handlers(orch: Orchestrator) -> None:
    """Ctrl-C or SIGTERM stops the loop at its next step and leaves running trials
    running, recorded, for `nasctl resume` to re-attach; a second Ctrl-C leaves at once."""
    def _handler(signum: int, _frame: object) -> None:
        if orch.stop_requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        orch.request_stop(f"stopped by {name}")

    signal.signal(signal.SIGINT, _handler)
    signal.signal(signal.SIGTERM, _handler)
