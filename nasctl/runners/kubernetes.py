"""Kubernetes jobs through TorchX's `kubernetes` scheduler (Volcano Jobs).

Each trial is one TorchX AppDef; TorchX turns it into a Volcano
`batch.volcano.sh/v1alpha1` Job with one task whose pod runs
`python -m nasctl.runners.launcher ... -- <trial command>` in `image`.
A PersistentVolumeClaim (`log_volume_claim`) is mounted at `log_mount_path`
in every pod. The orchestrator must see that same volume at that same path
(an NFS or other ReadWriteMany volume mounted on the orchestrator's machine,
or the orchestrator itself running in a pod that mounts the claim), and the
experiment's trial directories must lie under it: pods write TensorBoard files
and the launcher's state files there, and the orchestrator reads metrics from
there.

The pod runs `bash -c` so that the trial's output also goes, through `tee`, to
`stdout.log` / `stderr.log` in the trial directory: log tails survive the pod
(the image needs bash).

Status: one `list` of the namespace's Volcano Jobs answers for every job of a
poll. A Job that is gone (TorchX cancels by deleting it) is answered from the
launcher's exit record on the shared volume. Logs come from the pod log API.

Failure classes: for a Failed Job, one `list` of the namespace's TorchX pods says
why (`pod_status`): a pod evicted, preempted, deleted by the taint manager or lost
with its node is INFRASTRUCTURE, one past its `activeDeadlineSeconds`
(DeadlineExceeded) TIMEOUT; either wins over the trial's exit record (the SIGTERM
the pod got says nothing more). Otherwise the launcher's exit record decides, as on
the local runner (`nasctl.runners.outcome`), then the container's exit (USER). An
aborted Job, or one nasctl deleted, is CANCELLED.

Runner options (`runner.cfg`, declared in `OPTIONS`):

- TorchX's kubernetes run options: `queue` (required), `namespace`
  (default `default`), `service_account`, `priority_class`; defaults from
  `.torchxconfig`, the spec wins.
- `image` (required): the container image; it must have nasctl and the trial's
  dependencies installed.
- `log_volume_claim` and `log_mount_path` (both required): the shared volume.
- `python` (default `python`): the interpreter inside the image.
- `api_server`: the API server URL; without it the kubeconfig is used, as `torchx` does.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from nasctl.errors import NasctlError, RunnerError, SchedulerUnreachable, SpecError
from nasctl.runners.base import JobRequest, JobState, JobStatus, SubmittedJob
from nasctl.runners.launcher import CANCEL_MARKER, LAUNCH, exit_record, read_json
from nasctl.runners.options import Option, RunOptions
from nasctl.runners.outcome import record_status, settle
from nasctl.runners.torchx_base import NPROC_PER_NODE, ROLE, TorchXRunner, launched, state_dir, to_appdef
from nasctl.types import FailureClass

SCHEDULER = "kubernetes"
GROUP, VERSION, PLURAL = "batch.volcano.sh", "v1alpha1", "jobs"
START_GRACE_SECONDS = 120.0
STDOUT, STDERR = "stdout.log", "stderr.log"
CANCELLED = CANCEL_MARKER  # written to the shared volume before nasctl deletes a job
APP_NAME_LABEL = "torchx.pytorch.org/app-name"
INSTANCE_LABEL = "app.kubernetes.io/instance"  # TorchX's label: the Volcano Job's name
TORCHX_PODS = "app.kubernetes.io/managed-by=torchx.pytorch.org"
INFRASTRUCTURE_POD_REASONS = {"Evicted", "Preempting", "DeletionByTaintManager", "NodeLost", "Shutdown",
                              "NodeShutdown", "Terminated", "UnexpectedAdmissionError"}
"""A pod's `status.reason` when the cluster, not the trial, ended it (eviction, preemption,
a NoExecute taint, a lost node, a node shut down, kubelet refusing it)."""
TIMEOUT_POD_REASONS = {"DeadlineExceeded"}
GPU_RESOURCE = "nvidia.com/gpu"
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT[0-9:.]+Z ")  # pod logs are read with timestamps=True
CLUSTER_HINT = "check runner.cfg.api_server or your kubeconfig, and that Volcano is installed"

PHASES: dict[str, JobState] = {
    "Pending": JobState.PENDING,
    "Inqueue": JobState.PENDING,
    "Running": JobState.RUNNING,
    "Restarting": JobState.RUNNING,
    "Completing": JobState.RUNNING,
    "Aborting": JobState.RUNNING,
    "Terminating": JobState.RUNNING,
    "Completed": JobState.SUCCEEDED,
    "Aborted": JobState.CANCELLED,
    "Terminated": JobState.FAILED,
    "Failed": JobState.FAILED,
}


_UNITS = {"cpu": "CPUs", "memory": "bytes of memory", GPU_RESOURCE: "GPUs"}
_SUFFIXES = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "Ki": 2.0**10, "Mi": 2.0**20,
             "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_QUANTITY = re.compile(r"^[0-9.]+(e[0-9]+)?(m|k|M|G|T|P|Ki|Mi|Gi|Ti|Pi)?$")


def _is_quantity(text: str) -> bool:
    return bool(_QUANTITY.match(text))


def quantity(text: str) -> float:
    """A Kubernetes quantity (`900m`, `976M`, `16Gi`, `2`) as a number."""
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIXES[suffix]
    return float(text)


def pod_requests(info: Any) -> dict[str, float]:
    """What the pod of a TorchX dryrun asks the scheduler for (its container's `requests`)."""
    from torchx.schedulers.kubernetes_scheduler import sanitize_for_serialization

    manifest = sanitize_for_serialization(info.request.resource)
    container = manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    requests = (container.get("resources") or {}).get("requests") or {}
    return {k: quantity(str(v)) for k, v in requests.items() if _is_quantity(str(v))}


def never_fits(requests: Mapping[str, float], nodes: Sequence[Mapping[str, float]]) -> tuple[str, float] | None:
    """The first resource no node offers enough of for `requests`, with the most any node
    offers; None when some node can hold the pod (or the requests ask for nothing)."""
    if not nodes or any(all(node.get(k, 0.0) >= v for k, v in requests.items() if v > 0) for node in nodes):
        return None
    for key, value in requests.items():
        most = max(node.get(key, 0.0) for node in nodes)
        if value > most:
            return key, most
    return None  # each resource fits some node, just not all on one: waiting for room may still clear


def pods_held(requests: Mapping[str, float], nodes: Sequence[Mapping[str, float]]) -> int:
    """How many pods asking for `requests` the nodes' allocatable holds at once, all nodes together."""
    asked = {k: v for k, v in requests.items() if v > 0}
    if not asked:
        return sys.maxsize
    return sum(int(min(node.get(k, 0.0) // v for k, v in asked.items())) for node in nodes)


def _with_start(job: SubmittedJob, status: JobStatus) -> JobStatus:
    """An ended job's status with when its run began: the launcher's start in the pod,
    from its launch record on the shared volume (a job may end before a poll saw it run)."""
    if not status.state.is_terminal or status.running_since is not None:
        return status
    sdir = job.metadata.get("state_dir")
    started = (read_json(os.path.join(sdir, LAUNCH)) or {}).get("started") if sdir else None
    if not isinstance(started, (int, float)) or isinstance(started, bool):
        return status
    return dataclasses.replace(status, running_since=float(started))


def kube_time(text: str) -> float | None:
    """An RFC 3339 time as the API server writes it (`2026-11-28T10:00:00Z`) in epoch
    seconds; None for anything else."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def pending_reason(pod: Mapping[str, Any]) -> str:
    """Why a pod waits: its PodScheduled condition when it is False (`Unschedulable: 0/3
    nodes are available: 3 Insufficient cpu.`), else its phase."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{cond.get('reason') or 'NotScheduled'}: {cond.get('message') or ''}".strip()
    return str((pod.get("status") or {}).get("phase") or "Pending")


def parse_handle(handle: str) -> tuple[str, str] | None:
    """(namespace, job name) from a `kubernetes://session/namespace:name` handle."""
    prefix, _, app_id = handle.rpartition("/")
    namespace, sep, name = app_id.partition(":")
    if not prefix.startswith(f"{SCHEDULER}://") or not sep or not namespace or not name:
        return None
    return namespace, name


def launch_handle(sdir: str | None, namespace: str) -> str | None:
    """The handle of the job whose launcher claimed the trial directory (None if none did).

    TorchX's TORCHX_JOB_ID in the pod omits the namespace; it is the runner's."""
    launch = read_json(os.path.join(sdir, LAUNCH)) if sdir else None
    value = str((launch or {}).get("torchx_job_id") or "")
    prefix, _, app_id = value.rpartition("/")
    if not prefix.startswith(f"{SCHEDULER}://") or not app_id:
        return None
    return value if ":" in app_id else f"{prefix}/{namespace}:{app_id}"


def _status_from_files(sdir: str | None) -> JobStatus | None:
    """The launcher's exit record on the shared volume, or nasctl's record of a
    cancellation, as a status (None if neither exists)."""
    done = exit_record(sdir) if sdir else None
    if done is None:
        if sdir and read_json(os.path.join(sdir, CANCELLED)) is not None:
            return JobStatus(JobState.CANCELLED, "the Volcano job was deleted before the trial recorded an exit",
                             failure_class=FailureClass.CANCELLED)
        return None
    return record_status(done)


def pod_status(pod: Mapping[str, Any]) -> JobStatus | None:
    """Why a pod failed, as a FAILED status with its class; None for a pod that has not failed.

    - `status.reason` Evicted, Preempting, DeletionByTaintManager, NodeLost, ... or a
      `DisruptionTarget` condition (preemption, eviction API, taint manager, pod GC,
      kubelet): INFRASTRUCTURE.
    - `status.reason` DeadlineExceeded (`activeDeadlineSeconds`): TIMEOUT.
    - a container that terminated with a non-zero exit code (OOMKilled included: the
      trial went past its own memory limit): USER.
    """
    status = pod.get("status") or {}
    node = (pod.get("spec") or {}).get("nodeName") or None
    name = (pod.get("metadata") or {}).get("name", "?")
    reason, message = str(status.get("reason") or ""), str(status.get("message") or "")
    said = f"pod {name}: {reason}" + (f" ({message})" if message else "")
    if reason in TIMEOUT_POD_REASONS:
        return JobStatus(JobState.FAILED, said, None, FailureClass.TIMEOUT, node)
    disrupted = [c for c in status.get("conditions") or []
                 if c.get("type") == "DisruptionTarget" and str(c.get("status")) == "True"]
    if reason in INFRASTRUCTURE_POD_REASONS or disrupted:
        if not reason:
            said = f"pod {name}: {disrupted[0].get('reason')} ({disrupted[0].get('message') or 'disrupted'})"
        return JobStatus(JobState.FAILED, said, None, FailureClass.INFRASTRUCTURE, node)
    for container in status.get("containerStatuses") or []:
        ended = (container.get("state") or {}).get("terminated") or {}
        code = ended.get("exitCode")
        if isinstance(code, int) and code != 0:
            why = f" ({ended['reason']})" if ended.get("reason") else ""
            return JobStatus(JobState.FAILED, f"pod {name}: container exited with code {code}{why}", code,
                             FailureClass.USER, node)
    if status.get("phase") == "Failed":
        return JobStatus(JobState.FAILED, said if reason else f"pod {name} failed", None, FailureClass.USER, node)
    return None


UNREACHABLE_HTTP = {0, 502, 503, 504}
"""HTTP answers that mean the API server (or what fronts it) is not serving: a wait."""


def unreachable(error: BaseException) -> bool:
    """Does `error` say the API server cannot be reached (no connection, a timeout, a
    gateway or unavailable answer), rather than that it refused the request?"""
    from kubernetes.client.rest import ApiException
    from urllib3.exceptions import HTTPError

    if isinstance(error, ApiException):
        return error.status in UNREACHABLE_HTTP or error.status is None
    return isinstance(error, (HTTPError, ConnectionError, TimeoutError))


def short(error: BaseException) -> str:
    """The first line of an error, for messages."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300]}" if text else type(error).__name__


OPTIONS = RunOptions(
    SCHEDULER,
    own=(
        Option("image", "str", "the container image; it must have nasctl and the trial's dependencies installed",
               required=True),
        Option("log_volume_claim", "str", "the PersistentVolumeClaim mounted in every pod, shared with nasctl",
               required=True),
        Option("log_mount_path", "str", "where pods and nasctl see that volume; trial directories lie under it",
               required=True),
        Option("python", "str", "the interpreter inside the image", "python"),
        Option("api_server", "str", "the API server URL (default: the kubeconfig, as torchx does)"),
        NPROC_PER_NODE,
    ),
    torchxconfig=True,
)


class KubernetesRunner(TorchXRunner):
    """Runs each trial as a Volcano Job via TorchX's kubernetes scheduler.

    Args:
        cfg: `runner.cfg`, as `OPTIONS` declares it (see the module docstring).

    Raises:
        SpecError: a required option is missing, or an option is unknown.
    """

    scheduler = SCHEDULER
    options = OPTIONS
    queues = True
    shared_status = True
    multi_node = True

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.nproc_per_node: int = self.own["nproc_per_node"]
        self.image = str(self.own["image"])
        self.claim = str(self.own["log_volume_claim"])
        self.mount_path = os.path.abspath(str(self.own["log_mount_path"]))
        self.python = str(self.own["python"])
        self.api_server = self.own["api_server"]

    def _new_client(self) -> Any:
        from torchx.runner import get_runner

        client = None
        if self.api_server:
            from kubernetes import client as k8s

            conf = k8s.Configuration()
            conf.host = str(self.api_server)
            client = k8s.ApiClient(conf)
        return get_runner(client=client)

    def _api(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.torchx._scheduler(SCHEDULER)._api_client())  # noqa: SLF001

    def _check_shared(self, request: JobRequest) -> None:
        trial = os.path.abspath(request.trial_dir)
        if os.path.commonpath([trial, self.mount_path]) != self.mount_path:
            raise SpecError(f"trial directory {trial} is not under runner.cfg.log_mount_path {self.mount_path}",
                            f"run nasctl with --workdir under {self.mount_path} so pods and nasctl share it")

    def appdef(self, request: JobRequest) -> Any:
        from torchx.specs import VolumeMount, macros

        self._check_shared(request)
        sdir = state_dir(request)
        # the orchestrator's interpreter path means nothing in the image: use the image's python
        entry = self.python if request.entrypoint == sys.executable else request.entrypoint
        distributed = request.nodes > 1 or self.nproc_per_node > 1
        # each pod is one node: TorchX fills in its replica id and the variable that holds
        # pod 0's address (the launcher starts torch.distributed.run with them)
        node_args = ["--node-rank", macros.replica_id, "--rank0-env", macros.rank0_env] if distributed else None
        launcher = launched(self.python, request, [entry, *request.args], self.nproc_per_node, node_args)
        # output goes to the pod log and, through tee, to the shared volume (it outlives the pod)
        script = (f"mkdir -p {shlex.quote(sdir)} && "
                  f"exec > >(tee -a {shlex.quote(os.path.join(sdir, STDOUT))}) "
                  f"2> >(tee -a {shlex.quote(os.path.join(sdir, STDERR))} >&2) && "
                  f"exec {shlex.join(launcher)}")
        app = to_appdef(request, image=self.image, entrypoint="bash", args=["-c", script])
        role = app.roles[0]
        role.mounts = [VolumeMount(src=self.claim, dst_path=self.mount_path)]
        role.num_replicas = request.nodes
        role.resource.cpu = request.cpu * self.nproc_per_node
        return app

    def manifests(self, request: JobRequest) -> dict[str, Any]:
        """The Volcano Job TorchX would create for this trial, as a plain dict."""
        from torchx.schedulers.kubernetes_scheduler import sanitize_for_serialization

        manifest: dict[str, Any] = sanitize_for_serialization(self._dryrun_info(request).request.resource)
        return manifest

    def dryrun(self, request: JobRequest) -> str:
        """The namespace and the Volcano Job manifest (YAML) TorchX would create."""
        import yaml

        manifest: str = yaml.safe_dump(self.manifests(request), sort_keys=False)
        return f"# namespace: {self.cfg['namespace']}\n" + manifest

    def _submit_error(self, request: JobRequest, error: Exception) -> NasctlError:
        # kubernetes ApiException, urllib3 errors, ValueError on conflicts
        if unreachable(error):
            return SchedulerUnreachable(f"the Kubernetes API server does not answer; job {request.name} "
                                        f"was not created: {short(error)}", CLUSTER_HINT)
        return RunnerError(f"kubernetes did not accept job {request.name}: {error}", CLUSTER_HINT)

    def _submitted(self, request: JobRequest, handle: str, info: Any) -> dict[str, Any]:
        return {**self._metadata(request), "requests": pod_requests(info)}

    @staticmethod
    def _metadata(request: JobRequest) -> dict[str, Any]:
        sdir = state_dir(request)
        return {"state_dir": sdir, "stdout": os.path.join(sdir, STDOUT), "stderr": os.path.join(sdir, STDERR),
                "submitted": time.time()}

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.torchx._scheduler(SCHEDULER)._api_client())  # noqa: SLF001

    def _nodes(self) -> list[dict[str, float]] | None:
        """What each node offers pods (`status.allocatable`, as numbers), or None when the
        nodes cannot be listed (RBAC without `list nodes`, an unreachable API server)."""
        try:
            resp = self._core().list_node(_preload_content=False)
            items = json.loads(resp.data).get("items", [])
        except Exception:  # ApiException, connection errors, a body that is not JSON
            return None
        nodes = []
        for node in items:
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            nodes.append({k: quantity(str(v)) for k, v in allocatable.items() if _is_quantity(str(v))})
        return nodes

    def check_resources(self, cpu: int, mem_mb: int, gpu: int, nodes: int = 1) -> None:
        """Refuse, before anything is created, a pod no node could ever hold: its requests
        (what TorchX asks for `trial.resources`) above every node's allocatable; and a
        multi-node trial whose `nodes` pods (scheduled as a gang) the whole cluster could
        not hold at once. Nothing is checked when the nodes cannot be listed."""
        offers = self._nodes()
        if not offers:
            return
        probe = JobRequest("nasctl-check", self.python, [], {}, os.path.join(self.mount_path, "nasctl-check"),
                           cpu=cpu, mem_mb=mem_mb, gpu=gpu)
        wanted = pod_requests(self._dryrun_info(probe))
        missing = never_fits(wanted, offers)
        if missing is not None:
            key, most = missing
            source = {"cpu": "trial.resources.cpu", "memory": "trial.resources.mem_mb"}.get(key, "trial.resources.gpu")
            raise SpecError(f"{source} makes each pod request {wanted[key]:g} {_UNITS.get(key, key)}, but no node "
                            f"of the Kubernetes cluster offers more than {most:g}: the pod could never be scheduled",
                            f"lower {source}")
        room = pods_held(wanted, offers)
        if room < nodes:
            raise SpecError(f"trial.resources.nodes asks for {nodes} pods, but the Kubernetes cluster's "
                            f"{len(offers)} node{'s' if len(offers) != 1 else ''} can hold {room} such pods at once: "
                            "the trial could never be scheduled",
                            f"lower trial.resources.nodes to at most {room}, or trial.resources")

    def _list(self, namespace: str) -> dict[str, dict[str, Any]]:
        try:
            resp = self._api().list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        except Exception as e:  # ApiException, connection errors
            if unreachable(e):
                raise SchedulerUnreachable(f"the Kubernetes API server does not answer: {short(e)}", CLUSTER_HINT) from e
            raise RunnerError(f"could not list Volcano jobs in namespace {namespace}: {e}", CLUSTER_HINT) from e
        return {item["metadata"]["name"]: item for item in resp.get("items", [])}

    def find(self, request: JobRequest) -> SubmittedJob | None:
        """The job that claimed the trial directory, else a Job whose pods carry the trial's name."""
        namespace = str(self.cfg["namespace"])
        handle = launch_handle(state_dir(request), namespace)
        if handle is not None:
            return SubmittedJob(handle, {**self._metadata(request), "reattached": True})
        for name, job in sorted(self._list(namespace).items()):
            tasks = job.get("spec", {}).get("tasks", [])
            labels = (tasks[0].get("template", {}).get("metadata", {}).get("labels", {}) if tasks else {})
            if labels.get(APP_NAME_LABEL) == request.name:
                return SubmittedJob(f"{SCHEDULER}://torchx/{namespace}:{name}",
                                    {**self._metadata(request), "reattached": True})
        return None

    def _pods(self, namespace: str) -> dict[str, dict[str, Any]] | str:
        """The namespace's TorchX pods by Volcano Job name (one pod per trial job), or why
        they could not be listed (say RBAC allows reading pod logs but not listing pods):
        a failed Job is then judged by its exit record alone, and its message says so."""
        try:
            resp = self._core().list_namespaced_pod(namespace, label_selector=TORCHX_PODS, _preload_content=False)
            items = json.loads(resp.data).get("items", [])
        except Exception as e:  # ApiException, connection errors, a body that is not JSON
            return f"could not list pods in namespace {namespace}: {e}"
        by_job: dict[str, dict[str, Any]] = {}
        for pod in items:
            job = ((pod.get("metadata") or {}).get("labels") or {}).get(INSTANCE_LABEL)
            if job:
                by_job[str(job)] = pod
        return by_job

    def _failed(self, job: SubmittedJob, name: str, phase: str,
                pods: Mapping[str, dict[str, Any]] | str) -> JobStatus:
        """A Failed or Terminated Volcano Job: the pod's reason, then the exit record, then the container."""
        sdir = job.metadata.get("state_dir")
        record = exit_record(sdir) if sdir else None
        pod = pods.get(name) if not isinstance(pods, str) else None
        from_pod = pod_status(pod) if pod is not None else None
        if from_pod is None:
            from_pod = JobStatus(JobState.FAILED, f"Volcano job {name} is {phase} and the trial recorded no exit"
                                 + (f" ({pods})" if isinstance(pods, str) else ""),
                                 failure_class=FailureClass.INFRASTRUCTURE)
            return record_status(record) if record is not None else from_pod
        return settle(from_pod, record)

    def _one(self, job: SubmittedJob, listed: Mapping[str, Mapping[str, dict[str, Any]]],
             pods: Mapping[str, Mapping[str, dict[str, Any]] | str]) -> JobStatus:
        parsed = parse_handle(job.handle)
        if parsed is None:
            return JobStatus(JobState.UNKNOWN, f"{job.handle} is not a kubernetes job handle")
        namespace, name = parsed
        item = listed.get(namespace, {}).get(name)
        sdir = job.metadata.get("state_dir")
        if item is None:
            from_files = _status_from_files(sdir)
            if from_files is not None:
                return from_files
            age = time.time() - float(job.metadata.get("submitted") or 0)
            if sdir and age < START_GRACE_SECONDS:
                return JobStatus(JobState.PENDING, "submitted; not yet listed")
            return JobStatus(JobState.UNKNOWN, f"Volcano job {namespace}/{name} does not exist")
        phase = str(item.get("status", {}).get("state", {}).get("phase", "Pending"))
        state = PHASES.get(phase, JobState.UNKNOWN)
        if state == JobState.FAILED:
            owner = launch_handle(sdir, namespace)
            if owner is not None and owner != job.handle:
                # a duplicate submission whose launcher found the trial claimed: report the real run
                return self._one(SubmittedJob(owner, job.metadata), listed, pods)
            return self._failed(job, name, phase, pods.get(namespace, {}))
        if state == JobState.SUCCEEDED:
            return JobStatus(JobState.SUCCEEDED, None, 0)
        if state == JobState.CANCELLED:
            return JobStatus(state, f"Volcano job {name} is {phase}", failure_class=FailureClass.CANCELLED)
        if state == JobState.PENDING:
            found = pods.get(namespace, {})
            pod = found.get(name) if not isinstance(found, str) else None
            return JobStatus(state, pending_reason(pod) if pod is not None else phase)
        if state == JobState.RUNNING and phase == "Running":
            # Volcano stamps the Job's phase changes: when it went Running, it began to run
            since = kube_time(str(item.get("status", {}).get("state", {}).get("lastTransitionTime") or ""))
            return JobStatus(state, running_since=since)
        return JobStatus(state, None if state != JobState.UNKNOWN else f"Volcano job {name} is in phase {phase!r}")

    def status(self, jobs: Sequence[SubmittedJob]) -> Mapping[str, JobStatus]:
        """One list call per namespace (normally one) answers for all jobs, plus one list
        of pods in a namespace where a Job failed (to say why)."""
        namespaces = {p[0] for p in (parse_handle(j.handle) for j in jobs) if p}
        listed = {ns: self._list(ns) for ns in sorted(namespaces)}
        failing = sorted(ns for ns, items in listed.items()
                         if any(PHASES.get(str(i.get("status", {}).get("state", {}).get("phase"))) == JobState.FAILED
                                for i in items.values()))
        pending = sorted(ns for ns, items in listed.items()
                         if any(PHASES.get(str(i.get("status", {}).get("state", {}).get("phase"))) == JobState.PENDING
                                for i in items.values()))
        pods = {ns: self._pods(ns) for ns in sorted({*failing, *pending})}
        result = {job.handle: _with_start(job, self._one(job, listed, pods)) for job in jobs}
        return self._unschedulable(jobs, result)

    def _unschedulable(self, jobs: Sequence[SubmittedJob], result: dict[str, JobStatus]) -> dict[str, JobStatus]:
        """Pending jobs whose pod the scheduler found Unschedulable, and whose requests no
        node offers (one list of the nodes, only when there are such pods): FAILED,
        UNSCHEDULABLE; waiting would not clear it. A pod that only waits for room stays PENDING."""
        stuck = [j for j in jobs if result[j.handle].state == JobState.PENDING
                 and (result[j.handle].message or "").startswith("Unschedulable") and j.metadata.get("requests")]
        nodes = self._nodes() if stuck else None
        for job in stuck if nodes else []:
            missing = never_fits(dict(job.metadata["requests"]), nodes or [])
            if missing is not None:
                key, most = missing
                result[job.handle] = JobStatus(
                    JobState.FAILED, f"the pod of {job.handle} can never be scheduled: it requests "
                    f"{float(job.metadata['requests'][key]):g} {_UNITS.get(key, key)} and no node offers more than "
                    f"{most:g} ({result[job.handle].message})", failure_class=FailureClass.UNSCHEDULABLE)
        return result

    def owns(self, handle: str) -> bool:
        return parse_handle(handle) is not None

    def _end(self, job: SubmittedJob) -> None:
        """Delete the Volcano Job (what `torchx cancel` does); a missing one is not an error."""
        from kubernetes.client.rest import ApiException

        try:
            self.torchx.cancel(job.handle)
        except ApiException as e:
            if e.status != 404:
                raise RunnerError(f"could not cancel {job.handle}: {e.reason}", CLUSTER_HINT) from e

    def log_tail(self, job: SubmittedJob, lines: int = 40) -> str:
        """The end of the trial's stderr and stdout on the shared volume, else of the pod's log."""
        text = self._tail(job, ("stderr", "stdout"), lines)
        if text:
            return text
        if parse_handle(job.handle) is None:
            return ""
        from kubernetes.client.rest import ApiException
        from torchx.specs import parse_app_handle
        from urllib3.exceptions import HTTPError

        sched = self.torchx._scheduler(SCHEDULER)  # noqa: SLF001
        try:
            raw = list(sched.log_iter(parse_app_handle(job.handle).app_id, ROLE, k=0))
        except (ApiException, HTTPError):
            return ""
        logged = [_TIMESTAMP.sub("", line.rstrip("\n")) for line in raw]
        return "\n".join(logged[-lines:])


def create_runner(cfg: Mapping[str, Any] | None = None) -> KubernetesRunner:
    return KubernetesRunner(cfg)


__all__ = ["OPTIONS", "KubernetesRunner", "create_runner", "never_fits", "parse_handle", "pods_held", "pending_reason", "pod_requests",
           "pod_status", "quantity"]
