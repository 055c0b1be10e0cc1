"""Slurm and Kubernetes runners without a cluster: the requests they would send
(sbatch scripts, Volcano Jobs validated against the Kubernetes schemas), the
Slurm state table, and `.torchxconfig` handling."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from nasctl.errors import SpecError
from nasctl.runners import JobRequest, JobState, get_runner
from nasctl.runners.kubernetes import KubernetesRunner
from nasctl.runners.slurm import SlurmRecord, map_state
from nasctl.types import FailureClass
from tests.conftest import ROOT, run_cli

K8S_VERSION = "1.30"

# The parts of Volcano's CRD schema (jobs.batch.volcano.sh, v1alpha1) that a
# Job created by TorchX uses; unknown fields are refused, as the API server
# (structural schema, pruning disabled for tests) would flag them.
VOLCANO_JOB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "batch.volcano.sh/v1alpha1"},
        "kind": {"const": "Job"},
        "metadata": {"type": "object", "required": ["name"],
                     "properties": {"name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                                             "maxLength": 63}}},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["tasks"],
            "properties": {
                "schedulerName": {"type": "string"},
                "queue": {"type": "string", "minLength": 1},
                "maxRetry": {"type": "integer", "minimum": 0},
                "minAvailable": {"type": "integer", "minimum": 0},
                "priorityClassName": {"type": "string"},
                "ttlSecondsAfterFinished": {"type": "integer"},
                "plugins": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
                "policies": {"type": "array"},
                "volumes": {"type": "array"},
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "replicas", "template"],
                        "properties": {
                            "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                            "replicas": {"type": "integer", "minimum": 1},
                            "minAvailable": {"type": "integer", "minimum": 0},
                            "maxRetry": {"type": "integer", "minimum": 0},
                            "policies": {"type": "array"},
                            "template": {"type": "object", "required": ["spec"]},
                        },
                    },
                },
            },
        },
    },
}

K8S_CFG = {"queue": "research", "namespace": "nas", "image": "registry.example.com/nasctl:0.1.0",
           "log_volume_claim": "nasctl-runs", "log_mount_path": "/mnt/nasctl"}


def request(trial_dir: str = "/mnt/nasctl/runs/exp/trials/trial_0003", cpu: int = 2, mem_mb: int = 3000,
            gpu: int = 0) -> JobRequest:
    return JobRequest("exp-3", sys.executable, ["-m", "nasctl.search_spaces.mlp", "--epochs", "2"],
                      {"NASCTL_TRIAL_ID": "3", "NASCTL_LOG_DIR": f"{trial_dir}/tb"}, trial_dir, cpu, mem_mb, gpu)


@pytest.fixture(autouse=True)
def _no_user_torchxconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the .torchxconfig a test writes counts (TorchX also reads $HOME and the cwd)."""
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)


INFRA, USER, TIMEOUT, CANCELLED = (FailureClass.INFRASTRUCTURE, FailureClass.USER, FailureClass.TIMEOUT,
                                   FailureClass.CANCELLED)


@pytest.mark.parametrize(("state", "expected", "cls", "words"), [
    ("PENDING", JobState.PENDING, None, None),
    ("REQUEUED", JobState.PENDING, None, None),  # the same attempt goes on under the same job id
    ("REQUEUE_HOLD", JobState.PENDING, None, None),
    ("REQUEUE_FED", JobState.PENDING, None, None),
    ("SPECIAL_EXIT", JobState.PENDING, None, None),
    ("SUSPENDED", JobState.PENDING, None, None),
    ("CONFIGURING", JobState.PENDING, None, None),
    ("RESIZING", JobState.PENDING, None, None),
    ("RESV_DEL_HOLD", JobState.PENDING, None, None),
    ("RUNNING", JobState.RUNNING, None, None),
    ("COMPLETING", JobState.RUNNING, None, None),
    ("SIGNALING", JobState.RUNNING, None, None),
    ("STAGE_OUT", JobState.RUNNING, None, None),
    ("STOPPED", JobState.RUNNING, None, None),
    ("COMPLETED", JobState.SUCCEEDED, None, None),
    ("FAILED", JobState.FAILED, USER, "exit code 3"),
    ("OUT_OF_MEMORY", JobState.FAILED, USER, "trial.resources.mem_mb"),
    ("CANCELLED by 0", JobState.CANCELLED, CANCELLED, "CANCELLED by 0"),
    ("CANCELLED", JobState.CANCELLED, CANCELLED, "CANCELLED"),
    ("TIMEOUT", JobState.FAILED, TIMEOUT, "runner.cfg.time"),
    ("DEADLINE", JobState.FAILED, TIMEOUT, "deadline"),
    ("NODE_FAIL", JobState.FAILED, INFRA, "node"),
    ("BOOT_FAIL", JobState.FAILED, INFRA, "boot"),
    ("PREEMPTED", JobState.FAILED, INFRA, "preempted"),
    ("REVOKED", JobState.FAILED, INFRA, "revoked"),
    ("SOMETHING_NEW", JobState.UNKNOWN, None, "SOMETHING_NEW"),
])
def test_every_slurm_state_is_mapped(state: str, expected: JobState, cls: FailureClass | None,
                                     words: str | None) -> None:
    st = map_state(SlurmRecord("42", "exp-3-0", state, 3, "None", "node2"))
    assert (st.state, st.failure_class) == (expected, cls)
    if words:
        assert words in (st.message or ""), st.message
    if expected in (JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED):
        assert st.node == "node2"


def test_a_slurm_job_without_a_node_has_none() -> None:
    assert map_state(SlurmRecord("42", "exp-3-0", "CANCELLED by 0", 0, "None", "None assigned")).node is None


def test_sbatch_keeps_output_across_requeues_and_sends_the_warning_signal(tmp_path: Path) -> None:
    trial = str(tmp_path / "t")
    text = get_runner("slurm", {"time": "30", "signal": "sigusr1@120"}).dryrun(request(trial))
    sbatch = next(line for line in text.splitlines() if line.startswith("#SBATCH"))
    srun = next(line for line in text.splitlines() if line.startswith("srun "))
    assert "--open-mode=append" in sbatch and "--signal=USR1@120" in sbatch
    assert "--open-mode=append" in srun and "--signal" not in get_runner("slurm", {}).dryrun(request(trial))


@pytest.mark.parametrize(("value", "words"), [
    ("USR1@120\nUSR2", "must be like USR1@120"),
    ("TERM@60", "USR1 or USR2"),
    ("USR1@99999", "0-65535"),
    ("B:USR1@60", "drop the B: prefix: USR1@60"),
    (True, "must be like"),
])
def test_a_bad_signal_option_is_bad_input(value: object, words: str) -> None:
    with pytest.raises(SpecError, match=words) as ei:
        get_runner("slurm", {"signal": value})
    assert ei.value.exit_code == 2


def test_sbatch_script_carries_resources_and_writes_to_the_trial_dir(tmp_path: Path) -> None:
    trial = str(tmp_path / "trials" / "trial_0003")
    text = get_runner("slurm", {"partition": "debug", "time": "30"}).dryrun(request(trial, cpu=2, mem_mb=3000, gpu=1))
    assert text.startswith("sbatch --parsable")
    for flag in ("--job-name=exp-3-0", "--partition=debug", "--time=30", "--cpus-per-task=2", "--mem=3000",
                 "--gpus-per-task=1", f"--output={trial}/job/slurm-%j.out",
                 f'--output={trial}/job/slurm-"$SLURM_JOB_ID"-exp-3-0.out', "NASCTL_TRIAL_ID=3", sys.executable):
        assert flag in text, flag
    assert not Path(trial).exists()  # a dry run writes nothing


def test_ddp_option_runs_torchrun_with_one_cpu_set_per_process(tmp_path: Path) -> None:
    text = get_runner("slurm", {"nproc_per_node": 2}).dryrun(request(str(tmp_path / "t"), cpu=1))
    assert "--cpus-per-task=2" in text and "torch.distributed.run --standalone --nnodes 1 --nproc_per_node 2" in text
    with pytest.raises(SpecError, match="nproc_per_node must be a positive integer"):
        get_runner("slurm", {"nproc_per_node": 0})


def test_slurm_refuses_unknown_and_reserved_options() -> None:
    with pytest.raises(SpecError, match=r"\['gpus'\] that slurm does not take.*partition") as ei:
        get_runner("slurm", {"gpus": 2})
    assert ei.value.exit_code == 2
    with pytest.raises(SpecError, match="job_dir"):
        get_runner("slurm", {"job_dir": "/tmp/x"})


def test_torchxconfig_fills_slurm_options_and_the_spec_wins(tmp_path: Path) -> None:
    (tmp_path / ".torchxconfig").write_text("[slurm]\npartition = debug\ntime = 7\ncomment = from-file\n")
    text = get_runner("slurm", {"time": "3"}).dryrun(request(str(tmp_path / "t")))
    assert "--partition=debug" in text and "--time=3" in text and "--time=7" not in text
    assert text.startswith("sbatch --parsable --comment=from-file")


def test_torchxconfig_fills_kubernetes_options_and_the_spec_wins(tmp_path: Path) -> None:
    (tmp_path / ".torchxconfig").write_text("[kubernetes]\nqueue = from-file\nnamespace = team-a\n")
    cfg = {k: v for k, v in K8S_CFG.items() if k not in ("queue", "namespace")}
    runner = KubernetesRunner(cfg)
    job = runner.manifests(request())
    assert job["spec"]["queue"] == "from-file" and runner.dryrun(request()).startswith("# namespace: team-a")
    assert KubernetesRunner({**cfg, "queue": "spec"}).manifests(request())["spec"]["queue"] == "spec"


def test_volcano_job_and_pod_templates_pass_the_kubernetes_schemas() -> None:
    job = KubernetesRunner(K8S_CFG).manifests(request(gpu=1))
    jsonschema.validate(job, VOLCANO_JOB_SCHEMA)
    (task,) = job["spec"]["tasks"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": task["name"], **task["template"]["metadata"]},
           "spec": task["template"]["spec"]}
    kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
    (container,) = pod["spec"]["containers"]
    assert container["image"] == K8S_CFG["image"] and job["spec"]["queue"] == "research"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["resources"]["limits"]["cpu"] == "2000m"
    claim = [v for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert claim and claim[0]["persistentVolumeClaim"]["claimName"] == "nasctl-runs"
    assert {"mountPath": "/mnt/nasctl", "name": claim[0]["name"], "readOnly": False} in container["volumeMounts"]
    script = container["command"][-1]
    assert "nasctl.runners.launcher --state-dir /mnt/nasctl/runs/exp/trials/trial_0003/job" in script
    assert "-- python -m nasctl.search_spaces.mlp --epochs 2" in script  # the image's python, not ours
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NASCTL_LOG_DIR"] == "/mnt/nasctl/runs/exp/trials/trial_0003/tb"


def test_a_broken_pod_template_fails_validation() -> None:
    job = KubernetesRunner(K8S_CFG).manifests(request())
    spec = job["spec"]["tasks"][0]["template"]["spec"]
    spec["containers"][0]["resources"]["limits"]["cpu"] = {"not": "a quantity"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": spec}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_kubernetes_needs_its_options_and_a_trial_dir_on_the_volume() -> None:
    with pytest.raises(SpecError, match=r"lacks \['image'\]"):
        KubernetesRunner({k: v for k, v in K8S_CFG.items() if k != "image"})
    with pytest.raises(SpecError, match="not under runner.cfg.log_mount_path /mnt/nasctl.*--workdir"):
        KubernetesRunner(K8S_CFG).dryrun(request("/home/me/nasctl_runs/exp/trials/trial_0003"))


def test_cli_dryrun_prints_the_sbatch_script_and_the_volcano_job(tmp_path: Path) -> None:
    slurm = run_cli("run", str(ROOT / "examples" / "digits_mlp_slurm.yaml"), "--dryrun", cwd=tmp_path)
    assert slurm.returncode == 0, slurm.stderr
    assert "#SBATCH --job-name=digits-mlp-slurm-0-0 --requeue --partition=debug --time=15" in slurm.stdout
    assert "srun --output=" in slurm.stdout and "nasctl.search_spaces.mlp" in slurm.stdout
    k8s = run_cli("run", str(ROOT / "examples" / "digits_mlp_k8s.yaml"), "--dryrun", "--workdir", "/mnt/nasctl/runs",
                  cwd=tmp_path)
    assert k8s.returncode == 0, k8s.stderr
    assert "# namespace: nas\napiVersion: batch.volcano.sh/v1alpha1\nkind: Job" in k8s.stdout
    assert "claimName: nasctl-runs" in k8s.stdout
    bad = run_cli("run", str(ROOT / "examples" / "digits_mlp_k8s.yaml"), "--dryrun", cwd=tmp_path)
    assert bad.returncode == 2 and "--workdir under /mnt/nasctl" in bad.stderr


def test_a_refused_cancel_takes_its_marker_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cancel marker says the SIGTERM that follows is nasctl's; when the scheduler
    refuses the cancel, no such signal comes, so the marker must not stay."""
    from nasctl.errors import RunnerError
    from nasctl.runners.base import SubmittedJob
    from nasctl.runners.launcher import CANCEL_MARKER

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scancel").write_text("#!/bin/sh\necho 'scancel: error: Access/permission denied' >&2\nexit 1\n")
    (bin_dir / "scancel").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    sdir = tmp_path / "job"
    sdir.mkdir()
    job = SubmittedJob("slurm://torchx/123", {"state_dir": str(sdir)})
    with pytest.raises(RunnerError, match="scancel 123 failed: scancel: error: Access/permission denied"):
        get_runner("slurm", {}).cancel(job)
    assert not (sdir / CANCEL_MARKER).exists()
    get_runner("slurm", {}).cancel(SubmittedJob("not-a-slurm-handle", {"state_dir": str(sdir)}))  # not ours: no-op
    assert not (sdir / CANCEL_MARKER).exists()
