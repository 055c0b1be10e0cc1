"""The `simulated` runner: `trial.function` trials on a simulated clock.

For benchmarks of the optimizer at parallelism > 1 (in the spirit of Syne
Tune's simulator backend). Each trial is given a duration, fixed by its
parameters and `cfg.seed`: a log-normal draw (`cfg.median_seconds`,
`cfg.sigma`) seeded by a hash of both, or, with `cfg.duration_metric`, the
value of one of the metrics the function returns (a table's own cost column,
such as NAS-Bench-201's training time). The runner hands the orchestrator its
`VirtualClock` (`Runner.clock`), so the real loop (nasctl/orchestration/loop.py:
proposals, write-ahead records, dispatch, polling, metrics read back from the
TensorBoard files) runs against virtual time: 100 trials at parallelism 8 cost
the proposals' CPU and nothing else.

Determinism. Virtual time moves only inside the loop's pause (`VirtualClock.wait`)
and only when the loop has nothing left to do at the present instant: no
proposal is being computed (`busy`: the generator thread's answer would set the
loop's wake event, so the pause waits for it in real time while virtual time
stands still) and the loop did not wake for anything (a job end, an answer).
Then the clock jumps to the earliest event among the jobs (a start after a
requeue delay, an epoch's end, a preemption), and every event due at that
instant is acted on, jobs in submission order: a trial's function is called and
its metrics logged when its step ends (nothing of a step is readable before),
and the loop is woken to poll. A proposal therefore takes no virtual time and always
sees every result whose end came before it, whatever the real time it took, so
the trials of a run depend only on the seeds and the durations, not on the
machine's speed or load. The proposals' look-ahead (nasctl/orchestration/
proposals.py) is computed from the proposals' cost on this clock (none).

A simulated GPU cluster (nasctl/runners/simcluster.py) runs the jobs:

- `cfg.devices` (and `trials_per_device`) is the cluster's device inventory,
  which nasctl places `resources.gpu` trials on with its own placement
  (nasctl/orchestration/devices.py): a trial that finds too few free waits as a
  candidate. A device shared by several trials runs each of them that many
  times slower.
- `cfg.epochs_parameter` names the parameter that counts a trial's epochs (the
  fidelity parameter of `optimizer.fidelity`, or a fixed one). Such a trial has
  a learning curve: the function is called with that parameter set to 1, 2, ...
  in turn, each epoch's metrics are logged at step k at the end of epoch k (so
  early stopping and promotions judge them while the trial runs), and
  `NASCTL_CHECKPOINT_DIR/last.ckpt` records the epochs done. Epoch k lasts the
  growth of the cost metric (`duration_metric`, cumulative: a table's training
  seconds after k epochs) from k - 1 to k, or a log-normal draw per epoch. A job
  given `NASCTL_RESUME_FROM` (a retry's own checkpoint, a promotion's source's)
  starts after the epochs it records.
- `cfg.preempt_rate` preempts running jobs at that rate per device-hour (a
  seeded exponential draw per attempt, keyed by the trial's parameters and the
  attempt's number: `simcluster.preemption_key`). A preempted attempt ends FAILED
  with class infrastructure, so the real retry path runs the trial again from
  its checkpoint; a retried attempt waits `cfg.requeue_delay` seconds (default
  120, Slurm's BeginTime after a requeue) before it runs. The epoch in progress
  is lost, and its device time counted as lost.
- `cfg.time_scale` multiplies every duration (a table timed on a CPU played as
  the longer trainings of a GPU cluster: relative costs stay the table's).

Each attempt leaves its outcome file in the trial's folder (`inprocess.json`,
then `inprocess-a2.json`, ...) with its times and device time;
`cluster_accounting(work_dir)` reads them all (what GPU-hours are counted from).

The job's status gives its run's start and its end on the virtual clock (as
Slurm's accounting gives them), and the loop times the attempts it records on
its clock (nasctl/runners/clock.py), so the store's GPU-hours,
`budget.max_gpu_hours` and `budget.trial_timeout` are the cluster's (a timeout
is judged at the loop's next tick: the next event). What is not simulated: the
lease's heartbeat follows the loop's clock (a proposal of more
than LEASE_STALE_SECONDS can make the lease look stale to another
orchestrator), and trials do not outlive the orchestrator (as with `inprocess`,
one still running when it exits is reported FAILED). Each job's virtual
submission and planned end (seconds since the run's virtual start, its end
were nothing to slow or preempt it) are in its runner metadata:
`simulated_start`, `simulated_end`.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import math
import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nasctl.errors import BadInputError, RunnerError, SpecError
from nasctl.runners.base import JobRequest, JobState, JobStatus, Runner, SubmittedJob, attempt_suffix
from nasctl.runners.clock import Clock
from nasctl.runners.devices import (
    VISIBLE_ENV,
    DeviceInventory,
    check_device_cfg,
    check_gpu_request,
    parse_device_list,
)
from nasctl.runners.inprocess import OUTCOME, function_call, outcome_path, recorded_status, run_and_record
from nasctl.runners.launcher import CHECKPOINT_DIR_ENV, CHECKPOINT_FILE, RESUME_ENV, read_json, write_json_atomic
from nasctl.runners.simcluster import SimCluster, SimEvent, SimJob, preemption_after, preemption_key
from nasctl.search_spaces.function import load_function, run_function
from nasctl.types import FailureClass

DEFAULT_MEDIAN_SECONDS = 60.0
DEFAULT_SIGMA = 0.5
DEFAULT_REQUEUE_DELAY = 120.0
"""Seconds a retried attempt waits before it runs (Slurm holds a requeued job ~2 min, BeginTime)."""
SCHEDULER = "simulated"
CFG_OPTIONS = ("median_seconds", "sigma", "seed", "duration_metric", "epochs_parameter", "devices",
               "trials_per_device", "preempt_rate", "requeue_delay", "time_scale")


def trial_seconds(parameters: Mapping[str, Any], seed: int, median: float, sigma: float) -> float:
    """A trial's simulated duration: `median * exp(sigma * z)`, z a standard normal
    drawn from a generator seeded by a hash of the parameters and `seed` (the same
    in every process and on every machine)."""
    key = json.dumps({"parameters": dict(parameters), "seed": seed}, sort_keys=True, default=str)
    rng = random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))
    return median * math.exp(sigma * rng.gauss(0.0, 1.0))


class VirtualClock(Clock):
    """Simulated time: moves only when the loop waits with nothing to do (`wait`).

    Args:
        advance: ends the jobs due next and moves the clock to their end; returns
            False when no job is running (nothing to move to).
    """

    def __init__(self, advance: Callable[[], bool]) -> None:
        # virtual epoch times start at the real second the run starts: a whole second, so that
        # origin + elapsed rounds the same in every run (a trial that ran exactly its
        # budget.trial_timeout was ended in some runs and not in others)
        self.origin = float(math.floor(time.time()))
        self.elapsed = 0.0  # virtual seconds since the run's start
        self._advance = advance

    def time(self) -> float:
        return self.origin + self.elapsed

    def monotonic(self) -> float:
        return self.origin + self.elapsed

    def wait(self, wake: threading.Event, timeout: float, busy: bool) -> None:
        """Nothing happens in virtual time while the loop has something to act on
        (`wake` is set) or a proposal is being computed (`busy`: wait for its answer
        in real time). Otherwise the clock jumps to the next job end; with no job
        running, the loop pauses `timeout` real seconds as it would in a real run."""
        if wake.is_set():
            return
        if busy or not self._advance():
            wake.wait(timeout)

    def cost(self, seconds: float) -> float:
        """A proposal takes no virtual time."""
        return 0.0

    def move_to(self, elapsed: float) -> None:
        self.elapsed = max(self.elapsed, elapsed)


@dataclass
class _SimulatedJob:
    request: JobRequest
    target: str
    parameters: dict[str, Any]
    sim: SimJob
    outcome: str  # the attempt's outcome file
    planned_end: float  # its end if nothing preempts or slows it
    values: dict[str, float] | None = None  # its metrics at the last epoch that ended


class SimulatedRunner(Runner):
    """Runs `trial.function` calls on a simulated cluster (see the module docstring)."""

    scheduler = SCHEDULER
    queues = True
    poll_interval = 0.25

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        cfg = dict(cfg or {})
        self.median = _positive(cfg.pop("median_seconds", DEFAULT_MEDIAN_SECONDS), "median_seconds")
        self.sigma = _positive(cfg.pop("sigma", DEFAULT_SIGMA), "sigma", zero=True)
        seed = cfg.pop("seed", 0)
        metric = cfg.pop("duration_metric", None)
        epochs = cfg.pop("epochs_parameter", None)
        self.preempt_rate = _positive(cfg.pop("preempt_rate", 0.0), "preempt_rate", zero=True)
        self.requeue_delay = _positive(cfg.pop("requeue_delay", DEFAULT_REQUEUE_DELAY), "requeue_delay", zero=True)
        self.time_scale = _positive(cfg.pop("time_scale", 1.0), "time_scale")
        own_devices: dict[str, Any] = {k: cfg.pop(k) for k in ("devices", "trials_per_device") if k in cfg}
        if cfg:
            raise SpecError(f"runner.cfg has options the simulated runner does not take: {sorted(cfg)}",
                            f"it takes: {', '.join(CFG_OPTIONS)}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise SpecError(f"runner.cfg.seed must be an integer, got {seed!r}", "set the durations' seed")
        for name, value in (("duration_metric", metric), ("epochs_parameter", epochs)):
            if value is not None and not isinstance(value, str):
                raise SpecError(f"runner.cfg.{name} must be a {'metric' if name == 'duration_metric' else 'parameter'} "
                                f"name, got {value!r}",
                                "name a metric the trial's function returns (its cost in seconds)"
                                if name == "duration_metric" else
                                "name the parameter that counts a trial's epochs (e.g. epochs)")
        self.seed, self.duration_metric, self.epochs_parameter = seed, metric, epochs
        self._inventory: DeviceInventory | None = None
        if own_devices.get("devices") is not None:
            per = check_device_cfg(own_devices)
            self._inventory = DeviceInventory(parse_device_list(own_devices["devices"], "runner.cfg.devices"), per,
                                              "runner.cfg.devices")
        elif "trials_per_device" in own_devices:
            raise SpecError("runner.cfg.trials_per_device without runner.cfg.devices",
                            "list the simulated cluster's devices, e.g. devices: [0, 1, 2, 3, 4, 5, 6, 7]")
        self._clock = VirtualClock(self.advance)
        self._cluster = SimCluster()
        self._jobs: dict[str, _SimulatedJob] = {}
        self._cancelled: set[str] = set()
        self._wake: Callable[[], None] | None = None

    def clock(self) -> VirtualClock:
        return self._clock

    def device_inventory(self) -> DeviceInventory | None:
        """The simulated cluster's devices (`runner.cfg.devices`), which nasctl places
        trials on as on a local machine; None without them (trials hold no device)."""
        return self._inventory

    def check_gpu(self, gpu: int) -> None:
        if gpu > 0:
            if self._inventory is None:
                raise SpecError(f"trial.resources.gpu is {gpu} but the simulated cluster has no devices",
                                "set runner.cfg.devices (e.g. [0, 1, 2, 3]) or use gpu: 0")
            check_gpu_request(gpu, self._inventory)

    def _metrics(self, target: str, parameters: Mapping[str, Any], epoch: int | None) -> Mapping[str, Any] | None:
        """The function's metrics for the trial's parameters (at `epoch` epochs where
        the trial has a learning curve), or None when the call raises."""
        params = dict(parameters)
        if epoch is not None and self.epochs_parameter is not None:
            params[self.epochs_parameter] = epoch
        try:
            out = load_function(target)(params)
        except Exception:  # the trial's own failure: its end says why
            return None
        return out if isinstance(out, Mapping) else None

    def _cost(self, target: str, parameters: Mapping[str, Any], epoch: int | None) -> float:
        out = self._metrics(target, parameters, epoch)
        value = out.get(self.duration_metric) if out is not None and self.duration_metric else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return 0.0  # the trial's own end reports what is wrong with its metrics
        return max(0.0, float(value))

    def duration(self, target: str, parameters: Mapping[str, Any]) -> float:
        """The trial's simulated seconds: its cost metric's value where `duration_metric`
        is set (the function is called for it; it must be deterministic; a call that
        raises or lacks the metric takes no time, and the trial's end says what is
        wrong), else the log-normal draw. With `epochs_parameter`, the seconds of all
        its epochs from the first (see `epoch_durations`). Times `time_scale`."""
        last = self._epochs(parameters)
        if last is None:
            if self.duration_metric is None:
                return self.time_scale * trial_seconds(parameters, self.seed, self.median, self.sigma)
            return self.time_scale * self._cost(target, parameters, None)
        return sum(self.epoch_durations(target, parameters, 0, last))

    def epoch_durations(self, target: str, parameters: Mapping[str, Any], first: int, last: int) -> list[float]:
        """Seconds epochs `first` + 1 ... `last` of a trial with a learning curve take alone
        on its devices: the cost metric's growth from each epoch to the next (one call of
        the function per epoch), or, without `duration_metric`, one log-normal draw per
        epoch seeded by the parameters other than the epochs (`median_seconds` is then
        the median epoch). Times `time_scale`."""
        if self.duration_metric is None:
            arch = {k: v for k, v in parameters.items() if k != self.epochs_parameter}
            return [self.time_scale * trial_seconds(arch, self.seed, self.median, self.sigma)] * (last - first)
        costs = [self._cost(target, parameters, k) if k > 0 else 0.0 for k in range(first, last + 1)]
        return [self.time_scale * max(0.0, after - before) for before, after in zip(costs, costs[1:])]

    def _epochs(self, parameters: Mapping[str, Any]) -> int | None:
        """The epochs a trial trains to, None for a trial without a learning curve."""
        if self.epochs_parameter is None:
            return None
        value = parameters.get(self.epochs_parameter)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
            raise RunnerError(f"the trial's {self.epochs_parameter} is {value!r}, not a number of epochs >= 1",
                              f"give every trial the parameter {self.epochs_parameter} (runner.cfg.epochs_parameter)")
        return int(value)

    def dryrun(self, request: JobRequest) -> str:
        target, params = function_call(request, SCHEDULER)
        return (f"simulated: {target}({json.dumps(params, sort_keys=True)}) for "
                f"{self.duration(target, params):.1f} virtual seconds -> metrics logged to "
                f"{request.env.get('NASCTL_LOG_DIR')}")

    def submit(self, request: JobRequest) -> SubmittedJob:
        target, params = function_call(request, SCHEDULER)
        existing = self.find(request)
        if existing is not None:  # never run one attempt twice
            return existing
        last = self._epochs(params)
        os.makedirs(request.trial_dir, exist_ok=True)
        for d in reversed([p for p in request.env.get("PYTHONPATH", "").split(os.pathsep) if p]):
            if d not in sys.path:
                sys.path.insert(0, d)
        now = self._clock.elapsed
        devices = tuple(d for d in request.env.get(VISIBLE_ENV, "").split(",") if d) if request.gpu > 0 else ()
        if last is None:  # the whole trial is one step, logged at its end
            first, last, seconds = 0, 1, [self.duration(target, params)]
        else:
            first = min(_resumed_epoch(request), last)
            seconds = self.epoch_durations(target, params, first, last)
        sim = SimJob(request.name, now, first, last, lambda k: seconds[k - first - 1],
                     delay=self.requeue_delay if request.attempt > 1 else 0.0, devices=devices,
                     gpus=max(1, request.gpu),
                     preempt_after=preemption_after(preemption_key(params, request.attempt), self.seed,
                                                   self.preempt_rate, request.gpu))
        planned = sim.start + sum(seconds)
        job = _SimulatedJob(request, target, params, self._cluster.add(sim), _outcome_file(request), planned)
        self._jobs[_handle(request)] = job
        return SubmittedJob(_handle(request), _metadata(job))

    def advance(self) -> bool:
        """Move the clock to the earliest event among the jobs (a start, an epoch's end,
        a preemption) and act on every event due then, jobs in submission order: an
        epoch's metrics are logged and its checkpoint written, a job's last epoch or
        preemption writes its outcome. False if no job is left to move to."""
        now = self._cluster.next_time()
        if now is None:
            return False
        self._clock.move_to(now)
        try:
            for event in self._cluster.step(now):
                self._act(event, now)
        finally:
            if self._wake is not None:
                self._wake()
        return True

    def _act(self, event: SimEvent, now: float) -> None:
        job = self._jobs[_handle(event.job.key)]
        if event.kind == "start":
            return
        if event.kind == "preempt":
            self._record(job, {"ok": False, "failure_class": FailureClass.INFRASTRUCTURE.value,
                               "error": f"preempted (simulated) after {now - (event.job.running_since or now):.0f}s "
                                        f"running, at epoch {event.epoch + 1}: {event.job.lost_seconds:.0f} "
                                        "device-seconds lost"})
            return
        if self.epochs_parameter is None:  # one step: the function runs at the trial's end, as before
            run_and_record(job.request, job.target, job.parameters, extra=self._extra(job), path=job.outcome)
            return
        try:
            values = run_function(job.target, {**job.parameters, self.epochs_parameter: event.epoch},
                                  job.request.env["NASCTL_LOG_DIR"], step=event.epoch)
        except Exception as e:  # the trial's own failure, reported like a crashed process's
            self._cluster.fail(event.job.key, now)
            error = str(e) if isinstance(e, BadInputError) else f"{type(e).__name__}: {e}"
            self._record(job, {"ok": False, "error": error, "traceback": traceback.format_exc()})
            return
        job.values = values
        ckpt_dir = job.request.env.get(CHECKPOINT_DIR_ENV)
        if ckpt_dir:
            os.makedirs(ckpt_dir, exist_ok=True)
            write_json_atomic(os.path.join(ckpt_dir, CHECKPOINT_FILE),
                              {"simulated": True, "epoch": event.epoch, "parameters": job.parameters})
        if event.final:
            self._record(job, {"ok": True, "values": values})

    def _extra(self, job: _SimulatedJob) -> dict[str, Any]:
        return {**_metadata(job), "attempt": job.request.attempt, "parameters": job.parameters,
                "simulated": {**job.sim.accounting(), "epoch_ends": list(job.sim.epoch_ends)}}

    def _record(self, job: _SimulatedJob, outcome: dict[str, Any]) -> None:
        write_json_atomic(job.outcome, {"started": time.time(), **self._extra(job), **outcome, "ended": time.time()})

    def notify_on_end(self, wake: Callable[[], None]) -> bool:
        """Every job ends in this process, in `advance`: `wake` is called then."""
        self._wake = wake
        return True

    def _one_status(self, job: SubmittedJob) -> JobStatus:
        """The job's state with its times on the virtual clock (when its run began, when
        it ended), as a scheduler's accounting gives them: the loop times its attempts
        by them, so their seconds and GPU-hours are the cluster's."""
        entry = self._jobs.get(job.handle)
        since, ended = self._times(entry) if entry is not None else (None, None)
        if job.handle in self._cancelled:
            return JobStatus(JobState.CANCELLED, "cancelled", failure_class=FailureClass.CANCELLED,
                             running_since=since, ended_at=ended)
        trial_dir = job.metadata.get("trial_dir")
        recorded = recorded_status(trial_dir, job.metadata.get("outcome"))
        if recorded is not None and recorded.state == JobState.SUCCEEDED and trial_dir:
            # its result's device time, without the parts its preempted attempts lost
            return dataclasses.replace(recorded, device_seconds=trial_device_seconds(trial_dir),
                                       running_since=since, ended_at=ended)
        if recorded is not None:
            return dataclasses.replace(recorded, running_since=since, ended_at=ended)
        if entry is not None:
            if entry.sim.running_since is None:
                return JobStatus(JobState.PENDING, f"requeued: waits until {entry.sim.start:.0f}s "
                                                   f"(runner.cfg.requeue_delay {self.requeue_delay:g}s)")
            return JobStatus(JobState.RUNNING, running_since=since)
        if not trial_dir:
            return JobStatus(JobState.UNKNOWN, f"no simulated trial {job.handle} in this process")
        return JobStatus(JobState.FAILED, "the orchestrator that simulated this trial exited before it ended",
                         failure_class=FailureClass.INFRASTRUCTURE)

    def _times(self, entry: _SimulatedJob) -> tuple[float | None, float | None]:
        """When a job's run began and when it ended (epoch seconds of the virtual clock)."""
        origin, sim = self._clock.origin, entry.sim
        return (None if sim.running_since is None else origin + sim.running_since,
                None if sim.ended is None else origin + sim.ended)

    def status(self, jobs: Sequence[SubmittedJob]) -> Mapping[str, JobStatus]:
        return {job.handle: self._one_status(job) for job in jobs}

    def cancel(self, job: SubmittedJob) -> None:
        """End the job now (its epoch in progress is lost); its outcome file says so,
        with its device time, for a later process and for `cluster_accounting`."""
        entry = self._jobs.get(job.handle)
        if entry is not None and entry.sim.ended is None:
            self._cluster.cancel(entry.sim.key, self._clock.elapsed)
            self._cancelled.add(job.handle)
            self._record(entry, {"ok": False, "failure_class": FailureClass.CANCELLED.value, "error": "cancelled"})

    def log_tail(self, job: SubmittedJob, lines: int = 40) -> str:
        trial_dir = job.metadata.get("trial_dir")
        path = job.metadata.get("outcome") or (outcome_path(trial_dir) if trial_dir else None)
        outcome = (read_json(path) if path else None) or {}
        text = outcome.get("traceback") or outcome.get("error") or ""
        return "\n".join(str(text).splitlines()[-lines:])

    def find(self, request: JobRequest) -> SubmittedJob | None:
        handle = _handle(request)
        if handle in self._jobs:
            return SubmittedJob(handle, _metadata(self._jobs[handle]))
        if os.path.exists(_outcome_file(request)):
            return SubmittedJob(handle, {"trial_dir": request.trial_dir, "outcome": _outcome_file(request)})
        return None



def cluster_accounting(work_dir: str) -> list[dict[str, Any]]:
    """Every ended job of a simulated run in `work_dir` (from each attempt's outcome
    file): trial folder, attempt, parameters, values, and its times and device time
    (`SimJob.accounting`), in submission order. What a benchmark counts GPU-hours from;
    a job still running has no outcome yet and is not in it."""
    out = []
    for path in sorted(glob.glob(os.path.join(work_dir, "trials", "*", f"{os.path.splitext(OUTCOME)[0]}*.json"))):
        data = read_json(path)
        if data is None or not isinstance(data.get("simulated"), dict):
            continue
        out.append({"trial_dir": data.get("trial_dir"), "attempt": data.get("attempt", 1),
                    "parameters": data.get("parameters"), "values": data.get("values"), "ok": data.get("ok"),
                    **data["simulated"]})
    return sorted(out, key=lambda r: (r["submitted"], str(r["trial_dir"]), r["attempt"]))


def trial_device_seconds(trial_dir: str) -> float:
    """The device-seconds a simulated trial's attempts have used so far, less the lost
    parts (the epochs in progress at a preemption or a cancellation): what its result took."""
    total = 0.0
    for path in glob.glob(os.path.join(trial_dir, f"{os.path.splitext(OUTCOME)[0]}*.json")):
        data = read_json(path)
        sim = data.get("simulated") if data else None
        if isinstance(sim, dict):
            total += float(sim.get("gpu_seconds") or 0.0) - float(sim.get("lost_seconds") or 0.0)
    return total


def _resumed_epoch(request: JobRequest) -> int:
    """The epochs a job's checkpoint (`NASCTL_RESUME_FROM`) says are done; 0 without one."""
    path = request.env.get(RESUME_ENV)
    data = read_json(path) if path else None
    epoch = data.get("epoch") if data else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch > 0 else 0


def _outcome_file(request: JobRequest) -> str:
    """Each attempt's own outcome file: `inprocess.json` for the first, `inprocess-aN.json` after."""
    base, ext = os.path.splitext(outcome_path(request.trial_dir))
    return f"{base}{attempt_suffix(request.attempt)}{ext}"


def _handle(request_or_name: JobRequest | str) -> str:
    name = request_or_name if isinstance(request_or_name, str) else request_or_name.name
    return f"simulated://{name}"


def _metadata(job: _SimulatedJob) -> dict[str, Any]:
    return {"trial_dir": job.request.trial_dir, "outcome": job.outcome, "simulated_start": job.sim.submitted,
            "simulated_end": job.planned_end}


_MEANING = {"sigma": "the log-normal's sigma", "preempt_rate": "preemptions per device-hour, 0 for none",
            "requeue_delay": "seconds a retried attempt waits", "time_scale": "what every duration is multiplied by"}


def _positive(value: Any, name: str, zero: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not zero):
        raise SpecError(f"runner.cfg.{name} must be a {'non-negative' if zero else 'positive'} number, got {value!r}",
                        f"set runner.cfg.{name} ({_MEANING.get(name, 'seconds')})")
    return float(value)


def create_runner(cfg: Mapping[str, Any] | None = None) -> SimulatedRunner:
    return SimulatedRunner(cfg)


__all__ = ["SimulatedRunner", "VirtualClock", "cluster_accounting", "create_runner", "trial_seconds"]
