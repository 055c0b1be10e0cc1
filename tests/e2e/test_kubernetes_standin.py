"""A whole nasctl experiment on the kubernetes runner, against the stand-in API
server of tests/k8s_standin.py: TorchX creates real Volcano Job objects over
HTTP, the stand-in validates each pod template against the Kubernetes schema
and runs it as a local process, trials write TensorBoard files to the "shared
volume" (a directory mounted at the same path), and nasctl reads metrics from
there. No Kubernetes or Volcano code runs; see the README for what that leaves out."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nasctl.store import Store
from nasctl.types import TrialStatus
from tests.conftest import run_cli
from tests.k8s_standin import StandInCluster

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).parent / "scripts" / "resumable_trial.py"


@pytest.fixture
def cluster() -> Iterator[StandInCluster]:
    with StandInCluster() as c:
        yield c


def test_experiment_completes_on_the_stand_in_api_server(tmp_path: Path, cluster: StandInCluster) -> None:
    volume = tmp_path / "volume"
    volume.mkdir()
    cfg = {"api_server": cluster.url, "queue": "default", "namespace": "nas", "image": "nasctl:test",
           "log_volume_claim": "nasctl-runs", "log_mount_path": str(volume), "python": sys.executable}
    spec = tmp_path / "k8s.yaml"
    spec.write_text(
        "name: k8s-standin\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize, threshold: 1.1}, f2: {goal: minimize, threshold: 2.1}}\n"
        "budget: {max_trials: 4, parallelism: 2, max_failures: 0}\n"
        f"trial: {{script: {SCRIPT}}}\n"
        f"runner: {{scheduler: kubernetes, cfg: {json.dumps(cfg)}}}\n"
        "optimizer: {method: sobol, initial_trials: 4, seed: 5}\n"
    )
    db = f"sqlite:///{tmp_path}/k.db"
    result = run_cli("run", str(spec), "--db", db, "--json", "--workdir", str(volume / "runs"), cwd=tmp_path,
                     timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["status"] == "COMPLETED"

    store = Store(db)
    trials = store.list_trials(store.get_experiment("k8s-standin").id)
    store.close()
    assert [t.status for t in trials] == [TrialStatus.COMPLETED] * 4
    for t in trials:
        assert t.scheduler == "kubernetes" and (t.job_handle or "").startswith("kubernetes://torchx/nas:")
        assert Path(t.log_dir or "").is_relative_to(volume)  # metrics were read from the shared volume
        x, y = float(t.parameters["x"]), float(t.parameters["y"])
        assert t.values["f1"] == pytest.approx(x, rel=1e-5)
        assert t.values["f2"] == pytest.approx(1 - math.sqrt(x) + y, rel=1e-5)
        assert f"trial {t.index} done" in Path(t.runner_metadata["stdout"]).read_text()
        (a,) = t.attempts  # it ran from when the Volcano Job went Running (its lastTransitionTime)
        assert a["first_run_at"] is not None and a["first_run_at"] >= a["started_at"] and a["queued_s"] < 30, a
    assert len(cluster.created) == 4  # one Volcano Job per trial, each accepted after schema validation
    assert {job["spec"]["queue"] for job in cluster.created} == {"default"}


def test_a_two_node_trial_is_one_volcano_job_of_two_tasks_whose_ranks_meet(
        tmp_path: Path, cluster: StandInCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """`trial.resources.nodes: 2`: one Volcano Job with a task per node; each pod's launcher
    starts torch.distributed.run with its replica id as node rank and pod 0's address from
    Volcano's VC_TRIAL_0_HOSTS; the two ranks all-reduce, and rank 0 logs the objectives."""
    import socket

    with socket.socket() as s:  # the stand-in's pods are processes of this machine: a free port
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("MASTER_PORT", str(s.getsockname()[1]))
    volume = tmp_path / "volume"
    volume.mkdir()
    spec = tmp_path / "k8s2.yaml"
    spec.write_text(
        "name: k8s-2x1\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize}, f2: {goal: minimize}}\n"
        "budget: {max_trials: 1, parallelism: 1, max_failures: 0}\n"
        f"trial: {{script: {Path(__file__).parent / 'scripts' / 'ddp_trial.py'}, resources: {{nodes: 2}}}}\n"
        f"runner: {{scheduler: kubernetes, cfg: {json.dumps(_cfg(cluster, volume))}}}\n"
        "optimizer: {method: sobol, initial_trials: 1, seed: 5}\n")
    db = f"sqlite:///{tmp_path}/k.db"
    result = run_cli("run", str(spec), "--db", db, "--json", "--workdir", str(volume / "runs"), cwd=tmp_path,
                     timeout=300)
    assert result.returncode == 0, result.stderr
    (job,) = cluster.created
    assert [t["name"] for t in job["spec"]["tasks"]] == ["trial-0", "trial-1"]
    store = Store(db)
    (t,) = store.list_trials(store.get_experiment("k8s-2x1").id)
    store.close()
    assert t.status == TrialStatus.COMPLETED, t.failure_reason
    assert t.values["world_size"] == 2.0 and t.values["rank_sum"] == 1.0  # ranks 0 and 1 met
    ranks = sorted(json.loads(p.read_text())["rank"] for p in Path(t.runner_metadata["state_dir"], "ranks").iterdir())
    assert ranks == [0, 1]


def _cfg(cluster: StandInCluster, volume: Path) -> dict[str, str]:
    return {"api_server": cluster.url, "queue": "default", "namespace": "nas", "image": "nasctl:test",
            "log_volume_claim": "nasctl-runs", "log_mount_path": str(volume), "python": sys.executable}


def test_a_pod_no_node_can_hold_is_refused_before_and_unschedulable_after_submission(
        tmp_path: Path, cluster: StandInCluster) -> None:
    """The stand-in's node offers 4 CPUs: `nasctl run` refuses 64 before anything is
    written; a job submitted anyway (as a node pool that shrank would leave it) waits
    Unschedulable, and the runner ends it UNSCHEDULABLE naming the resource."""
    from nasctl.runners.base import JobRequest, JobState
    from nasctl.runners.kubernetes import KubernetesRunner
    from nasctl.types import FailureClass

    volume = tmp_path / "volume"
    volume.mkdir()
    spec = tmp_path / "big.yaml"
    spec.write_text(
        "name: k8s-big\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize}, f2: {goal: minimize}}\n"
        "budget: {max_trials: 2}\n"
        f"trial: {{script: {SCRIPT}, resources: {{cpu: 64, mem_mb: 2000, gpu: 0}}}}\n"
        f"runner: {{scheduler: kubernetes, cfg: {json.dumps(_cfg(cluster, volume))}}}\n")
    result = run_cli("run", str(spec), "--db", f"sqlite:///{tmp_path}/k.db", "--workdir", str(volume / "runs"),
                     cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip()
    assert "\n" not in line and "trial.resources.cpu" in line and "no node" in line and "more than 4" in line, line
    assert not (tmp_path / "k.db").exists() and cluster.created == []

    runner = KubernetesRunner(_cfg(cluster, volume))
    job = runner.submit(JobRequest("k8s-big-0", sys.executable, [str(SCRIPT), "--x", "0.1", "--y", "0.2"],
                                   {"NASCTL_TRIAL_ID": "0"}, str(volume / "runs" / "t0"), cpu=8))
    st = runner.status([job])[job.handle]
    assert (st.state, st.failure_class) == (JobState.FAILED, FailureClass.UNSCHEDULABLE), st
    assert "Insufficient cpu" in (st.message or "") and "no node offers more than 4" in (st.message or ""), st
    runner.cancel(job)
    assert runner.status([job])[job.handle].state.is_terminal
