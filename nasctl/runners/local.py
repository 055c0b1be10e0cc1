"""Local processes through TorchX's `local_cwd` scheduler.

Each trial is a TorchX AppDef with one role, launched with the torchx Runner
API. TorchX starts each replica in its own process session, so trials keep
running if the orchestrator dies. Job output goes to the trial's directory
(`<trial_dir>/job/...`), never to a temporary directory, and the paths are
stored in the runner metadata so a fresh process can read them.
"""

from __future__ import annotations

import glob
import os
import signal
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from nasctl.errors import RunnerError, SpecError
from nasctl.runners.base import JobRequest, JobState, JobStatus, Runner, SubmittedJob, tail_file

ROLE = "trial"
_ALLOWED_CFG = {"prepend_cwd", "auto_set_cuda_visible_devices"}

_STATE_MAP = {
    "UNSUBMITTED": JobState.PENDING,
    "SUBMITTED": JobState.PENDING,
    "PENDING": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "SUCCEEDED": JobState.SUCCEEDED,
    "FAILED": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "UNKNOWN": JobState.UNKNOWN,
}


def to_appdef(request: JobRequest, image: str) -> Any:
    """The TorchX AppDef for one trial (shared by every TorchX-backed runner)."""
    from torchx import specs

    return specs.AppDef(
        name=request.name,
        roles=[
            specs.Role(
                name=ROLE,
                image=image,
                entrypoint=request.entrypoint,
                args=list(request.args),
                env=dict(request.env),
                resource=specs.Resource(cpu=request.cpu, gpu=request.gpu, memMB=request.mem_mb),
            )
        ],
    )


class LocalRunner(Runner):
    """Runs trials as local processes via TorchX `local_cwd`.

    Args:
        cfg: TorchX local_cwd run options from the spec (`prepend_cwd`,
            `auto_set_cuda_visible_devices`); `log_dir` is set per trial by nasctl.
    """

    scheduler = "local_cwd"

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        cfg = dict(cfg or {})
        unknown = set(cfg) - _ALLOWED_CFG
        if unknown:
            raise SpecError(
                f"runner.cfg has options {sorted(unknown)} that local_cwd does not take",
                f"allowed: {sorted(_ALLOWED_CFG)} (log_dir is set by nasctl to the trial's directory)",
            )
        self.cfg = cfg
        self._runner: Any = None

    @property
    def torchx(self) -> Any:
        if self._runner is None:
            from torchx.runner import get_runner

            # TorchX's local scheduler installs SIGINT/SIGTERM handlers of its own
            # when it is created. Signals belong to the orchestrator (a stop must
            # land between loop steps, never between "submitted" and "recorded"),
            # so create the scheduler now and put the previous handlers back.
            main = threading.current_thread() is threading.main_thread()
            saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
            runner = get_runner(cache_size=10_000)
            runner._scheduler(self.scheduler)  # noqa: SLF001 - instantiate it eagerly
            for sig, handler in saved.items():
                signal.signal(sig, handler)
            self._runner = runner
        return self._runner

    def _dryrun_info(self, request: JobRequest) -> Any:
        cfg = {**self.cfg, "log_dir": os.path.join(request.trial_dir, "job")}
        return self.torchx.dryrun(to_appdef(request, image=os.getcwd()), self.scheduler, cfg=cfg)

    def dryrun(self, request: JobRequest) -> str:
        return str(self._dryrun_info(request))

    def submit(self, request: JobRequest) -> SubmittedJob:
        try:
            info = self._dryrun_info(request)
            handle = self.torchx.schedule(info)
        except Exception as e:  # torchx raises assorted types (OSError, ValueError, ...)
            raise RunnerError(f"local_cwd could not start job {request.name}: {e}", "see the trial's log") from e
        replica_dir = os.path.join(info.request.log_dir, ROLE, "0")
        return SubmittedJob(
            handle=handle,
            metadata={
                "app_id": info.request.app_id,
                "stdout": os.path.join(replica_dir, "stdout.log"),
                "stderr": os.path.join(replica_dir, "stderr.log"),
            },
        )

    def status(self, jobs: Sequence[SubmittedJob]) -> Mapping[str, JobStatus]:
        out: dict[str, JobStatus] = {}
        for job in jobs:
            try:
                st = self.torchx.status(job.handle)
            except Exception as e:  # an unknown or malformed handle
                out[job.handle] = JobStatus(JobState.UNKNOWN, f"status query failed: {e}")
                continue
            if st is None:
                out[job.handle] = JobStatus(JobState.UNKNOWN, "this process did not launch the job")
                continue
            msg = st.msg or None
            out[job.handle] = JobStatus(_STATE_MAP.get(st.state.name, JobState.UNKNOWN), msg)
        return out

    def cancel(self, job: SubmittedJob) -> None:
        try:
            self.torchx.cancel(job.handle)
        except Exception as e:
            raise RunnerError(f"could not cancel {job.handle}: {e}") from e

    def log_tail(self, job: SubmittedJob, lines: int = 40) -> str:
        parts = []
        for stream in ("stderr", "stdout"):
            path = job.metadata.get(stream)
            if not path:
                continue
            text = tail_file(path, lines)
            if text.strip():
                parts.append(text)
        return "\n".join(parts)

    def close(self) -> None:
        # TorchX's close() terminates local jobs still running; they are ours to
        # keep, so only drop the reference.
        self._runner = None


def find_job_logs(trial_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(trial_dir, "job", "**", "*.log"), recursive=True))


def create_runner(cfg: Mapping[str, Any] | None = None) -> LocalRunner:
    return LocalRunner(cfg)
