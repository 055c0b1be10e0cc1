"""Slurm jobs through TorchX's `slurm` scheduler, re-attachable by job id.

Each trial is one TorchX AppDef whose single role is named after the trial's
deterministic job name, so the Slurm job is called `<experiment>-<index>-0`.
TorchX builds the sbatch script (`submit_dryrun`) and submits it; nasctl only
points the job's output at the trial directory (TorchX would write it next to
wherever the orchestrator happened to start) and wraps the training command in
`nasctl.runners.launcher`, which claims the trial directory so that a trial
submitted twice (an orchestrator killed between `sbatch` and recording the job)
trains once.

The trial directory must be on a file system that the Slurm nodes and the
orchestrator both see: the job writes TensorBoard files and its output there,
and the orchestrator reads them.

Status comes from accounting (`sacct`): one call answers for every job of a
poll. Jobs that accounting does not list yet (just submitted) are looked up
in the controller (`squeue`) in that same poll. TorchX's own `describe` is
not used: it asserts on the `CANCELLED by <uid>` state of Slurm 22.05 and asks
once per job.

Runner options (`runner.cfg`, declared in `OPTIONS`): TorchX's slurm run options (`partition`,
`time`, `comment`, `constraint`, `mail-user`, `mail-type`; `job_dir` is
refused: nasctl places each job in its trial directory), defaults for them from
`.torchxconfig`, and `nproc_per_node` (default 1): run the trial under
`torch.distributed.run --standalone` with that many processes, as TorchX's
`dist.ddp` component does on one node; and `signal` (e.g. `USR1@120`): sbatch
`--signal`, so that Slurm warns the trial that many seconds before its time limit
(the launcher passes the warning on to the training process). Resources come from
`trial.resources`: `--cpus-per-task` = cpu x nproc_per_node, `--mem` = mem_mb,
`--gpus-per-task` = gpu.

Requeues. TorchX submits with `--requeue`, so Slurm runs a job again under the
same job id after a node failure or a preemption (or `scontrol requeue`). The
launcher's claim names the job, so the restarted job is let through (a second
submission of the trial is still refused) and resumes from the trial's
`last.ckpt`. Both sbatch and srun open their output with `--open-mode=append`:
the first run's output is kept. While Slurm holds a requeued job it is PENDING:
the same attempt continues.

Failure classes: see `map_state`. A job whose launcher recorded the trial's exit 0
is SUCCEEDED whatever Slurm's final state (`nasctl.runners.outcome.settle`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from nasctl.errors import NasctlError, RunnerError, SchedulerUnreachable, SpecError
from nasctl.runners.base import JobRequest, JobState, JobStatus, SubmittedJob
from nasctl.runners.launcher import DUPLICATE_EXIT, LAUNCH, exit_record, read_json
from nasctl.runners.options import Option, RunOptions
from nasctl.runners.outcome import settle
from nasctl.runners.torchx_base import NPROC_PER_NODE, TorchXRunner, launched, state_dir, to_appdef
from nasctl.types import FailureClass

SCHEDULER = "slurm"
SESSION = "torchx"
START_GRACE_SECONDS = 120.0  # accounting may list a new job a moment after sbatch returns
CLUSTER_HINT = "is a Slurm cluster reachable from here? for the local test cluster run scripts/slurm-local.sh up"

PENDING_STATES = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED",
                  "CONFIGURING", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
RUNNING_STATES = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "STOPPED"}
FAILED_REASONS = {
    "FAILED": "the job exited with a non-zero code",
    "TIMEOUT": "the job ran past its Slurm time limit (raise runner.cfg.time)",
    "OUT_OF_MEMORY": "the job ran out of memory (raise trial.resources.mem_mb)",
    "NODE_FAIL": "the node running the job failed",
    "BOOT_FAIL": "the node could not boot for the job",
    "DEADLINE": "the job reached its deadline before it could run",
    "PREEMPTED": "the job was preempted",
    "REVOKED": "the job was revoked by a federated sibling",
}
FAILURE_CLASSES = {
    "FAILED": FailureClass.USER,
    # The job went past the memory it asked for (trial.resources.mem_mb): the trial's
    # own demand, which a retry on another node would meet again.
    "OUT_OF_MEMORY": FailureClass.USER,
    "TIMEOUT": FailureClass.TIMEOUT,
    "DEADLINE": FailureClass.TIMEOUT,
    "NODE_FAIL": FailureClass.INFRASTRUCTURE,
    "BOOT_FAIL": FailureClass.INFRASTRUCTURE,
    "PREEMPTED": FailureClass.INFRASTRUCTURE,
    "REVOKED": FailureClass.INFRASTRUCTURE,
}
"""The `FailureClass` of each Slurm state that ends a job without a result (CANCELLED is CANCELLED)."""
SIGNAL_OPTION = re.compile(r"(R:)?(SIG)?(USR1|USR2)(@([0-9]{1,5}))?")
UNSCHEDULABLE_REASONS = {
    "PartitionConfig": "the request exceeds what the partition's nodes offer",
    "PartitionNodeLimit": "the request needs more nodes than the partition allows",
    "PartitionTimeLimit": "runner.cfg.time is above the partition's time limit",
    "BadConstraints": "no node has the features runner.cfg.constraint asks for",
    "InvalidQOS": "the job's QOS is invalid",
    "InvalidAccount": "the job's account is invalid",
    "AccountNotAllowed": "the job's account may not use the partition",
    "QOSNotAllowed": "the job's QOS may not use the partition",
}
"""Reasons for which Slurm holds a job PENDING that waiting cannot clear: the job is
ended UNSCHEDULABLE (and cancelled) instead of being waited on forever."""


@dataclass(frozen=True)
class SlurmRecord:
    """One job as Slurm reports it."""

    job_id: str
    name: str
    state: str
    exit_code: int | None
    reason: str
    node: str = ""
    start: str = ""
    end: str = ""


def slurm_time(text: str) -> float | None:
    """A time as Slurm prints it (`2026-11-26T21:55:02`, the cluster's local time) in
    epoch seconds; None for `Unknown`, `None` and anything else."""
    try:
        return datetime.fromisoformat(text.strip()).timestamp() if text and text[0].isdigit() else None
    except ValueError:
        return None


def ended_at(exit_record: Mapping[str, Any] | None, record: SlurmRecord) -> float | None:
    """When an ended job's trial ended: the launcher's own exit record where it wrote one
    (a job that ends while slurmctld is down is given its end time by the controller
    only once it is back), else accounting's End."""
    ended = (exit_record or {}).get("ended")
    if isinstance(ended, (int, float)) and not isinstance(ended, bool):
        return float(ended)
    return slurm_time(record.end)


def base_state(state: str) -> str:
    """A Slurm state without what follows it (`CANCELLED by 0` -> `CANCELLED`)."""
    return state.split()[0] if state.strip() else ""


def map_state(record: SlurmRecord) -> JobStatus:
    """A Slurm job state (as sacct/squeue print it, e.g. `CANCELLED by 0`) as a `JobStatus`.

    Every Slurm 22.05 state is mapped; an unrecognised one is UNKNOWN. A job that
    ended without a result carries its class (`FAILURE_CLASSES`; CANCELLED, by nasctl
    or by anyone, is CANCELLED). A requeued job (REQUEUED, REQUEUE_HOLD, ...) is
    PENDING: Slurm runs it again under the same job id, so the attempt goes on.
    """
    base = base_state(record.state)
    node = record.node if record.node and record.node not in ("None", "None assigned", "(null)") else None
    if base in PENDING_STATES:
        reason = record.reason.split(",")[0].strip()
        if reason in UNSCHEDULABLE_REASONS:
            return JobStatus(JobState.FAILED, f"Slurm job {record.job_id} can never run: it is held PENDING "
                             f"({reason}: {UNSCHEDULABLE_REASONS[reason]})",
                             failure_class=FailureClass.UNSCHEDULABLE)
        return JobStatus(JobState.PENDING, None if record.reason in ("", "None") else record.reason)
    start = slurm_time(record.start)
    if base in RUNNING_STATES:
        return JobStatus(JobState.RUNNING, node=node, running_since=start)
    if base == "COMPLETED":
        return JobStatus(JobState.SUCCEEDED, None, record.exit_code, node=node, running_since=start)
    if base == "CANCELLED":
        return JobStatus(JobState.CANCELLED, f"Slurm job {record.job_id}: {record.state}", record.exit_code,
                         FailureClass.CANCELLED, node, running_since=start)
    if base in FAILED_REASONS:
        code = f" (exit code {record.exit_code})" if base == "FAILED" and record.exit_code is not None else ""
        return JobStatus(JobState.FAILED, f"Slurm job {record.job_id} {base}: {FAILED_REASONS[base]}{code}",
                         record.exit_code, FAILURE_CLASSES[base], node, running_since=start)
    return JobStatus(JobState.UNKNOWN, f"Slurm job {record.job_id} is in state {record.state!r}")


@dataclass(frozen=True)
class NodeOffer:
    """What one node of a partition offers a job (`sinfo`)."""

    node: str
    cpus: int
    mem_mb: int
    gpus: int


def _gres_gpus(gres: str) -> int:
    """GPUs in a node's gres text (`gpu:4`, `gpu:a100:2(S:0-1)`, `(null)`)."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def partition_offers(partition: str | None) -> tuple[str, list[NodeOffer]] | None:
    """The nodes of `partition` (the default partition when None) and what each offers,
    from one `sinfo` call; None when Slurm cannot be asked or has no such partition."""
    try:
        p = _run(["sinfo", "-h", "-N", "-o", "%N|%c|%m|%G|%P"])
    except RunnerError:
        return None
    if p.returncode != 0:
        return None
    nodes: dict[str, list[NodeOffer]] = {}
    default = None
    for line in p.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5 or not parts[1].isdigit():
            continue
        name = parts[4].rstrip("*")
        if parts[4].endswith("*"):
            default = name
        mem = parts[2].rstrip("+")
        nodes.setdefault(name, []).append(
            NodeOffer(parts[0], int(parts[1]), int(mem) if mem.isdigit() else 0, _gres_gpus(parts[3])))
    chosen = partition or default
    if chosen is None or chosen not in nodes:
        return None
    return chosen, nodes[chosen]


def check_fits(partition: str, offers: Sequence[NodeOffer], cpus: int, mem_mb: int, gpus: int,
               cpu_source: str = "trial.resources.cpu", nodes: int = 1) -> None:
    """Refuse a request that no node of the partition can ever run, or, for a trial
    spanning `nodes` nodes, fewer than that many nodes can.

    Raises:
        SpecError: names the resource, what was asked and the most any node has, or
            how many nodes fit.
    """
    asked = {"cpu": (cpus, "CPUs", cpu_source), "mem_mb": (mem_mb, "MB of memory", "trial.resources.mem_mb"),
             "gpu": (gpus, "GPUs", "trial.resources.gpu")}
    most = {"cpu": max(o.cpus for o in offers), "mem_mb": max(o.mem_mb for o in offers),
            "gpu": max(o.gpus for o in offers)}
    for key, (n, unit, source) in asked.items():
        if n > most[key]:
            raise SpecError(f"{source} asks for {n} {unit} per trial, but no node of Slurm partition {partition!r} "
                            f"has more than {most[key]}: the job could never run",
                            f"lower {source.split(' ')[0]} to at most {most[key]}, or choose another partition "
                            "(runner.cfg.partition)")
    fit = sum(1 for o in offers if o.cpus >= cpus and o.mem_mb >= mem_mb and o.gpus >= gpus)
    if not fit:
        raise SpecError(f"no node of Slurm partition {partition!r} has {cpus} CPUs, {mem_mb} MB and {gpus} GPUs "
                        "at once: the job could never run",
                        "lower trial.resources, or choose another partition (runner.cfg.partition)")
    if fit < nodes:
        which = f"{len(offers)} node{'s' if len(offers) != 1 else ''}"
        raise SpecError(f"trial.resources.nodes asks for {nodes} nodes, but Slurm partition {partition!r} has "
                        f"{which}, {fit} of them with {cpus} CPUs, {mem_mb} MB and {gpus} GPUs: the job could "
                        "never run",
                        f"lower trial.resources.nodes to at most {fit}, or choose another partition "
                        "(runner.cfg.partition)")


def check_signal(value: object) -> str:
    """`runner.cfg.signal` as sbatch's `--signal` value (`USR1@120`: SIGUSR1 120 s before
    the time limit).

    Only SIGUSR1 and SIGUSR2 are taken: the launcher passes them on to the trial, while
    any other signal would end the launcher itself. `B:` (signal only the batch
    shell) is refused: TorchX's batch script does not trap it and would die.

    Raises:
        SpecError: anything else.
    """
    text = str(value).strip().upper() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if text.startswith("B:"):
        raise SpecError(f"runner.cfg.signal {value!r} would signal only the batch shell, which TorchX's script "
                        "does not trap (the job would end)", f"drop the B: prefix: {str(value)[2:]}")
    m = SIGNAL_OPTION.fullmatch(text)
    if m is None or "\n" in str(value) or (m.group(5) is not None and int(m.group(5)) > 65535):
        raise SpecError(f"runner.cfg.signal must be like USR1@120 (USR1 or USR2, then @ and seconds before the "
                        f"time limit, 0-65535), got {value!r}",
                        "e.g. signal: USR1@120 warns the trial two minutes before runner.cfg.time runs out")
    return f"{m.group(1) or ''}{m.group(3)}{m.group(4) or ''}"


def _exit_code(text: str) -> int | None:
    code, _, _sig = text.partition(":")
    return int(code) if code.isdigit() else None


COMMAND_TIMEOUT_SECONDS = 60.0


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a Slurm command; one that hangs (a controller that accepts connections but
    does not answer) counts as failed after COMMAND_TIMEOUT_SECONDS."""
    if shutil.which(cmd[0]) is None:
        raise RunnerError(f"the Slurm command {cmd[0]!r} is not installed here", CLUSTER_HINT)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", f"{cmd[0]} did not answer within {COMMAND_TIMEOUT_SECONDS:g}s")


def _first_line(text: str) -> str:
    """The first non-empty line of a command's output (Slurm repeats its errors on many lines)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def controller_unreachable() -> str | None:
    """What `scontrol ping` says when the Slurm controller is down or does not answer, else None."""
    p = _run(["scontrol", "ping"])
    if p.returncode == 0 and " is UP" in p.stdout:
        return None
    lines = (p.stdout.strip() or p.stderr.strip()).splitlines()
    return lines[0] if lines else f"scontrol ping exited with {p.returncode}"


def query_jobs(job_ids: Sequence[str]) -> dict[str, SlurmRecord]:
    """Slurm's view of many jobs: one `sacct` call, plus one `squeue` call only for
    jobs accounting does not list (just submitted, or accounting is unreachable).
    Unknown ids are absent from the result.

    Raises:
        RunnerError: the Slurm commands are missing.
        SchedulerUnreachable: neither accounting nor the controller answers.
    """
    if not job_ids:
        return {}
    ids = ",".join(sorted(set(job_ids)))
    p = _run(["sacct", "-X", "--parsable2", "--noheader", "-j", ids,
              "--format=JobIDRaw,JobName,State,ExitCode,NodeList,Start,End,Reason"])
    found: dict[str, SlurmRecord] = {}
    for line in p.stdout.splitlines() if p.returncode == 0 else []:
        parts = line.split("|")
        if len(parts) < 8:
            continue
        jid = parts[0].split("+")[0]
        found[jid] = SlurmRecord(jid, parts[1], parts[2], _exit_code(parts[3]), "|".join(parts[7:]), parts[4],
                                 parts[5], parts[6])
    missing = sorted(set(job_ids) - set(found))
    # accounting keeps the reason a job had when it was recorded (often "None") while it
    # waits; the controller's is the current one
    waiting = sorted(j for j, r in found.items() if base_state(r.state) in PENDING_STATES)
    if missing or waiting:
        # the controller still knows recent jobs (MinJobAge), also while slurmdbd is down
        q = _run(["squeue", "-h", "-t", "all", "-j", ",".join(missing + waiting), "-o", "%i|%j|%T|%N|%S|%r"])
        if q.returncode != 0 and p.returncode != 0:
            raise SchedulerUnreachable(f"the Slurm controller and accounting do not answer (sacct: "
                                       f"{_first_line(p.stderr) or p.returncode}; squeue: "
                                       f"{_first_line(q.stderr) or q.returncode})", CLUSTER_HINT)
        for line in q.stdout.splitlines() if q.returncode == 0 else []:
            parts = line.split("|")
            if len(parts) >= 6:
                jid = parts[0].split("+")[0]
                if jid in found:
                    if parts[2] in PENDING_STATES:  # still waiting: take the controller's reason
                        found[jid] = replace(found[jid], reason="|".join(parts[5:]))
                    continue  # started or ended since: accounting's record follows within a poll
                # squeue prints a pending job's expected start as its StartTime: not a start
                start = parts[4] if parts[2] not in PENDING_STATES else ""
                found[jid] = SlurmRecord(jid, parts[1], parts[2], None, "|".join(parts[5:]), parts[3], start)
    return found


def _still_completing(jobs: Mapping[str, str]) -> dict[str, str]:
    """Of `jobs` (handle -> Slurm job id), those whose processes Slurm is still ending.

    Accounting gives a job its final state (TIMEOUT, CANCELLED, ...) as soon as
    Slurm decides to end it, while the trial may still be exiting, and may be about
    to record exit 0 (`settle`). The controller shows such a job as COMPLETING
    until its processes are gone: one `squeue` call, only for jobs that ended
    without an exit record."""
    if not jobs:
        return {}
    # all completing jobs (few at any time), not `-j`: one id the controller has forgotten fails the whole call
    q = _run(["squeue", "-h", "-t", "COMPLETING", "-o", "%i"])
    completing = set(q.stdout.split()) if q.returncode == 0 else set()
    return {h: j for h, j in jobs.items() if j in completing}


def job_id_of(handle: str) -> str | None:
    """The Slurm job id in a `slurm://session/<id>` handle (None if it is not one)."""
    prefix, _, job_id = handle.rpartition("/")
    return job_id if prefix.startswith(f"{SCHEDULER}://") and job_id.isdigit() else None


OPTIONS = RunOptions(
    SCHEDULER,
    own=(
        NPROC_PER_NODE,
        Option("signal", "str", "sbatch --signal, e.g. USR1@120: warn the trial that many seconds before its "
               "time limit (USR1 or USR2)", None, check_signal),
    ),
    reserved=frozenset({"job_dir"}),  # each job goes to its trial directory
    torchxconfig=True,
)


class SlurmRunner(TorchXRunner):
    """Runs each trial as a Slurm batch job via TorchX's slurm scheduler.

    Args:
        cfg: `runner.cfg`, as `OPTIONS` declares it (see the module docstring).
            Missing TorchX options are read from `.torchxconfig`; the spec wins.

    Raises:
        SpecError: an unknown or reserved option, a bad `nproc_per_node` or `signal`.
    """

    scheduler = SCHEDULER
    options = OPTIONS
    shared_status = True
    queues = True
    multi_node = True

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.nproc_per_node: int = self.own["nproc_per_node"]
        self.signal: str | None = self.own["signal"]

    def check_resources(self, cpu: int, mem_mb: int, gpu: int, nodes: int = 1) -> None:
        """Refuse, before anything is submitted, a request fewer than `nodes` nodes of the
        partition can satisfy (`sinfo`); nothing is checked when Slurm cannot be asked."""
        found = partition_offers(self.cfg.get("partition"))
        if found is None:
            return
        source = "trial.resources.cpu" if self.nproc_per_node == 1 else \
            f"trial.resources.cpu x runner.cfg.nproc_per_node ({cpu} x {self.nproc_per_node})"
        check_fits(found[0], found[1], cpu * self.nproc_per_node, mem_mb, gpu, source, nodes)

    def appdef(self, request: JobRequest) -> Any:
        cmd = launched(sys.executable, request, [request.entrypoint, *request.args], self.nproc_per_node)
        app = to_appdef(request, image=os.getcwd(), entrypoint=cmd[0], args=cmd[1:])
        role = app.roles[0]
        role.name = request.name
        role.resource.cpu = request.cpu * self.nproc_per_node
        return app

    def _dryrun_info(self, request: JobRequest) -> Any:
        from torchx.specs import macros

        info = super()._dryrun_info(request)
        out = state_dir(request)
        for replica_name, replica in info.request.replicas.items():
            # absolute paths in the shared trial directory, not relative to the submit directory
            replica.srun_opts["output"] = os.path.join(out, f"slurm-{macros.app_id}-{replica_name}.out")
            replica.srun_opts["error"] = os.path.join(out, f"slurm-{macros.app_id}-{replica_name}.err")
            replica.sbatch_opts.setdefault("output", os.path.join(out, "slurm-%j.out"))
            # a requeued job runs again under the same id: keep the first run's output
            replica.sbatch_opts["open-mode"] = "append"
            replica.srun_opts["open-mode"] = "append"
            if self.signal:
                replica.sbatch_opts["signal"] = self.signal
            if request.nodes > 1:
                # one task per node (TorchX's default --ntasks-per-node=1), each starting its
                # node's processes; a lost node ends the attempt, which nasctl retries from its
                # checkpoint as a new job: Slurm does not requeue it, so no half job waits
                replica.sbatch_opts["nodes"] = str(request.nodes)
                replica.sbatch_opts.pop("requeue", None)
                replica.sbatch_opts["no-requeue"] = None
        return info

    def dryrun(self, request: JobRequest) -> str:
        """The sbatch command and the exact batch script TorchX would submit."""
        return str(self._dryrun_info(request))

    def _metadata(self, request: JobRequest, job_id: str) -> dict[str, Any]:
        out = state_dir(request)
        return {
            "job_id": job_id,
            "state_dir": out,
            "stdout": os.path.join(out, f"slurm-{job_id}-{request.name}-0.out"),
            "stderr": os.path.join(out, f"slurm-{job_id}-{request.name}-0.err"),
            "batch_log": os.path.join(out, f"slurm-{job_id}.out"),
            "submitted": time.time(),
        }

    def _submit_error(self, request: JobRequest, error: Exception) -> NasctlError:
        if isinstance(error, subprocess.CalledProcessError):
            down = controller_unreachable()
            if down is not None:
                return SchedulerUnreachable(f"sbatch could not submit job {request.name}: the Slurm controller "
                                            f"does not answer ({down})", CLUSTER_HINT)
            return RunnerError(f"sbatch refused job {request.name} (exit code {error.returncode})", CLUSTER_HINT)
        return RunnerError(f"could not submit {request.name}: {error}", CLUSTER_HINT)

    def _submitted(self, request: JobRequest, handle: str, info: Any) -> dict[str, Any]:
        job_id = job_id_of(handle)
        if job_id is None:
            raise RunnerError(f"sbatch returned {handle!r} for {request.name}, not a job id", CLUSTER_HINT)
        return self._metadata(request, job_id)

    def find(self, request: JobRequest) -> SubmittedJob | None:
        """The job that claimed the trial directory, else a queued job with the trial's
        name whose output goes to the trial directory."""
        launch = read_json(os.path.join(state_dir(request), LAUNCH))
        if launch is not None and job_id_of(str(launch.get("torchx_job_id"))):
            handle = str(launch["torchx_job_id"])
            meta = {**self._metadata(request, str(job_id_of(handle))), "reattached": True,
                    "submitted": launch.get("started", time.time())}
            return SubmittedJob(handle=handle, metadata=meta)
        p = _run(["squeue", "-h", "-t", "PD,CF,R,CG,S,RQ", "-n", f"{request.name}-0", "-O", "JobID:|,StdOut:|"])
        if p.returncode != 0:
            raise SchedulerUnreachable(f"squeue failed: {_first_line(p.stderr) or p.returncode}", CLUSTER_HINT)
        ids = []
        for line in p.stdout.splitlines():
            jid, _, rest = line.partition("|")
            if os.path.dirname(rest.split("|")[0]) == state_dir(request) and jid.strip().isdigit():
                ids.append(int(jid))
        if not ids:
            return None
        job_id = str(min(ids))
        return SubmittedJob(handle=f"{SCHEDULER}://{SESSION}/{job_id}",
                            metadata={**self._metadata(request, job_id), "reattached": True})

    def status(self, jobs: Sequence[SubmittedJob]) -> Mapping[str, JobStatus]:
        """One Slurm query for all jobs. A job whose launcher found the trial already
        claimed (a duplicate submission) reports the claiming job's status."""
        ids: dict[str, str] = {}
        claimers: dict[str, str] = {}
        for job in jobs:
            jid = job_id_of(job.handle)
            if jid is None:
                continue
            ids[job.handle] = jid
            sdir = job.metadata.get("state_dir")
            launch = read_json(os.path.join(sdir, LAUNCH)) if sdir else None
            owner = job_id_of(str((launch or {}).get("torchx_job_id")))
            if owner is not None and owner != jid:
                claimers[job.handle] = owner
        records = query_jobs([*ids.values(), *claimers.values()])
        result: dict[str, JobStatus] = {}
        unsettled: dict[str, str] = {}  # handle -> id of the job that ran the trial
        for job in jobs:
            jid = ids.get(job.handle)
            rec = records.get(jid) if jid else None
            if rec is None:
                age = time.time() - float(job.metadata.get("submitted") or 0)
                if jid is not None and age < START_GRACE_SECONDS:
                    result[job.handle] = JobStatus(JobState.PENDING, "submitted; not yet listed by Slurm")
                else:
                    result[job.handle] = JobStatus(JobState.UNKNOWN, f"Slurm does not know job {job.handle}")
                continue
            st = map_state(rec)
            owner = claimers.get(job.handle)
            if st.state == JobState.FAILED and rec.exit_code == DUPLICATE_EXIT and owner in records:
                rec = records[owner]
                st = map_state(rec)  # the claimant's run; its exit record is the trial's
            elif owner is not None:
                result[job.handle] = st  # a job that did not run the trial: the record is not its own
                continue
            sdir = job.metadata.get("state_dir")
            record = None
            if st.state.is_terminal and sdir:
                record = exit_record(sdir)
                st = settle(st, record)
                if record is None and st.state != JobState.SUCCEEDED and os.path.exists(os.path.join(sdir, LAUNCH)):
                    unsettled[job.handle] = owner or str(jid)
            result[job.handle] = replace(st, ended_at=ended_at(record, rec)) if st.state.is_terminal else st
        for handle, jid in _still_completing(unsettled).items():
            result[handle] = JobStatus(JobState.RUNNING, f"Slurm is ending the job ({result[handle].message}); "
                                                         "waiting for the trial to record its exit")
        return result

    def owns(self, handle: str) -> bool:
        return job_id_of(handle) is not None

    def _end(self, job: SubmittedJob) -> None:
        """`scancel` the job; cancelling a finished or unknown job is not an error."""
        jid = str(job_id_of(job.handle))
        p = _run(["scancel", jid])
        if p.returncode != 0 and "Invalid job id" not in p.stderr and "already completing" not in p.stderr:
            raise RunnerError(f"scancel {jid} failed: {_first_line(p.stderr)}", CLUSTER_HINT)

    def log_tail(self, job: SubmittedJob, lines: int = 40) -> str:
        """The end of the trial's stderr and stdout, then of the batch script's own output."""
        return self._tail(job, ("stderr", "stdout", "batch_log"), lines)


def create_runner(cfg: Mapping[str, Any] | None = None) -> SlurmRunner:
    return SlurmRunner(cfg)


__all__ = ["OPTIONS", "NodeOffer", "SlurmRunner", "SlurmRecord", "check_fits", "check_signal", "create_runner", "map_state",
           "partition_offers", "query_jobs"]
