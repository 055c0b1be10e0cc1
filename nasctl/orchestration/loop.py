"""The scheduler loop: propose -> record -> submit -> poll -> collect -> learn.

Write-ahead: a proposal is recorded as a CANDIDATE trial before it is
submitted, and its job handle right after submission. Job names and trial
directories are deterministic (`<experiment>-<index>`), so a restarted loop
can tell "recorded but never submitted" from "submitted but not recorded"
(`Runner.find`). Everything the loop knows is in the store, so `run` on an
experiment that already has trials resumes it: finished trials are kept,
running ones re-attached, recorded candidates submitted (once).

Candidate generation runs on the generator's worker thread, so this loop keeps
polling and dispatching while the model fits. With more than one worker the
loop keeps candidates generated ahead of the free slots, so a slot that frees
is refilled in the same tick instead of waiting for a model fit; an ahead
candidate was chosen with every running trial as a pending point, and the
next one is asked for right after, with the finished trial's result. How many
it keeps ahead covers the slots expected to free while the next proposal is
computed: one while proposals are quick next to trials, more (up to
`parallelism`, asked for in one batch) when they are not. Trial failures (non-zero exit,
missing or NaN metric, corrupt log, timeout) make the trial FAILED with its
reason and log tail; the experiment ends FAILED once `budget.max_failures` is
exceeded. With `early_stopping` in the spec, running trials are judged on their
curves after every metrics read and hopeless ones end EARLY_STOPPED. With
`optimizer.fidelity`, the optimizer's candidates include promotions (recorded
with `promoted_from` before they start, and launched with the checkpoint of
the trial they continue; nasctl/orchestration/fidelity.py), and the front is
made of top-rung results.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import signal
import socket
import statistics
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timezone
from typing import Any

from nasctl.errors import MetricsError, NotFoundError, RunnerError, SpecError
from nasctl.metrics import TRIAL_INFO_FILE, MetricSummary
from nasctl.metrics.tensorboard import TensorBoardReader
from nasctl.orchestration import failpoints
from nasctl.orchestration.devices import DevicePlacer
from nasctl.orchestration.early_stopping import (
    EARLY_STOPPED_EVENT,
    EarlyStopper,
    seconds_saved,
    stop_records,
)
from nasctl.orchestration.fidelity import checkpoint_of, trial_fidelity
from nasctl.orchestration.generator import CandidateGenerator, GeneratorFailed
from nasctl.orchestration.jobs import build_request, job_name, trial_dir
from nasctl.optimizer.ax_optimizer import Candidate
from nasctl.pareto import compute_front
from nasctl.runners.base import JobRequest, JobState, Runner, SubmittedJob
from nasctl.runners.devices import visible_devices_env
from nasctl.spec import ExperimentSpec
from nasctl.store import Store, queries
from nasctl.store.store import utcnow
from nasctl.types import ExperimentRecord, ExperimentStatus, Observation, TrialRecord, TrialStatus

LOG_TAIL_LINES = 40
LEASE_STALE_SECONDS = 30.0
HEARTBEAT_SECONDS = 5.0
REQUEST_POLL_SECONDS = 1.0
MAX_TRIAL_INFO_BYTES = 64_000
MIN_FREE_BYTES = 16 * 2**20
"""Below this much free space in the work directory, no trial is started (its logs and
TensorBoard files would not fit) and a failed trial's reason says the disk is full."""
CANCEL_IGNORED_EVENT = "cancel_ignored"
"""Event kind: a cancel request came for a trial that had already ended."""


def owner_id() -> str:
    """This process as a lease owner: host, pid and process start time (pids are reused)."""
    import psutil

    return f"{socket.gethostname()}:{os.getpid()}:{psutil.Process().create_time():.3f}"


def owner_alive(owner: str) -> bool | None:
    """True/False for an owner on this host; None when it cannot be checked from here."""
    import psutil

    host, _, rest = owner.partition(":")
    pid_s, _, created = rest.partition(":")
    if host != socket.gethostname() or not pid_s.isdigit():
        return None
    try:
        proc = psutil.Process(int(pid_s))
        return proc.status() != psutil.STATUS_ZOMBIE and (not created or abs(proc.create_time() - float(created)) < 0.01)
    except (psutil.Error, ValueError):
        return False


def read_trial_info(log_dir: str) -> tuple[dict[str, Any] | None, str | None]:
    """The trial's `trial_info.json` (device, precision, versions, ...), if it wrote one.

    Returns (info, problem): info is None when the file is absent or unusable;
    problem says why it was unusable (for a warning event), None otherwise.
    """
    path = os.path.join(log_dir, TRIAL_INFO_FILE)
    try:
        size = os.path.getsize(path)
    except OSError:
        return None, None
    if size > MAX_TRIAL_INFO_BYTES:
        return None, f"{path} is {size} bytes, more than {MAX_TRIAL_INFO_BYTES}; not stored"
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f, parse_constant=lambda c: None)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return None, f"{path} is not valid JSON ({e}); not stored"
    if not isinstance(info, dict):
        return None, f"{path} holds a {type(info).__name__}, not a JSON object; not stored"
    return info, None


@dataclass
class _Running:
    trial: TrialRecord
    job: SubmittedJob
    reader: TensorBoardReader
    summary: MetricSummary
    started: float  # epoch seconds, from the store, so timeouts survive restarts
    unknown_polls: int = 0


@dataclass
class Progress:
    """A snapshot for progress displays (the loop never prints)."""

    experiment: str
    max_trials: int
    parallelism: int
    counts: dict[str, int]
    hypervolume: float
    front: list[tuple[int, dict[str, float]]]
    generating: bool
    generating_seconds: float
    elapsed: float
    last_generation_seconds: float | None
    messages: list[str] = field(default_factory=list)
    done: bool = False
    waiting_for_devices: int = 0  # candidates waiting for free GPUs


@dataclass(frozen=True)
class RunSummary:
    experiment: str
    status: ExperimentStatus
    reason: str | None
    counts: dict[str, int]
    hypervolume: float
    front: list[int]
    elapsed: float
    generation_seconds: list[float]
    reattached: int = 0
    left_running: int = 0
    seconds_saved: float = 0.0  # estimated trial time saved by early stopping (whole experiment)
    generation_cpu_seconds: list[float] = field(default_factory=list)


class _Stop(Exception):
    """Leave the loop: `cancel` cancels running trials, otherwise they are left to a later resume."""

    def __init__(self, reason: str, cancel: bool) -> None:
        super().__init__(reason)
        self.reason, self.cancel = reason, cancel


FAST_POLL_SECONDS = 0.05
"""Poll interval while a running trial is near its expected end."""

GENERATOR_JOIN_SECONDS = 120.0
"""How long a finishing run waits for a proposal in progress (2 s after a double Ctrl-C)."""

INTERRUPTED = "interrupted (Ctrl-C twice)"

DUE_FRACTION = 0.8
"""A running trial is near its end once it has run this share of the median trial."""


def _epoch(t: TrialRecord) -> float:
    ts = t.started_at or t.created_at
    return ts.replace(tzinfo=timezone.utc).timestamp()


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
        poll_interval: seconds between polls when nothing happens.
        metrics_interval: seconds between incremental reads of running trials' logs.
        on_progress: called with a `Progress` snapshot after every tick.
        lookahead: candidates kept ready beyond the free slots, once a trial has
            completed. Default (None) with `budget.parallelism` > 1: enough to
            cover the slots expected to free during the next proposal,
            ceil(last proposal's seconds x parallelism / median trial seconds),
            between 1 and `parallelism`. With one worker it is 0: every proposal
            should see the result of the trial before it (sequential
            optimisation), and a look-ahead candidate never would.
    """

    def __init__(
        self,
        store: Store,
        experiment: ExperimentRecord,
        spec: ExperimentSpec,
        runner: Runner,
        generator: CandidateGenerator,
        *,
        poll_interval: float = 0.25,
        metrics_interval: float = 2.0,
        on_progress: Callable[[Progress], None] | None = None,
        lookahead: int | None = None,
    ) -> None:
        self.store = store
        self.exp = experiment
        self.spec = spec
        self.runner = runner
        self.gen = generator
        self.poll_interval = poll_interval
        self.metrics_interval = metrics_interval
        self.on_progress = on_progress
        self.lookahead = lookahead
        self._durations: deque[float] = deque(maxlen=10)  # seconds of the last completed trials
        self.owner = owner_id()
        self._running: dict[int, _Running] = {}
        self._ready: deque[TrialRecord] = deque()
        self._counts: dict[str, int] = {s.value: 0 for s in TrialStatus}
        self._created = 0
        self._completed: list[tuple[int, dict[str, float]]] = []
        self._front: list[int] = []
        self._hv = 0.0
        self._gen_times: list[float] = []
        self._gen_cpu: list[float] = []
        self._log_scale: tuple[str, ...] = ()  # objectives the optimizer's model has on the log scale
        self._messages: deque[str] = deque(maxlen=6)
        self._stop: _Stop | None = None
        self._stop_lock = threading.Lock()
        self._last_event_id = 0
        self._reattached = 0
        self._t0 = time.monotonic()
        self._stopper = EarlyStopper(spec) if spec.early_stopping is not None else None
        self._saved = 0.0
        self._placer: DevicePlacer | None = None  # created by the first trial that asks for a GPU
        self._waiting: set[int] = set()  # candidates marked as waiting for devices
        self._wake = threading.Event()  # set when a job ended, a proposal is ready or a stop was asked for
        self._notified = False  # the runner wakes the loop when a job ends (no fast polling needed)
        self._fidelity: dict[int, float] = {}  # every recorded trial's fidelity (optimizer.fidelity)
        self._spent_fidelity = 0.0  # what the recorded trials spend of budget.max_fidelity
        self._fidelity_exhausted = False  # the next candidate did not fit budget.max_fidelity

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
        return list(self._gen_times)

    def run(self) -> RunSummary:
        self.store.acquire_lease(self.exp.id, self.owner, LEASE_STALE_SECONDS, owner_alive)
        events = self.store.events(self.exp.id, after_id=0, limit=1, newest=True)
        self._last_event_id = events[0].id if events else 0
        self.store.set_experiment_status(self.exp.id, ExperimentStatus.RUNNING)
        self._load_existing()
        self._log_scale = tuple(queries.log_scale_metrics(self.store, self.exp.id))
        self._notified = self.runner.notify_on_end(self._wake.set)
        self.gen.wake = self._wake.set
        self.gen.start()
        status, reason = ExperimentStatus.COMPLETED, None
        last_metrics = last_beat = last_requests = 0.0
        try:
            while True:
                self._wake.clear()  # what happens from here on ends the pause below early
                now = time.monotonic()
                if now - last_requests >= REQUEST_POLL_SECONDS:
                    self._check_requests()
                    last_requests = now
                if self._stop is not None:
                    raise self._stop
                self._collect_proposals()
                changed = self._poll_jobs()
                if now - last_metrics >= self.metrics_interval:
                    self._read_running_metrics()
                    self._early_stop()
                    last_metrics = now
                self._enforce_timeouts()
                failures = self._counts[TrialStatus.FAILED.value]
                if failures > self.spec.budget.max_failures and reason is None:
                    status = ExperimentStatus.FAILED
                    reason = (
                        f"{failures} trials failed, more than budget.max_failures={self.spec.budget.max_failures}; "
                        f"see `nasctl trials {self.exp.name} --status FAILED`"
                    )
                    self._note(reason)
                if reason is None:
                    self._dispatch()
                    self._maybe_request()
                if now - last_beat >= HEARTBEAT_SECONDS:
                    if not self.store.heartbeat(self.exp.id, self.owner):
                        raise _Stop("another orchestrator took over this experiment's lease", cancel=False)
                    last_beat = now
                if changed:
                    self._update_front()
                self._emit()
                if not self._running and (reason is not None or self._budget_spent()):
                    break
                self._wake.wait(self._sleep_seconds())
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
        return RunSummary(
            self.exp.name, status, reason, dict(self._counts), self._hv, list(self._front),
            time.monotonic() - self._t0, list(self._gen_times), self._reattached, len(self._running),
            self._saved,
            list(self._gen_cpu),
        )

    def _close(self, status: ExperimentStatus, reason: str | None) -> None:
        self.gen.stop()
        for rec in self._ready:
            if rec.index in self._waiting:  # nobody waits for devices once the loop has ended
                self.store.set_device_wait(rec.id, None)
        self._waiting.clear()
        if self._running:
            self._note(f"{len(self._running)} trials left running; `nasctl resume {self.exp.name}` re-attaches them")
        try:
            self.store.set_experiment_status(self.exp.id, status, reason)
            self.store.release_lease(self.exp.id, self.owner)
        finally:
            self._update_front()
            self._emit(done=True)
            self.runner.close()
            # a proposal in progress finishes first: seconds, unless the user is leaving (Ctrl-C twice)
            self.gen.join(GENERATOR_JOIN_SECONDS if reason != INTERRUPTED else 2.0)

    # --- resume --------------------------------------------------------------------
    def _load_existing(self) -> None:
        stopped = []
        for t in self.store.list_trials(self.exp.id):
            self._created += 1
            self._charge(t.index, t.fidelity, t.promoted_from)
            if t.status.is_terminal:
                self._counts[t.status.value] += 1
                if t.status == TrialStatus.COMPLETED:
                    self._completed.append((t.index, dict(t.values)))
                    if self._stopper is not None:
                        self._stopper.track(t.index, t.parameters)
                        wanted = self._stopper.curve_metrics
                        obs = self.store.observations(t.id, wanted[0] if len(wanted) == 1 else None)
                        self._stopper.observe(t.index, [o for o in obs if o.metric in wanted])
                        self._stopper.complete(t.index, t.values)
                elif t.status == TrialStatus.EARLY_STOPPED:
                    stopped.append(t.index)
            elif t.status == TrialStatus.RUNNING:
                if t.devices:
                    self.store.adopt_devices(self.exp.id, t.index, self.owner)  # the trial keeps its devices
                self._attach_running(t, SubmittedJob(t.job_handle or "", dict(t.runner_metadata)))
            else:  # CANDIDATE: submitted before a crash, or not?
                request = self._request(t)
                found = self.runner.find(request)
                if found is not None:
                    devices = self.store.adopt_devices(self.exp.id, t.index, self.owner) if request.gpu else []
                    if request.gpu and not devices and found.metadata.get("devices"):
                        # its lease was reclaimed once its job ended; the job says where it ran
                        devices = str(found.metadata["devices"]).split(",")
                    t = self.store.mark_trial_running(t.id, found.handle, self.runner.scheduler, found.metadata,
                                                      devices=devices or None)
                    self._attach_running(t, found)
                    self._note(f"trial {t.index} was submitted before a crash: re-attached to {found.handle}")
                else:
                    if request.gpu:
                        self.store.release_devices(self.exp.id, t.index)  # leased, never launched
                    self._counts[TrialStatus.CANDIDATE.value] += 1
                    self._ready.append(t)
        if stopped:
            events = self.store.events(self.exp.id, limit=1_000_000, kinds=[EARLY_STOPPED_EVENT])
            self._saved = seconds_saved(stop_records(events, stopped))
        self._update_front()
        if self._created:
            self.store.add_event(
                self.exp.id, "resumed",
                f"resumed with {self._created} trials: {self._reattached} re-attached, "
                f"{len(self._ready)} recorded candidates to submit",
            )

    def _attach_running(self, t: TrialRecord, job: SubmittedJob) -> None:
        state = self.store.reader_state(t.id)
        tb = os.path.join(t.log_dir or trial_dir(self.exp.work_dir, t.index), "tb")
        self._running[t.index] = _Running(
            t, job, TensorBoardReader(tb, state), MetricSummary(state.get("summary")), _epoch(t)
        )
        self._counts[TrialStatus.RUNNING.value] += 1
        self._reattached += 1
        if self._stopper is not None:
            self._stopper.track(t.index, t.parameters)
            self._stopper.observe(t.index, self.store.observations(t.id))

    # --- steps -------------------------------------------------------------------
    def _check_requests(self) -> None:
        """Stop/cancel requests recorded in the store by `nasctl stop` or the dashboard."""
        for ev in queries.requests_after(self.store, self.exp.id, self._last_event_id):
            self._last_event_id = max(self._last_event_id, ev.event_id)
            if ev.kind == queries.STOP_REQUESTED:
                self.request_stop(f"stopped ({ev.reason})" if ev.reason else "stopped on request", ev.cancel)
            elif ev.trial_index is not None and ev.trial_index in self._running:
                run = self._running[ev.trial_index]
                self._cancel_quietly(run)
                self._end_running(ev.trial_index, TrialStatus.ABANDONED, "cancelled on request")
            elif ev.trial_index is not None:
                for rec in list(self._ready):
                    if rec.index == ev.trial_index:
                        self._ready.remove(rec)
                        self._waiting.discard(rec.index)
                        self._counts[TrialStatus.CANDIDATE.value] -= 1
                        self._finish(rec, TrialStatus.ABANDONED, reason="cancelled on request")
                        break
                else:
                    self._cancel_too_late(ev.trial_index)

    def _cancel_too_late(self, index: int) -> None:
        """A cancel request for a trial that is no longer running or waiting: say so in the audit trail."""
        try:
            why = f"it had already ended {self.store.get_trial(self.exp.id, index).status.value}"
        except NotFoundError:
            why = "no such trial"
        self.store.add_event(self.exp.id, CANCEL_IGNORED_EVENT, f"cancel of trial {index} ignored: {why}",
                             trial_index=index)

    def _budget_spent(self) -> bool:
        return (self._created >= self.spec.budget.max_trials or self._fidelity_exhausted) and not self._ready \
            and self.gen.pending_request is None

    def _fidelity_cost(self, fidelity: float | None, promoted_from: int | None) -> float:
        """What a trial spends of budget.max_fidelity: its fidelity, less that of the
        trial it continues for a promotion (which resumes that trial's checkpoint)."""
        if fidelity is None:
            return 0.0
        return fidelity - (self._fidelity.get(promoted_from, 0.0) if promoted_from is not None else 0.0)

    def _charge(self, index: int, fidelity: float | None, promoted_from: int | None) -> None:
        self._spent_fidelity += self._fidelity_cost(fidelity, promoted_from)
        if fidelity is not None:
            self._fidelity[index] = fidelity

    def _fits_fidelity_budget(self, fidelity: float | None, promoted_from: int | None) -> bool:
        budget = self.spec.budget.max_fidelity
        if self._fidelity_exhausted:
            return False
        if budget is None:
            return True
        cost = self._fidelity_cost(fidelity, promoted_from)
        if self._spent_fidelity + cost > budget + 1e-9:
            # the run ends here: a later candidate would get an index after this
            # abandoned one, and the store's indices must stay Ax's (no gaps)
            self._fidelity_exhausted = True
            msg = (f"budget.max_fidelity {budget:g}: {self._spent_fidelity:g} spent, the next trial would need "
                   f"{cost:g} more; no new trials")
            self.store.add_event(self.exp.id, "budget", msg)
            self._note(msg)
            return False
        return True

    def _collect_proposals(self) -> None:
        proposal = self.gen.poll()
        if proposal is None:
            return
        self._gen_times.append(proposal.seconds)
        self._gen_cpu.append(proposal.cpu_seconds)
        if proposal.log_scale is not None and proposal.log_scale != self._log_scale:
            self._log_scale_changed(proposal.log_scale)
        for cand in proposal.candidates:
            fidelity = trial_fidelity(self.spec, cand.parameters)
            if self._created >= self.spec.budget.max_trials or not self._fits_fidelity_budget(
                    fidelity, cand.promoted_from):
                self.gen.abandon(cand.index)
                continue
            tdir = trial_dir(self.exp.work_dir, cand.index)
            rec = self.store.add_trial(
                self.exp.id, cand.index, cand.parameters, cand.method, job_name(self.exp.name, cand.index), tdir,
                fidelity=fidelity, promoted_from=cand.promoted_from,
            )
            self._charge(cand.index, fidelity, cand.promoted_from)
            failpoints.hit("after_record_candidate")
            if cand.promoted_from is not None:
                failpoints.hit("after_record_promotion")
            self._created += 1
            self._counts[TrialStatus.CANDIDATE.value] += 1
            self._ready.append(rec)
        if proposal.candidates:
            self._note(describe_proposal(proposal.candidates, proposal.seconds))

    def _log_scale_changed(self, metrics: tuple[str, ...]) -> None:
        """Tell the user (event, live display) when the model's scale for an objective changes:
        its predictions, and so the proposals, then rank that objective by ratios."""
        on = [m for m in metrics if m not in self._log_scale]
        off = [m for m in self._log_scale if m not in metrics]
        by_metric = {m: [v[m] for _, v in self._completed if m in v] for m in metrics}
        parts = [f"{m} on the log scale (observed {min(by_metric[m]):.3g} to {max(by_metric[m]):.3g})"
                 if by_metric[m] else f"{m} on the log scale" for m in on]
        parts += [f"{m} back on its own scale" for m in off]
        msg = "optimizer: modelling " + "; ".join(parts)
        self.store.add_event(self.exp.id, queries.LOG_SCALE, msg, data={"metrics": list(metrics)})
        self._note(msg)
        self._log_scale = metrics

    def _maybe_request(self) -> None:
        if self.gen.pending_request is not None or self._fidelity_exhausted:
            return
        free = self.spec.budget.parallelism + self._ahead() - len(self._running) - len(self._ready)
        left = self.spec.budget.max_trials - self._created
        n = min(free, left)
        if n > 0:
            self.gen.request(n)

    def _ahead(self) -> int:
        """How many candidates to keep generated beyond the free slots."""
        par = self.spec.budget.parallelism
        if not self._completed:  # before the first result an extra candidate could only be quasi-random
            return 0
        if self.lookahead is not None:
            return self.lookahead
        if par == 1:
            return 0
        if not self._gen_times or not self._durations:
            return 1
        trial = statistics.median(self._durations)
        need = math.ceil(self._gen_times[-1] * par / max(trial, 1e-3))
        return max(1, min(par, need))

    def _sleep_seconds(self) -> float:
        """The pause before the next tick: `poll_interval`, shortened to
        FAST_POLL_SECONDS while a running trial is near its expected end (past
        DUE_FRACTION of the median trial), so that a freed slot is noticed and
        refilled within ~50 ms instead of half a poll interval on average. A
        status poll reads one small state file per trial. Not where the runner
        and the generator wake the loop themselves (`Runner.notify_on_end`):
        then the pause ends as soon as a job ends or a proposal is ready."""
        if self._running and self._durations and not self._notified:
            due = DUE_FRACTION * statistics.median(self._durations)
            now = time.time()
            if any(now - run.started >= due for run in self._running.values()):
                return min(self.poll_interval, FAST_POLL_SECONDS)
        return self.poll_interval

    def _disk_full(self) -> str | None:
        """What to say when the work directory has less than MIN_FREE_BYTES free, else None."""
        try:
            free = shutil.disk_usage(self.exp.work_dir).free
        except OSError:
            return None  # not there (yet): creating the trial's folder will say why
        if free >= MIN_FREE_BYTES:
            return None
        return f"the work directory {self.exp.work_dir} is full ({free / 2**20:.1f} MiB free, no space left on device)"

    def _dispatch(self) -> None:
        while self._ready and len(self._running) < self.spec.budget.parallelism:
            full = self._disk_full()
            if full is not None:  # every trial would fail: stop, candidates stay recorded for resume
                raise _Stop(f"{full}; free space, then `nasctl resume {self.exp.name}`", cancel=False)
            rec = self._ready[0]
            request = self._request(rec, note=rec.index not in self._waiting)
            try:
                placed = self._place(rec, request)
            except SpecError as e:  # a component asking for more GPUs than there are
                self._ready.popleft()
                self._counts[TrialStatus.CANDIDATE.value] -= 1
                self._finish(rec, TrialStatus.FAILED, reason=f"cannot be placed: {e}")
                continue
            if placed is None:
                break  # waiting for devices; candidates start in order
            request, devices = placed
            try:
                os.makedirs(request.trial_dir, exist_ok=True)
            except OSError as e:
                if devices:
                    self.store.release_devices(self.exp.id, rec.index)
                raise _Stop(f"cannot create the trial folder {request.trial_dir}: {e.strerror}; "
                            f"fix it, then `nasctl resume {self.exp.name}`", cancel=False) from None
            self._ready.popleft()
            self._counts[TrialStatus.CANDIDATE.value] -= 1
            try:
                job = self.runner.submit(request)
            except RunnerError as e:
                self._finish(rec, TrialStatus.FAILED, reason=f"submission failed: {e}")  # releases its devices
                continue
            failpoints.hit("after_submit")
            rec = self.store.mark_trial_running(rec.id, job.handle, self.runner.scheduler, job.metadata,
                                                devices=devices)
            failpoints.hit("after_record_running")
            self._counts[TrialStatus.RUNNING.value] += 1
            tb = request.env["NASCTL_LOG_DIR"]
            self._running[rec.index] = _Running(rec, job, TensorBoardReader(tb), MetricSummary(), _epoch(rec))
            if self._stopper is not None:
                self._stopper.track(rec.index, rec.parameters)

    def _request(self, rec: TrialRecord, note: bool = False) -> JobRequest:
        """The job for a recorded trial, under the name it was recorded with (an
        experiment renamed after the trial was proposed keeps finding its job).
        A promotion continues from the checkpoint the trial it was promoted from
        left, where there is one; otherwise it trains from scratch to its
        fidelity (said in an event when `note`)."""
        resume = None
        if rec.promoted_from is not None:
            try:
                source = self.store.get_trial(self.exp.id, rec.promoted_from)
            except NotFoundError:
                source = None
            src_dir = (source.log_dir if source is not None else None) or trial_dir(self.exp.work_dir,
                                                                                    rec.promoted_from)
            resume = checkpoint_of(src_dir)
            if resume is None and note:
                self.store.add_event(self.exp.id, "promotion",
                                     f"trial {rec.index} trains from scratch: trial {rec.promoted_from} "
                                     f"left no checkpoint in {src_dir}", trial_index=rec.index)
        request = build_request(self.spec, self.exp.name, self.exp.work_dir, rec.index, rec.parameters,
                                resume_from=resume)
        return dataclasses.replace(request, name=rec.job_name) if rec.job_name else request

    def _place(self, rec: TrialRecord, request: JobRequest) -> tuple[JobRequest, list[str] | None] | None:
        """Lease devices for a trial that asks for GPUs on a runner that places them
        itself (nasctl/orchestration/devices.py): the request with its
        CUDA_VISIBLE_DEVICES and the devices, or None while too few are free.

        Raises:
            SpecError: the trial asks for more devices than the inventory has.
        """
        inventory = self.runner.device_inventory() if request.gpu > 0 else None
        if inventory is None:
            return request, None
        self.runner.check_gpu(request.gpu)
        if self._placer is None:
            self._placer = DevicePlacer(self.store, inventory, self.owner, self.runner, owner_alive)
        devices, reclaimed = self._placer.place(self.exp.id, rec, request.gpu)
        for lease in reclaimed:
            if lease.trial_status is not None and not lease.trial_status.is_terminal:
                self.store.add_event(
                    self.exp.id, "devices",
                    f"device {lease.device} reclaimed from trial {lease.trial_index} of experiment "
                    f"{lease.experiment_id}: its orchestrator and job are gone", trial_index=rec.index)
        if devices is None:
            if rec.index not in self._waiting:
                self._waiting.add(rec.index)
                self.store.set_device_wait(rec.id, utcnow())
                self._note(f"trial {rec.index} waits for {request.gpu} free device{'s' if request.gpu > 1 else ''} "
                           f"(devices {','.join(inventory.devices)} are all in use)")
            return None
        self._waiting.discard(rec.index)
        env = {**request.env, **visible_devices_env(devices)}
        return dataclasses.replace(request, env=env), devices

    def _poll_jobs(self) -> bool:
        if not self._running:
            return False
        statuses = self.runner.status([r.job for r in self._running.values()])
        changed = False
        for index, run in list(self._running.items()):
            st = statuses.get(run.job.handle)
            if st is None or not st.state.is_terminal:
                if st is not None and st.state == JobState.UNKNOWN:
                    run.unknown_polls += 1
                    if run.unknown_polls >= 20:
                        self._end_running(index, TrialStatus.FAILED, f"job {run.job.handle} was lost: {st.message}")
                        changed = True
                continue
            changed = True
            if st.state == JobState.SUCCEEDED:
                self._complete_or_fail(index)
            elif st.state == JobState.CANCELLED:
                self._end_running(index, TrialStatus.FAILED, "job was cancelled outside nasctl")
            else:
                msg = (st.message or "").strip().splitlines()
                detail = f": {msg[-1]}" if msg else ""
                self._end_running(index, TrialStatus.FAILED, f"job failed{detail}")
        return changed

    def _read_running_metrics(self) -> None:
        for index, run in list(self._running.items()):
            try:
                self._read(run)
            except MetricsError as e:
                self._cancel_quietly(run)
                self._end_running(index, TrialStatus.FAILED, str(e))

    def _read(self, run: _Running) -> None:
        new = run.reader.read_new()
        if new:
            run.summary.update(new)
            self.store.add_observations(run.trial.id, new, reader_state=self._reader_state(run))
            if self._stopper is not None:
                self._stopper.observe(run.trial.index, new)

    @staticmethod
    def _reader_state(run: _Running) -> dict[str, Any]:
        return {**run.reader.state, "summary": run.summary.state}

    def _early_stop(self) -> None:
        """Stop running trials that cannot reach the Pareto front (nasctl/orchestration/early_stopping.py).

        The decision is recorded as an event first (with the step, the
        dominating trials and the estimated time saved), then the job is
        cancelled and the trial finished EARLY_STOPPED with its partial values;
        its curves stay in the store. A crash in between leaves it RUNNING, and
        the resumed loop judges it again from the same stored curves.
        """
        if self._stopper is None:
            return
        now = time.time()
        for index, run in list(self._running.items()):
            decision = self._stopper.judge(index, now - run.started)
            if decision is None:
                continue
            self.store.add_event(self.exp.id, EARLY_STOPPED_EVENT, f"trial {index} {decision.reason}",
                                 trial_index=index, data=decision.event_data())
            self._cancel_quietly(run)
            self._saved += decision.seconds_saved
            self._end_running(index, TrialStatus.EARLY_STOPPED, decision.reason, self._partial_values(run),
                              stopped_values=decision.projected)

    def _partial_values(self, run: _Running) -> dict[str, float]:
        """Each logged metric's value so far, by the spec's rule (last or best)."""
        values: dict[str, float] = {}
        for m in run.summary.metrics:
            obj = self.spec.objectives.get(m)
            v = run.summary.value(m, obj.value if obj else "last", obj.maximize if obj else True)
            if v is not None and math.isfinite(v):
                values[m] = v
        return values

    def _enforce_timeouts(self) -> None:
        limit = self.spec.budget.trial_timeout
        if limit is None:
            return
        now = time.time()
        for index, run in list(self._running.items()):
            if now - run.started > limit:
                self._cancel_quietly(run)
                self._end_running(index, TrialStatus.FAILED, f"timed out after {limit:g}s (budget.trial_timeout)")

    def _complete_or_fail(self, index: int) -> None:
        run = self._running[index]
        try:
            new = run.reader.read_new()  # stored together with the trial's end, in one transaction
        except MetricsError as e:
            self._end_running(index, TrialStatus.FAILED, str(e))
            return
        run.summary.update(new)
        if self._stopper is not None:
            self._stopper.observe(run.trial.index, new)
        state = self._reader_state(run)
        values: dict[str, float] = {}
        for m in run.summary.metrics:
            v = run.summary.value(m)
            if v is not None and math.isfinite(v):
                values[m] = v
        problems = []
        for m in self.spec.metric_names:
            obj = self.spec.objectives.get(m)
            how = obj.value if obj else "last"
            v = run.summary.value(m, how, obj.maximize if obj else True)
            if v is None:
                logged = ", ".join(sorted(run.summary.metrics)) or "nothing"
                problems.append(f"metric {m!r} was never logged (logged: {logged})")
            elif not math.isfinite(v):
                problems.append(f"metric {m!r} is {v}")
            else:
                values[m] = v
        if problems:
            self._end_running(index, TrialStatus.FAILED, "; ".join(problems), values,
                              observations=new, reader_state=state)
        else:
            self._end_running(index, TrialStatus.COMPLETED, None, values, observations=new, reader_state=state)

    def _end_running(self, index: int, status: TrialStatus, reason: str | None,
                     values: dict[str, float] | None = None, stopped_values: dict[str, float] | None = None,
                     observations: Sequence[Observation] = (), reader_state: dict[str, Any] | None = None) -> None:
        run = self._running.pop(index)
        self._counts[TrialStatus.RUNNING.value] -= 1
        if status == TrialStatus.FAILED:
            full = self._disk_full()
            reason = f"{reason} ({full})" if full else reason
        tail = None
        if status != TrialStatus.COMPLETED:
            tail = self.runner.log_tail(run.job, LOG_TAIL_LINES)
        info, problem = read_trial_info(str(run.reader.log_dir))
        if problem:
            self.store.add_event(self.exp.id, "warning", problem, trial_index=index)
        self._finish(run.trial, status, reason=reason, values=values, log_tail=tail, stopped_values=stopped_values,
                     info=info, observations=observations, reader_state=reader_state)

    def _finish(self, rec: TrialRecord, status: TrialStatus, *, reason: str | None = None,
                values: dict[str, float] | None = None, log_tail: str | None = None,
                stopped_values: dict[str, float] | None = None, info: dict[str, Any] | None = None,
                observations: Sequence[Observation] = (), reader_state: dict[str, Any] | None = None) -> None:
        self.store.finish_trial(rec.id, status, values, reason, log_tail, info=info, observations=observations,
                                reader_state=reader_state)
        failpoints.hit("after_finish_trial")
        self._counts[status.value] += 1
        if self._stopper is not None:
            if status == TrialStatus.COMPLETED:
                assert values is not None
                self._stopper.complete(rec.index, values)
            else:
                self._stopper.forget(rec.index)
        if status == TrialStatus.COMPLETED:
            assert values is not None
            self.gen.complete(rec.index, values)
            if rec.started_at is not None:
                self._durations.append(time.time() - _epoch(rec))
            self._completed.append((rec.index, values))
            self._note(f"trial {rec.index} completed: " + _fmt_values(values, self.spec.objectives))
        elif status == TrialStatus.FAILED:
            self.gen.fail(rec.index, reason)
            self._note(f"trial {rec.index} failed: {reason}")
        elif status == TrialStatus.EARLY_STOPPED:
            self.gen.early_stop(rec.index, stopped_values)
            self._note(f"trial {rec.index} {reason}")
        else:
            self.gen.abandon(rec.index)

    def _cancel_quietly(self, run: _Running) -> None:
        try:
            self.runner.cancel(run.job)
        except RunnerError as e:
            self.store.add_event(self.exp.id, "warning", str(e), trial_index=run.trial.index)

    def _cancel_running(self, why: str) -> None:
        for index, run in list(self._running.items()):
            self._cancel_quietly(run)
            self._end_running(index, TrialStatus.ABANDONED, why)

    def _abandon_ready(self, why: str) -> None:
        while self._ready:
            rec = self._ready.popleft()
            self._counts[TrialStatus.CANDIDATE.value] -= 1
            self._finish(rec, TrialStatus.ABANDONED, reason=why)

    def _update_front(self) -> None:
        done = self._completed
        fid = self.spec.optimizer.fidelity
        if fid is not None:  # the top rung only, unless the spec says otherwise
            done = [(i, v) for i, v in done if fid.in_front(self._fidelity.get(i))]
        res = compute_front(done, self.spec.objectives, self.spec.parsed_constraints)
        self._front, self._hv = res.indices, res.hypervolume

    def _note(self, msg: str) -> None:
        self._messages.append(msg)

    def _emit(self, done: bool = False) -> None:
        if self.on_progress is None:
            return
        by_index = dict(self._completed)
        self.on_progress(
            Progress(
                experiment=self.exp.name,
                max_trials=self.spec.budget.max_trials,
                parallelism=self.spec.budget.parallelism,
                counts=dict(self._counts),
                hypervolume=self._hv,
                front=[(i, {k: by_index[i][k] for k in self.spec.objectives if k in by_index[i]}) for i in self._front],
                generating=self.gen.pending_request is not None,
                generating_seconds=self.gen.busy_seconds,
                elapsed=time.monotonic() - self._t0,
                last_generation_seconds=self._gen_times[-1] if self._gen_times else None,
                messages=list(self._messages),
                done=done,
                waiting_for_devices=len(self._waiting),
            )
        )


def _fmt_values(values: Mapping[str, float], objectives: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={_fmt_number(values[k])}" for k in objectives if k in values)


def _fmt_number(v: float) -> str:
    """A whole number as digits (a parameter count is 16125, not 1.612e+04), others to 4 significant digits."""
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:.4g}"


def describe_proposal(candidates: Sequence[Candidate], seconds: float) -> str:
    """The progress line of one proposal, naming each trial's own method:
    `proposed trial 0 with CenterOfSearchSpace and trial 1 with Sobol in 0.2s`;
    trials in a row from one method share it (`proposed trials 2, 3 with Sobol`)."""
    groups: list[tuple[str, list[int]]] = []
    for c in candidates:
        if groups and groups[-1][0] == c.method:
            groups[-1][1].append(c.index)
        else:
            groups.append((c.method, [c.index]))
    parts = [f"trial{'s' if len(ix) > 1 else ''} {', '.join(map(str, ix))} with {method}" for method, ix in groups]
    return f"proposed {' and '.join(parts)} in {seconds:.1f}s"


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
