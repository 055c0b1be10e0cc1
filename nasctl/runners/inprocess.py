"""The `inprocess` runner: `trial.function` trials evaluated inside the
orchestrator's process, on a small thread pool.

It runs exactly what `python -m nasctl.search_spaces.function` runs in a
trial process (same argument parsing, same TensorBoard output), minus the
process: no interpreter start (~0.1-5 s a trial), so cheap objectives such as
analytic test problems, tabular benchmarks or surrogate models cost
milliseconds. The orchestrator reads their metrics from the event files as
for any trial.

What a process would give and this runner cannot: a trial cannot be killed
(cancel discards a running call's result, it does not interrupt it), a
function that crashes the interpreter takes the orchestrator with it, and
trials do not outlive the orchestrator. Each trial leaves `inprocess.json` (its
outcome) in its directory, so a later process reports finished trials
correctly; a trial that was still running when its orchestrator exited is
reported FAILED, and counts as a failure on resume.

Failure classes: an exception raised by the function is USER, a cancelled call
CANCELLED; a trial whose orchestrator exited before it ended, or whose outcome
could not be written, is INFRASTRUCTURE.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from nasctl.errors import BadInputError, RunnerError, SpecError
from nasctl.runners.base import JobRequest, JobState, JobStatus, Runner, SubmittedJob
from nasctl.runners.launcher import read_json, write_json_atomic
from nasctl.search_spaces.function import FUNCTION_ENTRY_MODULE, parse_args, run_function
from nasctl.types import FailureClass

OUTCOME = "inprocess.json"
DEFAULT_WORKERS = 4


def outcome_path(trial_dir: str) -> str:
    """Where a function trial's outcome (`inprocess.json`) is kept in its directory."""
    return os.path.join(trial_dir, OUTCOME)


def function_call(request: JobRequest, scheduler: str = "inprocess") -> tuple[str, dict[str, Any]]:
    """The `trial.function` target and parameters of a request.

    Raises:
        RunnerError: the request is not a `trial.function` trial.
    """
    args = request.args
    if len(args) < 3 or args[:2] != ["-m", FUNCTION_ENTRY_MODULE]:
        raise RunnerError(
            f"the {scheduler} runner runs only trial.function trials, not {request.entrypoint} {' '.join(args[:2])}",
            "set trial.function, or use runner.scheduler local_cwd",
        )
    parsed = parse_args(args[2:])
    return parsed.target, parsed.parameters


def run_and_record(request: JobRequest, target: str, params: dict[str, Any],
                   extra: dict[str, Any] | None = None, *, step: int = 0, path: str | None = None) -> None:
    """Run a function trial here (its metrics logged to NASCTL_LOG_DIR at `step`) and
    write its outcome file (`path`, by default the trial folder's `inprocess.json`),
    which is what a later process reads its end from. The function's exception is the
    trial's failure (recorded); failing to write the outcome raises."""
    outcome: dict[str, Any] = {"started": time.time(), **(extra or {})}
    try:
        outcome["values"] = run_function(target, params, request.env["NASCTL_LOG_DIR"], step=step)
        outcome["ok"] = True
    except BadInputError as e:
        outcome.update(ok=False, error=str(e))
    except Exception as e:  # the trial's failure, reported like a crashed process's
        outcome.update(ok=False, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
    outcome["ended"] = time.time()
    write_json_atomic(path or outcome_path(request.trial_dir), outcome)


def recorded_status(trial_dir: str | None, path: str | None = None) -> JobStatus | None:
    """A finished call's status from the outcome it left (`path`, by default the one in
    `trial_dir`); None while there is none. A failure is the trial's own (USER) unless
    the outcome names another class (a simulated preemption is INFRASTRUCTURE)."""
    where = path or (outcome_path(trial_dir) if trial_dir else None)
    outcome = read_json(where) if where else None
    if outcome is None:
        return None
    if outcome.get("ok"):
        return JobStatus(JobState.SUCCEEDED, None, 0)
    try:
        cls = FailureClass(outcome.get("failure_class") or FailureClass.USER.value)
    except ValueError:
        cls = FailureClass.USER
    state = JobState.CANCELLED if cls == FailureClass.CANCELLED else JobState.FAILED
    return JobStatus(state, str(outcome.get("error")), 1 if cls == FailureClass.USER else None, cls,
                     node=outcome.get("node"))


class InProcessRunner(Runner):
    """Runs `trial.function` calls on a thread pool of `cfg.workers` threads."""

    scheduler = "inprocess"
    poll_interval = 0.25

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        cfg = dict(cfg or {})
        workers = cfg.pop("workers", DEFAULT_WORKERS)
        if cfg:
            raise SpecError(f"runner.cfg has options the inprocess runner does not take: {sorted(cfg)}",
                            "it takes only: workers")
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 256:
            raise SpecError(f"runner.cfg.workers must be an integer from 1 to 256, got {workers!r}",
                            "set the number of threads that evaluate trials")
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nasctl-inprocess")
        self._jobs: dict[str, tuple[Future[None], JobRequest]] = {}
        self._cancelled: set[str] = set()
        self._lock = threading.Lock()
        self._wake: Callable[[], None] | None = None

    def dryrun(self, request: JobRequest) -> str:
        target, params = function_call(request)
        return (f"in the orchestrator's process: {target}({json.dumps(params, sort_keys=True)}) "
                f"-> metrics logged to {request.env.get('NASCTL_LOG_DIR')}")

    def submit(self, request: JobRequest) -> SubmittedJob:
        target, params = function_call(request)
        existing = self.find(request)
        if existing is not None:  # never run one trial twice
            return existing
        handle = f"inprocess://{request.name}"
        os.makedirs(request.trial_dir, exist_ok=True)
        code_dirs = [p for p in request.env.get("PYTHONPATH", "").split(os.pathsep) if p]
        with self._lock:
            for d in reversed(code_dirs):
                if d not in sys.path:
                    sys.path.insert(0, d)
            future = self._pool.submit(self._run, request, target, params)
            self._jobs[handle] = (future, request)
        return SubmittedJob(handle, {"trial_dir": request.trial_dir, "submitted": time.time()})

    def _run(self, request: JobRequest, target: str, params: dict[str, Any]) -> None:
        try:
            run_and_record(request, target, params)
        finally:
            if self._wake is not None:
                self._wake()

    def notify_on_end(self, wake: Callable[[], None]) -> bool:
        """Every call ends in this process: `wake` is called once its outcome is written."""
        self._wake = wake
        return True

    def _one_status(self, job: SubmittedJob) -> JobStatus:
        if job.handle in self._cancelled:
            return JobStatus(JobState.CANCELLED, "cancelled", failure_class=FailureClass.CANCELLED)
        trial_dir = job.metadata.get("trial_dir")
        recorded = recorded_status(trial_dir)
        if recorded is not None:
            return recorded
        entry = self._jobs.get(job.handle)
        if entry is None and not trial_dir:
            return JobStatus(JobState.UNKNOWN, f"no in-process trial {job.handle} in this process")
        if entry is None:
            return JobStatus(JobState.FAILED, "the orchestrator that ran this in-process trial exited before it ended",
                             failure_class=FailureClass.INFRASTRUCTURE)
        future, _ = entry
        if future.done() and future.exception() is not None:  # could not even record its outcome
            return JobStatus(JobState.FAILED, f"{type(future.exception()).__name__}: {future.exception()}",
                             failure_class=FailureClass.INFRASTRUCTURE)
        return JobStatus(JobState.RUNNING if future.running() else JobState.PENDING)

    def status(self, jobs: Sequence[SubmittedJob]) -> Mapping[str, JobStatus]:
        return {job.handle: self._one_status(job) for job in jobs}

    def cancel(self, job: SubmittedJob) -> None:
        entry = self._jobs.get(job.handle)
        if entry is not None and not entry[0].done():
            entry[0].cancel()  # a call that has started runs to its end; its result is ignored
            self._cancelled.add(job.handle)

    def log_tail(self, job: SubmittedJob, lines: int = 40) -> str:
        trial_dir = job.metadata.get("trial_dir")
        outcome = (read_json(outcome_path(trial_dir)) if trial_dir else None) or {}
        text = outcome.get("traceback") or outcome.get("error") or ""
        return "\n".join(str(text).splitlines()[-lines:])

    def find(self, request: JobRequest) -> SubmittedJob | None:
        handle = f"inprocess://{request.name}"
        if handle in self._jobs or os.path.exists(outcome_path(request.trial_dir)):
            return SubmittedJob(handle, {"trial_dir": request.trial_dir, "submitted": time.time()})
        return None

    def close(self) -> None:
        """Wait for calls in progress (they cannot be interrupted), then drop the pool."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def create_runner(cfg: Mapping[str, Any] | None = None) -> InProcessRunner:
    return InProcessRunner(cfg)


__all__ = ["InProcessRunner", "create_runner"]
