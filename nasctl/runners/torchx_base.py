"""What every TorchX-backed runner shares: the client, the AppDef, dry run, submit and cancel.

A subclass names its TorchX scheduler and declares its `runner.cfg` options
(`options`: TorchX's run options plus nasctl's own, checked when the runner is
built), builds the trial's AppDef (`appdef`), says what to keep of a submitted
job (`_submitted`) and how to end one (`_end`), and answers status, logs and
find its own way. Each trial runs under `nasctl.runners.launcher`, which keeps the
job's state in the attempt's state folder (`state_dir`) in the trial directory.
"""

from __future__ import annotations

import abc
import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from nasctl.errors import NasctlError, RunnerError
from nasctl.runners.base import JobRequest, Runner, SubmittedJob, attempt_suffix, tail_file
from nasctl.runners.distributed import single_node_command
from nasctl.runners.launcher import mark_cancel
from nasctl.runners.options import Option, RunOptions, positive_int

ROLE = "trial"
"""The AppDef's one role (the Slurm runner renames it after the trial's job name)."""

NPROC_PER_NODE = Option(
    "nproc_per_node", "int",
    "run each trial under torch.distributed.run with that many processes per node (TorchX's dist.ddp; "
    "trial.resources.nodes says how many nodes)",
    1, positive_int("nproc_per_node", "nproc_per_node: 2"))


def to_appdef(request: JobRequest, image: str, entrypoint: str, args: list[str]) -> Any:
    """The TorchX AppDef for one trial."""
    from torchx import specs

    return specs.AppDef(
        name=request.name,
        roles=[
            specs.Role(
                name=ROLE,
                image=image,
                entrypoint=entrypoint,
                args=args,
                env=dict(request.env),
                resource=specs.Resource(cpu=request.cpu, gpu=request.gpu, memMB=request.mem_mb),
            )
        ],
    )


def state_dir(request: JobRequest) -> str:
    """Where the job of one attempt keeps its claim, launch and exit records and its logs."""
    return os.path.join(request.trial_dir, "job" + attempt_suffix(request.attempt))


def launched(python: str, request: JobRequest, command: Sequence[str], nproc_per_node: int = 1,
             node_args: Sequence[str] | None = None) -> list[str]:
    """`command` wrapped in the launcher that claims the trial and records its exit.

    On one node with `nproc_per_node` above 1 the launcher runs it under
    torch.distributed.run --standalone (TorchX's dist.ddp), spelled out here. A
    multi-node request (`request.nodes` above 1), or any request when `node_args` is
    given (Kubernetes: the node rank and node 0's address as TorchX macros), has the
    launcher on each node start torch.distributed.run itself, with that node's rank and
    the rendezvous on node 0 (nasctl/runners/distributed.py)."""
    head = [python, "-m", "nasctl.runners.launcher", "--state-dir", state_dir(request)]
    if request.nodes <= 1 and node_args is None:
        return [*head, "--", *single_node_command(command, nproc_per_node, state_dir(request))]
    return [*head, "--nnodes", str(request.nodes), "--nproc-per-node", str(nproc_per_node), *(node_args or ()),
            "--", *command]


class TorchXRunner(Runner):
    """A runner that hands each trial to a TorchX scheduler as a one-role AppDef.

    Args:
        cfg: `runner.cfg` without the control settings; checked against `options`.

    Raises:
        SpecError: an option the scheduler does not take, a reserved one, a bad value,
            or a required one missing (one line naming the key and the fix).
    """

    options: ClassVar[RunOptions]
    """Every `runner.cfg` key this runner takes (TorchX's run options and nasctl's own)."""
    cfg: dict[str, Any]
    """TorchX's run options, passed to TorchX."""
    own: dict[str, Any]
    """nasctl's own options, checked, with their defaults filled in."""

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        self.cfg, self.own = self.options.resolve(cfg)
        self._runner: Any = None

    @property
    def torchx(self) -> Any:
        """The TorchX runner, made on first use (imports are slow, clients hold connections)."""
        if self._runner is None:
            self._runner = self._new_client()
        return self._runner

    def _new_client(self) -> Any:
        from torchx.runner import get_runner

        return get_runner()

    @abc.abstractmethod
    def appdef(self, request: JobRequest) -> Any:
        """The TorchX AppDef for one trial (`to_appdef` with the runner's image and command)."""

    def _run_cfg(self, request: JobRequest) -> dict[str, Any]:
        """The run options TorchX gets for one trial."""
        return dict(self.cfg)

    def _dryrun_info(self, request: JobRequest) -> Any:
        """TorchX's `AppDryRunInfo` for the trial: the request `schedule` would send."""
        return self.torchx.dryrun(self.appdef(request), self.scheduler, cfg=self._run_cfg(request))

    def dryrun(self, request: JobRequest) -> str:
        """The request TorchX would send for this trial, as text."""
        return str(self._dryrun_info(request))

    def _submit_info(self, request: JobRequest) -> Any:
        """The dry-run info `submit` schedules (a runner may add what only a real launch needs)."""
        return self._dryrun_info(request)

    @abc.abstractmethod
    def _submitted(self, request: JobRequest, handle: str, info: Any) -> dict[str, Any]:
        """The metadata to keep for a job TorchX has scheduled under `handle` (JSON).

        Raises:
            RunnerError: the handle is not one of this scheduler's.
        """

    @abc.abstractmethod
    def _submit_error(self, request: JobRequest, error: Exception) -> NasctlError:
        """The error to raise when TorchX could not schedule the job (`RunnerError`, or
        `SchedulerUnreachable` when the scheduler does not answer)."""

    def submit(self, request: JobRequest) -> SubmittedJob:
        """Schedule the trial's AppDef through TorchX; its state folder exists before it starts."""
        try:
            info = self._submit_info(request)
            os.makedirs(state_dir(request), exist_ok=True)
            handle = self.torchx.schedule(info)
        except NasctlError:
            raise
        except Exception as e:  # TorchX and the clients under it raise assorted types
            raise self._submit_error(request, e) from e
        return SubmittedJob(handle=handle, metadata=self._submitted(request, handle, info))

    def owns(self, handle: str) -> bool:
        """Is `handle` a job handle of this runner's scheduler? (others are not cancelled)"""
        return True

    @abc.abstractmethod
    def _end(self, job: SubmittedJob) -> None:
        """End the job on its scheduler; a job already gone is not an error.

        Raises:
            RunnerError: the scheduler refused.
        """

    def cancel(self, job: SubmittedJob) -> None:
        """End the job, after writing the launcher's cancel marker, so that its exit
        record says the signal that follows was nasctl's (see launcher.CANCEL_MARKER).
        The marker is taken back when the scheduler refuses: the job goes on."""
        if not self.owns(job.handle):
            return
        marker = mark_cancel(job.metadata.get("state_dir"), job.handle)
        try:
            self._end(job)
        except RunnerError:
            if marker:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(marker)
            raise

    @staticmethod
    def _tail(job: SubmittedJob, keys: Sequence[str], lines: int) -> str:
        """The ends of the job's files named in its metadata under `keys`, in that order."""
        parts = []
        for key in keys:
            path = job.metadata.get(key)
            if path and os.path.isfile(path):
                text = tail_file(str(path), lines)
                if text.strip():
                    parts.append(text)
        return "\n".join(parts)

    def close(self) -> None:
        """Drop the TorchX client; jobs keep running."""
        self._runner = None


__all__ = ["NPROC_PER_NODE", "ROLE", "TorchXRunner", "launched", "state_dir", "to_appdef"]
