"""Local processes through TorchX's `local_cwd` scheduler, re-attachable after a restart.

Each trial is a TorchX AppDef with one role whose entrypoint is
`nasctl.runners.launcher` wrapping the training command. TorchX starts it in
its own process session, so trials keep running if the orchestrator dies.
TorchX keeps its job table in memory only; the launcher keeps the job's state
in `<trial_dir>/job/` (claim, pid and start time, exit status), and this runner
answers status, cancel, logs and find from those files. Any process that can
read the trial directory can therefore poll or cancel the job. Job output goes
to the trial's directory, never to a temporary directory.

Failure classes (`JobStatus.failure_class`): a non-zero exit of the trial is
USER, and so is a crash signal it raised itself (SIGSEGV, SIGABRT, ...). A trial
or launcher ended by any other signal nasctl did not send (a SIGTERM or SIGKILL
from someone else, the kernel's OOM killer), and a launcher that is gone without
an exit record, are INFRASTRUCTURE. `cancel` writes the launcher's cancel marker
before it signals, so a job it ends is CANCELLED.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from nasctl.errors import NasctlError, RunnerError, SpecError
from nasctl.runners import warm
from nasctl.runners.base import JobRequest, JobState, JobStatus, SubmittedJob, tail_file
from nasctl.runners.devices import (DeviceInventory, check_devices, check_gpu_request, check_trials_per_device,
                                    resolve_inventory)
from nasctl.runners.launcher import CANCEL_MARKER, CLAIM, DUPLICATE_EXIT, EXIT, LAUNCH, exit_record, read_claim, read_json
from nasctl.runners.options import Option, RunOptions
from nasctl.runners.outcome import record_status
from nasctl.runners.distributed import single_node_command
from nasctl.runners.torchx_base import NPROC_PER_NODE, ROLE, TorchXRunner, launched, state_dir, to_appdef
from nasctl.types import FailureClass

START_GRACE_SECONDS = 120.0  # a submitted job that has not written launch.json by then never started
ENDED_RELEASE_SECONDS = 5.0
"""How long `close` waits for the processes of jobs that recorded their exit to end."""
WARM_EXIT_SECONDS = 10.0
"""How long `close` waits for the warm server to exit when no trial launched here runs."""


def _alive(pid: Any, create_time: Any) -> bool:
    """Is `pid` still the process that started at `create_time`? (pids get reused)"""
    import psutil

    if not isinstance(pid, int):
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(proc.create_time() - float(create_time)) < 0.05
    except psutil.Error:
        return False


def _claimant(sdir: str) -> int | None:
    """The pid of the launcher that claimed the trial in `sdir`: None without a
    claim, 0 while the claim is still empty (created, pid not yet written)."""
    claimed = read_claim(sdir)
    if claimed is None:
        return None
    pid = claimed.get("pid")
    return pid if isinstance(pid, int) else 0


def _no_auto_cuda(value: Any) -> bool:
    if value:
        raise SpecError(
            "runner.cfg.auto_set_cuda_visible_devices numbers devices per trial, so every trial would get GPU 0",
            "remove it: nasctl gives each trial its own devices (runner.cfg.devices lists which)",
        )
    return False


OPTIONS = RunOptions(
    "local_cwd",
    own=(
        Option("devices", "list of device indices", "the GPUs trials are placed on (default: NASCTL_DEVICES, "
               "CUDA_VISIBLE_DEVICES, then detection; see nasctl/runners/devices.py)", None, check_devices),
        Option("trials_per_device", "int", "at most this many gpu: 1 trials share a device", 1,
               check_trials_per_device),
        NPROC_PER_NODE,
        Option("auto_set_cuda_visible_devices", "bool", "TorchX's option, taken over: nasctl places trials on "
               "devices itself, so it must stay false", False, _no_auto_cuda),
    ),
    reserved=frozenset({"log_dir"}),  # each trial's state folder
)


class LocalRunner(TorchXRunner):
    """Runs trials as local processes via TorchX `local_cwd`.

    Args:
        cfg: `OPTIONS`: TorchX's local_cwd run option `prepend_cwd`, plus nasctl's
            own: `devices` and `trials_per_device` (the GPU inventory trials are placed
            on, see nasctl/runners/devices.py) and `nproc_per_node` (run each trial
            under torchrun with that many processes). `log_dir` is set per trial by nasctl.
    """

    scheduler = "local_cwd"
    options = OPTIONS
    poll_interval = 0.25

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.nproc_per_node: int = self.own["nproc_per_node"]
        self._inventory: DeviceInventory | None = None
        self._warm: WarmServer | None = None
        self._launched: dict[str, str] = {}  # handle -> state dir of jobs launched here TorchX still holds

    def device_inventory(self) -> DeviceInventory:
        """The devices trials are placed on (resolved once: spec, NASCTL_DEVICES,
        CUDA_VISIBLE_DEVICES, then detection)."""
        if self._inventory is None:
            self._inventory = resolve_inventory(self.own)
        return self._inventory

    def check_gpu(self, gpu: int) -> None:
        check_gpu_request(gpu, self.device_inventory(), self.nproc_per_node)

    def _command(self, request: JobRequest) -> list[str]:
        return single_node_command([request.entrypoint, *request.args], self.nproc_per_node, state_dir(request))

    def _new_client(self) -> Any:
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
        return runner

    def _run_cfg(self, request: JobRequest) -> dict[str, Any]:
        return {**self.cfg, "log_dir": state_dir(request)}

    def appdef(self, request: JobRequest) -> Any:
        cmd = launched(sys.executable, request, self._command(request))
        # nasctl has placed the trial on its devices (CUDA_VISIBLE_DEVICES in its env);
        # TorchX's local scheduler would only warn that it did not number them itself
        return to_appdef(dataclasses.replace(request, gpu=0), image=os.getcwd(), entrypoint=cmd[0], args=cmd[1:])

    def dryrun(self, request: JobRequest) -> str:
        info = self._dryrun_info(request)
        # TorchX's local scheduler puts the request's PATH (the working folder) before this
        # process's own PATH when it starts the job: show the PATH the trial will have
        for replicas in info.request.role_params.values():
            for replica in replicas:
                replica.env["PATH"] = os.pathsep.join(p for p in (replica.env.get("PATH"), os.environ.get("PATH")) if p)
        return str(info)

    def _warm_env(self, request: JobRequest) -> dict[str, str]:
        """`NASCTL_WARM_SOCKET` for a trial with `preload`, starting the warm
        server on first use (see nasctl/runners/warm.py); {} without one."""
        if not request.preload or not warm.supported() or warm.warm_argv(
                self._command(request), sys.executable) is None:
            return {}
        env = {k: v for k, v in request.env.items() if k in SERVER_ENV}
        if self._warm is None or not self._warm.serves(request.preload, env):
            if self._warm is not None:
                self._warm.stop()
            self._warm = WarmServer.start(request.preload, env, os.path.dirname(request.trial_dir))
        return {warm.SOCKET_ENV: self._warm.socket_path}

    def _submit_info(self, request: JobRequest) -> Any:
        return self._dryrun_info(dataclasses.replace(request, env={**request.env, **self._warm_env(request)}))

    def _submit_error(self, request: JobRequest, error: Exception) -> NasctlError:
        return RunnerError(f"local_cwd could not start job {request.name}: {error}", "see the trial's log")

    def _submitted(self, request: JobRequest, handle: str, info: Any) -> dict[str, Any]:
        replica_dir = os.path.join(info.request.log_dir, ROLE, "0")
        self._launched[handle] = state_dir(request)
        return {
            "app_id": info.request.app_id,
            "state_dir": state_dir(request),
            "stdout": os.path.join(replica_dir, "stdout.log"),
            "stderr": os.path.join(replica_dir, "stderr.log"),
            "submitted": time.time(),
        }

    def find(self, request: JobRequest) -> SubmittedJob | None:
        sdir = state_dir(request)
        launch = read_json(os.path.join(sdir, LAUNCH))
        if launch is None and not os.path.exists(os.path.join(sdir, CLAIM)):
            return None
        launch = launch or {}
        handle = launch.get("torchx_job_id") or f"{self.scheduler}://torchx/{request.name}-reattached"
        return SubmittedJob(
            handle=str(handle),
            metadata={
                "state_dir": sdir,
                "stdout": launch.get("stdout"),
                "stderr": launch.get("stderr"),
                "submitted": launch.get("started", time.time()),
                "reattached": True,
                "devices": launch.get("devices"),
            },
        )

    def _reap(self, job: SubmittedJob) -> JobStatus | None:
        """TorchX's own view of a job this process launched (asking also reaps the
        finished process). None for jobs launched by another process."""
        if self._runner is None:
            return None
        try:
            st = self._runner.status(job.handle)
        except Exception:
            return None
        if st is None or st.is_terminal():
            self._launched.pop(job.handle, None)  # TorchX has closed its log streams (or never knew it)
        if st is None:
            return None
        if not st.is_terminal():
            return JobStatus(JobState.RUNNING)
        mapped = {"SUCCEEDED": JobState.SUCCEEDED, "CANCELLED": JobState.CANCELLED}.get(st.state.name, JobState.FAILED)
        return JobStatus(mapped, st.msg or None)

    def _one_status(self, job: SubmittedJob) -> JobStatus:
        sdir = job.metadata.get("state_dir")
        if not sdir:
            return JobStatus(JobState.UNKNOWN, "no state directory recorded for this job")
        known = self._reap(job)
        done = exit_record(sdir)
        launch = read_json(os.path.join(sdir, LAUNCH))
        node = str(launch["host"]) if launch and launch.get("host") else None
        if done is not None:
            return record_status(done, node)
        cancelled = os.path.exists(os.path.join(sdir, CANCEL_MARKER))
        if launch is not None:
            if _alive(launch.get("pid"), launch.get("create_time")):
                return JobStatus(JobState.RUNNING, node=node)
            if _alive(launch.get("child_pid"), launch.get("child_create_time")):
                return JobStatus(JobState.RUNNING, "launcher gone, training process still running", node=node)
            # exit.json may land between the two reads above
            if read_json(os.path.join(sdir, EXIT)) is not None:
                return self._one_status(job)
            if cancelled:
                return JobStatus(JobState.CANCELLED, "cancelled; the trial's processes ended without recording "
                                                     "an exit status", failure_class=FailureClass.CANCELLED, node=node)
            return JobStatus(JobState.FAILED, "the trial's processes ended without recording an exit status "
                                              "(killed with SIGKILL, or the machine restarted)",
                             failure_class=FailureClass.INFRASTRUCTURE, node=node)
        age = time.time() - float(job.metadata.get("submitted") or 0)
        claimant = _claimant(sdir)
        if claimant is not None and (_alive(claimant, None) or (claimant == 0 and age < START_GRACE_SECONDS)):
            # a launcher holds the claim and is about to write launch.json: the trial
            # is starting, even if this job's own launcher was a duplicate and has
            # already exited (two submissions of one trial)
            return JobStatus(JobState.PENDING)
        if known is not None:
            if known.state == JobState.RUNNING:
                return JobStatus(JobState.PENDING)
            # ended before the launcher recorded anything (cancelled early, or python failed to start)
            if cancelled or known.state == JobState.CANCELLED:
                return JobStatus(JobState.CANCELLED, known.message or "cancelled before the trial started",
                                 failure_class=FailureClass.CANCELLED)
            return JobStatus(JobState.FAILED, known.message or "the job ended before the trial started",
                             failure_class=FailureClass.INFRASTRUCTURE)
        if cancelled:
            return JobStatus(JobState.CANCELLED, "cancelled before the trial started",
                             failure_class=FailureClass.CANCELLED)
        if age < START_GRACE_SECONDS:
            return JobStatus(JobState.PENDING)
        return JobStatus(JobState.FAILED, f"the job never started within {START_GRACE_SECONDS:.0f}s of submission",
                         failure_class=FailureClass.INFRASTRUCTURE)

    def status(self, jobs: Sequence[SubmittedJob]) -> Mapping[str, JobStatus]:
        return {job.handle: self._one_status(job) for job in jobs}

    def _end(self, job: SubmittedJob) -> None:
        """SIGTERM the job's processes (the launcher's whole process group while it runs)."""
        sdir = job.metadata.get("state_dir")
        launch = read_json(os.path.join(sdir, LAUNCH)) if sdir else None
        try:
            if launch and _alive(launch.get("pid"), launch.get("create_time")):
                # the launcher leads its own session: signal the whole group
                os.killpg(int(launch["pid"]), signal.SIGTERM)
            elif launch and _alive(launch.get("child_pid"), launch.get("child_create_time")):
                os.kill(int(launch["child_pid"]), signal.SIGTERM)
            elif self._runner is not None and self._reap(job) is not None:
                self._runner.cancel(job.handle)
        except ProcessLookupError:
            pass  # already gone
        except (OSError, RuntimeError) as e:
            raise RunnerError(f"could not cancel {job.handle}: {e}") from e

    def log_tail(self, job: SubmittedJob, lines: int = 40) -> str:
        sdir = job.metadata.get("state_dir")
        launch = (read_json(os.path.join(sdir, LAUNCH)) if sdir else None) or {}
        out, err = launch.get("stdout") or job.metadata.get("stdout"), launch.get("stderr") or job.metadata.get("stderr")
        if isinstance(out, str) and isinstance(err, str):  # TorchX's copy of both streams, in the order written,
            combined = os.path.join(os.path.dirname(out), "combined.log")  # once it holds all of them
            try:
                sizes = [os.path.getsize(p) if os.path.isfile(p) else 0 for p in (combined, out, err)]
            except OSError:  # removed meanwhile: the streams below say what is left
                sizes = [0, 0, 0]
            if sizes[0] > 0 and sizes[0] >= sizes[1] + sizes[2]:
                return tail_file(combined, lines)
        parts = []
        seen = set()
        for stream in ("stdout", "stderr"):  # else the output, then the errors (a traceback last)
            # the launch that ran the trial (it may not be the last one submitted)
            path = launch.get(stream) or job.metadata.get(stream)
            if not path or path in seen or not os.path.isfile(path):
                continue
            seen.add(path)
            text = tail_file(path, lines)
            if text.strip():
                parts.append(text)
        return "\n".join(parts)

    def _release_ended(self, timeout: float = ENDED_RELEASE_SECONDS) -> None:
        """Let TorchX see the end of the jobs launched here that have recorded
        their exit: seeing it, TorchX closes the job's log files and joins the
        thread that copies its output. A job is often finished for nasctl (its
        exit.json) a moment before its process has exited; without this, the
        last trials' log threads would outlive the run in a long-lived process
        (the service, a notebook)."""
        deadline = time.monotonic() + timeout
        while True:
            ending = [h for h, sdir in self._launched.items() if os.path.exists(os.path.join(sdir, EXIT))]
            ending = [h for h in ending if (st := self._reap(SubmittedJob(h, {}))) is not None
                      and st.state == JobState.RUNNING]
            if not ending or time.monotonic() >= deadline:
                return
            time.sleep(0.05)

    def close(self) -> None:
        """Drop the TorchX client, leaving running jobs running.

        TorchX's LocalScheduler kills every app it launched in close() and in
        __del__. Jobs are ours to keep (a later `nasctl resume` re-attaches
        them), so its app table is emptied before the scheduler is dropped.
        """
        self._release_ended()
        if self._warm is not None:
            # it exits once the trials it forked have ended: with none left, wait
            # for that (and reap it), so no process of this run outlives it
            self._warm.stop(wait=0.0 if self._launched else WARM_EXIT_SECONDS)
            self._warm = None
        if self._runner is not None:
            for sched in getattr(self._runner, "_scheduler_instances", {}).values():
                apps = getattr(sched, "_apps", None)
                if isinstance(apps, dict):
                    apps.clear()
        super().close()


SERVER_ENV = ("PYTHONPATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""The trial environment a warm server starts with, because imports read it (the
search path, thread pools); a trial whose values differ gets a new server."""


class WarmServer:
    """The orchestrator's handle on one warm server process (nasctl/runners/warm.py)."""

    def __init__(self, proc: subprocess.Popen[bytes], socket_path: str, preload: tuple[str, ...],
                 env: dict[str, str]) -> None:
        self.proc, self.socket_path, self.preload, self.env = proc, socket_path, preload, env

    @classmethod
    def start(cls, preload: Sequence[str], env: Mapping[str, str], log_dir: str) -> WarmServer:
        """Start a server that imports `preload` with the trials' common `env`;
        its log goes to `log_dir`/warm-server.log. Returns at once: trials start
        cold until it listens."""
        private = tempfile.mkdtemp(prefix="nasctl-warm-")  # 0700: only this user reaches the socket
        sock = os.path.join(private, "sock")
        os.makedirs(log_dir, exist_ok=True)
        full_env = {**os.environ, **env, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
        with open(os.path.join(log_dir, "warm-server.log"), "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "nasctl.runners.warm", "--socket", sock, "--parent", str(os.getpid()),
                 "--preload", ",".join(preload)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=full_env,
                start_new_session=True,  # a Ctrl-C in the terminal is the orchestrator's to handle
            )
        return cls(proc, sock, tuple(preload), dict(env))

    def serves(self, preload: Sequence[str], env: Mapping[str, str]) -> bool:
        return self.proc.poll() is None and tuple(preload) == self.preload and dict(env) == self.env

    def stop(self, wait: float = 0.0) -> None:
        """Stop accepting trials; the server exits after its running trials end.
        Waits up to `wait` seconds for it to exit."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        if wait > 0:
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                pass


def create_runner(cfg: Mapping[str, Any] | None = None) -> LocalRunner:
    return LocalRunner(cfg)


__all__ = ["DUPLICATE_EXIT", "OPTIONS", "LocalRunner", "ROLE", "create_runner", "state_dir", "to_appdef"]
