"""A stand-in for the parts of a Kubernetes API server (with Volcano) that the
kubernetes runner uses, for tests on machines where no Kubernetes can run.

It is a real HTTP server speaking the same JSON the kubernetes client sends and
expects, for these endpoints only:

- POST   /apis/batch.volcano.sh/v1alpha1/namespaces/NS/jobs          create a Volcano Job
- GET    /apis/batch.volcano.sh/v1alpha1/namespaces/NS/jobs          list them
- GET    /apis/batch.volcano.sh/v1alpha1/namespaces/NS/jobs/NAME[/status]
- DELETE /apis/batch.volcano.sh/v1alpha1/namespaces/NS/jobs/NAME     SIGTERM its pods, then remove it
- GET    /api/v1/namespaces/NS/pods[?labelSelector=k=v,...]          list pods (metadata, nodeName, status)
- GET    /api/v1/namespaces/NS/pods/POD/log[?timestamps=true]        the pod's output
- GET    /api/v1/nodes                                                its one node and what it offers

A test ends a pod the way the cluster would with `StandInCluster.evict` (an
eviction, a preemption, a lost node, a deadline): the pod's process is killed and
the pod reports that reason, as kubelet or the scheduler would set it.

Every task's pod template is validated as a Pod with kubernetes-validate
(422 if invalid), then "scheduled" by running its container's command as a
local process (with the pod's env on top of this process's environment), unless
its requests exceed what the one node offers (`NODE_ALLOCATABLE`, no GPUs): such
a pod stays Pending with the scheduler's Unschedulable condition. A
PersistentVolumeClaim mounted at a path stands for the directory at that same
path here. What it does not do: images, queueing behind other pods, resource
limits, namespaces' existence, authentication, watches, Volcano policies and plugins.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

JOBS = re.compile(r"^/apis/batch\.volcano\.sh/v1alpha1/namespaces/([^/]+)/jobs(?:/([^/]+))?(/status)?$")
POD_LOG = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/log$")
PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
K8S_VERSION = "1.30"
NODE = "standin-node"


def validate_pod_template(template: dict[str, Any]) -> list[str]:
    """Errors of a task's pod template, validated as a v1 Pod against the Kubernetes schema."""
    import kubernetes_validate

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "task", **template.get("metadata", {})},
           "spec": template.get("spec", {})}
    try:
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [str(e.message)]
    return []


NODE_ALLOCATABLE = {"cpu": "4", "memory": "16Gi", "pods": "110"}
"""What the stand-in's one node offers (no GPUs): a pod whose requests exceed it stays Pending."""
_SUFFIXES = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30,
             "Ti": 2.0**40}


def quantity(text: str) -> float:
    """A Kubernetes quantity ("900m", "976M", "16Gi", "2") as a number."""
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIXES[suffix]
    return float(text)


def _insufficient(requests: dict[str, str]) -> list[str]:
    """The resources of `requests` the node does not have enough of."""
    return [k for k, v in requests.items() if quantity(str(v)) > quantity(NODE_ALLOCATABLE.get(k, "0"))]


class _Pod:
    def __init__(self, name: str, namespace: str, job: str, template: dict[str, Any], log_dir: str,
                 hosts: dict[str, str] | None = None) -> None:
        self.name, self.namespace, self.job = name, namespace, job
        self.labels = {**template.get("metadata", {}).get("labels", {}), "volcano.sh/job-name": job}
        container = template["spec"]["containers"][0]
        self.container_name = str(container.get("name", "main"))
        self.reason: str | None = None  # set when the cluster, not the container, ended the pod
        self.message = ""
        self.disruption: str | None = None
        self.log_path = os.path.join(log_dir, f"{name}.log")
        # a pod no node can hold is never scheduled: Pending, PodScheduled False (Unschedulable)
        self.unschedulable = _insufficient(dict((container.get("resources") or {}).get("requests") or {}))
        self.started_at = _now()
        self.proc: subprocess.Popen[bytes] | None = None
        if self.unschedulable:
            return
        env = {**os.environ, **(hosts or {}), **{e["name"]: str(e.get("value", "")) for e in container.get("env", [])}}
        cmd = [*container.get("command", []), *container.get("args", [])]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=log_dir,
                                         start_new_session=True)

    def phase(self) -> str:
        if self.proc is None:
            return "Pending"
        rc = self.proc.poll()
        if self.reason is not None:
            return "Failed" if rc is not None else "Running"
        return "Running" if rc is None else ("Succeeded" if rc == 0 else "Failed")

    def view(self) -> dict[str, Any]:
        """The pod as the API server returns it (the fields the runner reads)."""
        if self.proc is None:
            short = ", ".join(f"1 Insufficient {k}" for k in self.unschedulable)
            return {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels},
                    "spec": {}, "status": {"phase": "Pending", "conditions": [
                        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                         "message": f"0/1 nodes are available: {short}. preemption: 0/1 nodes are available: "
                                    "1 No preemption victims found for incoming pod."}]}}
        rc = self.proc.poll()
        state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
        if rc is not None:
            state = {"terminated": {"exitCode": rc if rc >= 0 else 128 - rc,
                                    "reason": "Completed" if rc == 0 else "Error"}}
        status: dict[str, Any] = {"phase": self.phase(),
                                  "containerStatuses": [{"name": self.container_name, "state": state}]}
        if self.reason:
            status.update(reason=self.reason, message=self.message)
        if self.disruption:
            status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": self.disruption,
                                     "message": self.message}]
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels},
                "spec": {"nodeName": NODE}, "status": status}

    def kill(self, grace: float | None) -> None:
        """Kill the pod's processes: at once (SIGKILL) with `grace` None, else SIGTERM first."""
        if self.proc is None:
            return
        if grace is not None:
            self.terminate(grace)
        elif self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def terminate(self, grace: float = 10.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass


class StandInCluster:
    """The stand-in API server. Use as a context manager; `url` is its address."""

    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], _Pod] = {}
        self.created: list[dict[str, Any]] = []  # every accepted Job body, for assertions
        self.pods_forbidden = False  # True: listing pods answers 403, as RBAC without `list pods` would
        self.lock = threading.Lock()
        self.log_dir = tempfile.mkdtemp(prefix="k8s-standin-")
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StandInCluster:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        for pod in self.pods.values():
            pod.terminate(grace=2)

    def _job_view(self, ns: str, name: str) -> dict[str, Any]:
        body = self.jobs[(ns, name)]
        phases = [self.pods[(ns, p)].phase() for p in body["_pods"]]
        if any(p == "Running" for p in phases):
            phase = "Running"
        elif any(p == "Pending" for p in phases):
            phase = "Pending"
        elif all(p == "Succeeded" for p in phases):
            phase = "Completed"
        else:
            phase = "Failed"
        if body.get("_phase") != phase:  # Volcano stamps each phase change
            body["_phase"], body["_since"] = phase, _now()
        view = {k: v for k, v in body.items() if not k.startswith("_")}
        view["status"] = {"state": {"phase": phase, "lastTransitionTime": body["_since"]},
                          "taskStatusCount": {t["name"]: {"phase": {phase if phase != "Completed" else "Succeeded": 1}}
                                              for t in body["spec"]["tasks"]}}
        return view

    def _create(self, ns: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = body.get("metadata", {}).get("name")
        if body.get("apiVersion") != "batch.volcano.sh/v1alpha1" or body.get("kind") != "Job" or not name:
            return 422, _status(422, "Invalid", "expected a named batch.volcano.sh/v1alpha1 Job")
        errors = [e for t in body.get("spec", {}).get("tasks", []) for e in validate_pod_template(t["template"])]
        if errors:
            return 422, _status(422, "Invalid", "; ".join(errors))
        with self.lock:
            if (ns, name) in self.jobs:
                return 409, {**_status(409, "AlreadyExists", f"jobs {name} already exists"), "details": {"name": name}}
            pods = []
            # Volcano's svc plugin: every pod learns each task's hosts as VC_<TASK>_HOSTS (here,
            # where every pod is a local process, this machine)
            hosts = {f"VC_{t['name'].upper().replace('-', '_')}_HOSTS": "127.0.0.1"
                     for t in body["spec"]["tasks"]} if "svc" in body["spec"].get("plugins", {}) else {}
            for task in body["spec"]["tasks"]:
                for i in range(int(task.get("replicas", 1))):
                    pod_name = f"{name}-{task['name']}-{i}"
                    self.pods[(ns, pod_name)] = _Pod(pod_name, ns, name, task["template"], self.log_dir, hosts)
                    pods.append(pod_name)
            stored = {**body, "metadata": {**body["metadata"], "namespace": ns,
                                           "creationTimestamp": _now()}, "_pods": pods}
            self.jobs[(ns, name)] = stored
            self.created.append(body)
            return 201, self._job_view(ns, name)

    def evict(self, ns: str, name: str, reason: str = "Evicted",
              message: str = "The node was low on resource: memory.", disruption: str | None = None,
              grace: float | None = None) -> None:
        """End the pods of Volcano Job `name` as the cluster would: kill them (SIGKILL at
        once, or SIGTERM and `grace` seconds) and report `reason` (Evicted, Preempting,
        NodeLost, DeadlineExceeded, ...) as their `status.reason`, or, with `disruption`
        (e.g. PreemptionByScheduler), as a DisruptionTarget condition only. The Job then
        fails (no Volcano policy restarts it: TorchX sets none)."""
        with self.lock:
            pods = [self.pods[(ns, p)] for p in self.jobs[(ns, name)]["_pods"]]
        for pod in pods:
            pod.reason, pod.message, pod.disruption = (reason if not disruption else ""), message, disruption
            pod.kill(grace)

    def _delete(self, ns: str, name: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            body = self.jobs.pop((ns, name), None)
        if body is None:
            return 404, _status(404, "NotFound", f"jobs.batch.volcano.sh {name!r} not found")
        for pod in body["_pods"]:
            self.pods[(ns, pod)].terminate()
        return 200, _status(200, "Success", "deleted")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, payload: Any, content_type: str = "application/json") -> None:
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                url = urlparse(self.path)
                if m := JOBS.match(url.path):
                    ns, name, _ = m.groups()
                    with cluster.lock:
                        if name is None:
                            items = [cluster._job_view(n, j) for (n, j) in cluster.jobs if n == ns]
                            return self._send(200, {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "JobList",
                                                    "items": items, "metadata": {}})
                        if (ns, name) in cluster.jobs:
                            return self._send(200, cluster._job_view(ns, name))
                    return self._send(404, _status(404, "NotFound", f"jobs.batch.volcano.sh {name!r} not found"))
                if (m := PODS.match(url.path)) and cluster.pods_forbidden:
                    return self._send(403, _status(403, "Forbidden", "pods is forbidden: cannot list resource pods"))
                if m:
                    wanted = [kv.split("=", 1) for kv in parse_qs(url.query).get("labelSelector", [""])[0].split(",")
                              if "=" in kv]
                    with cluster.lock:
                        items = [p.view() for (n, _), p in cluster.pods.items() if n == m.group(1)
                                 and all(p.labels.get(k) == v for k, v in wanted)]
                    return self._send(200, {"apiVersion": "v1", "kind": "PodList", "items": items, "metadata": {}})
                if url.path == "/api/v1/nodes":
                    node = {"metadata": {"name": NODE}, "status": {"allocatable": NODE_ALLOCATABLE,
                                                                   "capacity": NODE_ALLOCATABLE}}
                    return self._send(200, {"apiVersion": "v1", "kind": "NodeList", "items": [node], "metadata": {}})
                if m := POD_LOG.match(url.path):
                    pod = cluster.pods.get((m.group(1), m.group(2)))
                    if pod is None:
                        return self._send(404, _status(404, "NotFound", f"pods {m.group(2)!r} not found"))
                    with open(pod.log_path, encoding="utf-8", errors="replace") as f:
                        text = f.read()
                    if parse_qs(url.query).get("timestamps") == ["true"]:
                        text = "".join(f"{_now()} {line}" for line in text.splitlines(keepends=True))
                    return self._send(200, text, "text/plain")
                self._send(404, _status(404, "NotFound", f"the stand-in does not serve {url.path}"))

            def do_POST(self) -> None:  # noqa: N802
                m = JOBS.match(urlparse(self.path).path)
                if not m or m.group(2):
                    return self._send(404, _status(404, "NotFound", "not served"))
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                self._send(*cluster._create(m.group(1), body))

            def do_DELETE(self) -> None:  # noqa: N802
                m = JOBS.match(urlparse(self.path).path)
                if not m or not m.group(2):
                    return self._send(404, _status(404, "NotFound", "not served"))
                self._send(*cluster._delete(m.group(1), m.group(2)))

        return Handler


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure" if code >= 400 else "Success",
            "message": message, "reason": reason, "code": code}


if __name__ == "__main__":
    with StandInCluster() as c:
        print(c.url, flush=True)
        while True:
            time.sleep(3600)
