"""The runner contract: how a trial becomes a job on some scheduler.

A runner turns a `JobRequest` into a job and answers for it later from nothing
but the job handle (a string) and the runner metadata (a JSON dict) that
`submit` returned. Those two are all the store keeps, so a different process
holding a fresh runner instance must be able to poll, cancel and read logs.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nasctl.errors import SpecError
from nasctl.runners.clock import REAL_CLOCK, Clock
from nasctl.runners.devices import DeviceInventory
from nasctl.types import FailureClass


@dataclass(frozen=True)
class JobRequest:
    """Everything a scheduler needs to start one trial.

    Attributes:
        name: deterministic job name (experiment + trial index), used to detect
            a job that was submitted but never recorded.
        entrypoint: the executable (usually the orchestrator's Python).
        args: its arguments, parameters already rendered as `--name value`.
        env: extra environment (NASCTL_TRIAL_ID, NASCTL_LOG_DIR, thread counts).
        trial_dir: the trial's own directory; logs and TensorBoard files go there.
        cpu, mem_mb, gpu: resources per node (per replica).
        nodes: how many nodes the trial spans (`trial.resources.nodes`): a multi-node
            trial runs `runner.cfg.nproc_per_node` processes on each, under
            torch.distributed.run with its rendezvous on the first node
            (nasctl/runners/distributed.py). Only runners with `multi_node` take more than 1.
        preload: modules a local trial may be forked with, already imported
            (`trial.preload`; see nasctl/runners/warm.py). Other runners ignore it.
        attempt: which attempt of the trial this job is (1 first; a retry after an
            infrastructure failure is 2, 3, ...). Each attempt has its own job name
            and state folder (`attempt_suffix`), so its logs are kept and the claim
            guard of one attempt does not stop the next.
    """

    name: str
    entrypoint: str
    args: list[str]
    env: dict[str, str]
    trial_dir: str
    cpu: int = 1
    mem_mb: int = 2000
    gpu: int = 0
    preload: tuple[str, ...] = ()
    attempt: int = 1
    nodes: int = 1


def attempt_suffix(attempt: int) -> str:
    """What an attempt adds to its job's name and state folder: nothing for the first, `-aN` after."""
    return "" if attempt <= 1 else f"-a{attempt}"


class JobState(str, enum.Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True)
class JobStatus:
    """One poll's answer for one job.

    Attributes:
        state: where the job is.
        message: what the scheduler said (why it waits, why it failed).
        exit_code: the job's exit code where known.
        failure_class: for FAILED and CANCELLED, why (`FailureClass`); None lets the
            loop take FAILED as the trial's own failure and CANCELLED as a cancellation.
        node: the host the job runs or ran on, where the scheduler says.
        ended_at: for an ended job, when it ended (epoch seconds), from the job's
            own exit record or the scheduler's accounting, where either says: a job
            that ended while the scheduler could not be asked keeps its true duration.
        running_since: when the job's current run began (epoch seconds), where the
            scheduler says (Slurm's Start); None while it waits in the queue, or where
            the scheduler does not say (the loop then takes the poll that saw it run).
            A PENDING job's `message` is the scheduler's reason for the wait.
        device_seconds: for a job that succeeded, the device-seconds its trial's
            result took (its attempts so far, less their lost parts), where the
            runner keeps that account itself on a clock of its own (the simulated
            cluster's virtual time); None: the loop counts them from its polls.
    """

    state: JobState
    message: str | None = None
    exit_code: int | None = None
    failure_class: FailureClass | None = None
    node: str | None = None
    ended_at: float | None = None
    running_since: float | None = None
    device_seconds: float | None = None


@dataclass(frozen=True)
class SubmittedJob:
    """What the store keeps for a job: a handle string and JSON metadata."""

    handle: str
    metadata: dict[str, Any] = field(default_factory=dict)


class Runner(abc.ABC):
    """Base class of all runners.

    Contract (checked by tests/unit/test_runner_contract.py for every runner):

    - `dryrun` has no side effects and returns the exact request text.
    - `submit` starts the job and returns a `SubmittedJob` whose handle and
      metadata are JSON-serialisable. It raises `RunnerError` if nothing started.
    - `status` takes many jobs at once (one scheduler query per poll where the
      backend allows), never raises for a single unknown job (it reports
      UNKNOWN), and is side-effect free. When the scheduler itself cannot be
      reached, `status`, `submit` and `find` raise `SchedulerUnreachable` (a
      wait: the loop keeps its trials and retries), never a plain RunnerError. A FAILED or CANCELLED job carries its
      `FailureClass` (the runner maps its scheduler's states: node failures,
      preemptions and evictions are INFRASTRUCTURE, time limits TIMEOUT, a
      cancellation nasctl or a person asked for CANCELLED, the trial's own
      non-zero exit USER; a process killed by a signal nasctl did not send is
      INFRASTRUCTURE). A job whose own exit record says it exited 0 is
      SUCCEEDED, whatever the scheduler's final state (a time limit reached
      just after the trial finished).
    - `cancel` is idempotent: cancelling a finished job is not an error.
    - `log_tail` returns the last lines of the job's output ("" if none).
    - `find` returns the job already launched for a request (same deterministic
      name / trial directory), or None. It lets a restarted orchestrator tell
      "recorded but never submitted" from "submitted but not yet recorded".
    - All of the above work in a process that did not submit the job.
    """

    scheduler: str
    poll_interval: float = 5.0
    """Default seconds between status queries (`runner.cfg.poll_interval` overrides):
    gentle on a cluster's shared controller and accounting; local runners poll faster."""
    shared_status: bool = False
    queues: bool = False
    """Whether a submitted job may wait in a scheduler's queue before it runs (Slurm,
    Kubernetes, the simulated cluster): its attempt is then queued until a poll sees it
    RUNNING. False where a job runs as soon as it is submitted (local processes)."""
    """Whether the service should answer every experiment's status query from one
    scheduler query per poll (`nasctl.runners.pool`): True for cluster schedulers."""
    multi_node: bool = False
    """Whether a trial may span several nodes (`trial.resources.nodes` above 1): Slurm
    and Kubernetes; a local or simulated runner has one node."""

    @abc.abstractmethod
    def dryrun(self, request: JobRequest) -> str: ...

    @abc.abstractmethod
    def submit(self, request: JobRequest) -> SubmittedJob: ...

    @abc.abstractmethod
    def status(self, jobs: Sequence[SubmittedJob]) -> Mapping[str, JobStatus]: ...

    @abc.abstractmethod
    def cancel(self, job: SubmittedJob) -> None: ...

    @abc.abstractmethod
    def log_tail(self, job: SubmittedJob, lines: int = 40) -> str: ...

    @abc.abstractmethod
    def find(self, request: JobRequest) -> SubmittedJob | None: ...

    def close(self) -> None:
        """Release clients. Jobs keep running."""

    def notify_on_end(self, wake: Callable[[], None]) -> bool:
        """Ask to have `wake` called (from any thread) when a job this runner
        started in this process ends, so that the orchestrator polls at once
        instead of at its next tick. Returns whether the runner will; the
        default cannot know (its jobs run elsewhere) and the orchestrator polls."""
        return False

    def clock(self) -> Clock:
        """The time this runner's jobs run in, which the orchestrator's loop runs
        against: real time, except for a runner that simulates its jobs' durations
        (nasctl/runners/simulated.py), whose clock moves only when the loop waits."""
        return REAL_CLOCK

    def device_inventory(self) -> DeviceInventory | None:
        """The GPUs nasctl places this runner's trials on itself, or None where the
        scheduler does (Slurm's gres, Kubernetes' nvidia.com/gpu)."""
        return None

    def check_gpu(self, gpu: int) -> None:
        """Raise SpecError when a trial asking for `gpu` devices can never be placed."""

    def check_nodes(self, nodes: int) -> None:
        """Raise SpecError when a trial asks for more nodes than this runner can give one trial."""
        if nodes > 1 and not self.multi_node:
            raise SpecError(f"trial.resources.nodes is {nodes}, but runner.scheduler {self.scheduler} runs a trial "
                            "on one node",
                            "set trial.resources.nodes: 1 (more processes on one node: runner.cfg.nproc_per_node), "
                            "or use runner.scheduler slurm or kubernetes")

    def check_resources(self, cpu: int, mem_mb: int, gpu: int, nodes: int = 1) -> None:
        """Raise SpecError when a trial asking for these resources (`trial.resources`,
        `cpu`, `mem_mb` and `gpu` on each of `nodes` nodes) could never run: fewer than
        `nodes` nodes of the cluster offer that much. Called before anything is
        submitted; a scheduler that cannot be asked is not checked."""


def tail_file(path: str, lines: int) -> str:
    """The last `lines` lines of a text file, read from its end (cheap on big logs)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            block = min(size, max(4096, lines * 200))
            f.seek(size - block)
            data = f.read(block)
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    return "\n".join(text.splitlines()[-lines:])
