"""Trials that span nodes, without a cluster: the spec, what each runner would send
(sbatch with --nodes, a Volcano Job with one task per node), the launcher's per-node
command, the rank wrapper's environment, rank-0-only metrics, and how a failed
rank becomes the job's reason. The real runs are tests/e2e/test_slurm_multinode.py."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest

from nasctl.errors import SpecError
from nasctl.metrics.tensorboard import event_files, read_scalars, write_scalars
from nasctl.runners import JobRequest, JobState, JobStatus, get_runner
from nasctl.runners.distributed import multi_node_command, node_placement, rank_env, rendezvous_port
from nasctl.runners.kubernetes import KubernetesRunner, pods_held
from nasctl.runners.launcher import DUPLICATE_EXIT, exit_record, write_json_atomic
from nasctl.runners.outcome import first_failure, settle
from nasctl.runners.slurm import NodeOffer, check_fits
from nasctl.types import FailureClass
from tests.conftest import ROOT, run_cli
from tests.unit.test_cluster_runners import K8S_CFG, K8S_VERSION, VOLCANO_JOB_SCHEMA

TRIAL = "/mnt/nasctl/runs/exp/trials/trial_0003"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(nodes: int, trial_dir: str = TRIAL, gpu: int = 0) -> JobRequest:
    return JobRequest("exp-3", sys.executable, ["-m", "nasctl.search_spaces.mlp", "--epochs", "2"],
                      {"NASCTL_TRIAL_ID": "3", "NASCTL_LOG_DIR": f"{trial_dir}/tb"}, trial_dir, 1, 1000, gpu,
                      nodes=nodes)


def test_sbatch_asks_for_one_task_on_each_node_and_no_requeue() -> None:
    text = get_runner("slurm", {"nproc_per_node": 2}).dryrun(request(2, gpu=1))
    sbatch = next(line for line in text.splitlines() if line.startswith("#SBATCH --job-name"))
    for flag in ("--nodes=2", "--ntasks-per-node=1", "--no-requeue", "--cpus-per-task=2", "--gpus-per-task=1"):
        assert flag in sbatch, (flag, sbatch)
    assert "--requeue" not in sbatch.replace("--no-requeue", "")  # a lost node ends the attempt; nasctl retries
    assert "hetjob" not in text  # one job of N tasks, not N heterogeneous components
    assert f"nasctl.runners.launcher --state-dir {TRIAL}/job --nnodes 2 --nproc-per-node 2 -- {sys.executable}" in text
    one = get_runner("slurm", {}).dryrun(request(1))
    assert "--nodes" not in one and "--requeue" in one and "--nnodes" not in one  # one node: as before


def test_a_partition_with_too_few_nodes_for_the_trial_is_refused_in_one_line() -> None:
    offers = [NodeOffer("node1", 2, 8000, 0), NodeOffer("node2", 2, 8000, 0), NodeOffer("node3", 1, 8000, 0)]
    check_fits("debug", offers, 2, 1000, 0, nodes=2)
    with pytest.raises(SpecError) as e:
        check_fits("debug", offers, 2, 1000, 0, nodes=3)
    assert "trial.resources.nodes asks for 3 nodes" in e.value.message and "2 of them" in e.value.message
    assert "at most 2" in (e.value.hint or "") and "\n" not in e.value.message


def test_volcano_job_has_one_task_per_node_and_each_pod_starts_its_node() -> None:
    runner = KubernetesRunner({**K8S_CFG, "nproc_per_node": 2})
    job = runner.manifests(request(2))
    jsonschema.validate(job, VOLCANO_JOB_SCHEMA)
    tasks = job["spec"]["tasks"]
    assert [t["name"] for t in tasks] == ["trial-0", "trial-1"] and all(t["replicas"] == 1 for t in tasks)
    for k, task in enumerate(tasks):
        spec = task["template"]["spec"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": task["name"]}, "spec": spec}
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
        (container,) = spec["containers"]
        launch = shlex.split(container["command"][-1].split("&& exec ")[-1])
        rank0 = "TORCHX_RANK0_HOST" if k == 0 else "VC_TRIAL_0_HOSTS"
        at = launch.index("--nnodes")
        assert launch[at:at + 11] == ["--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(k), "--rank0-env",
                                      rank0, "--", "python", "-m"], launch
        assert container["resources"]["limits"]["cpu"] == "2000m"  # cpu x nproc_per_node
    single = KubernetesRunner(K8S_CFG).manifests(request(1))["spec"]["tasks"]
    assert len(single) == 1 and "--nnodes" not in single[0]["template"]["spec"]["containers"][0]["command"][-1]


def test_pods_held_counts_the_whole_cluster() -> None:
    nodes = [{"cpu": 4.0, "memory": 8e9}, {"cpu": 2.0, "memory": 8e9}, {"cpu": 1.0, "memory": 8e9}]
    assert pods_held({"cpu": 2.0, "memory": 1e9}, nodes) == 3
    assert pods_held({"cpu": 2.0, "memory": 5e9}, nodes) == 2
    assert pods_held({"cpu": 0.0}, nodes) == sys.maxsize


@pytest.mark.parametrize("scheduler", ["local_cwd", "simulated", "inprocess"])
def test_runners_of_one_node_refuse_a_multi_node_trial(scheduler: str) -> None:
    with pytest.raises(SpecError) as e:
        get_runner(scheduler, {}).check_nodes(2)
    assert f"runner.scheduler {scheduler} runs a trial on one node" in e.value.message
    assert "slurm or kubernetes" in (e.value.hint or "")
    get_runner(scheduler, {}).check_nodes(1)


def test_cli_refuses_nodes_on_the_local_runner_with_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    example = (ROOT / "examples" / "digits_mlp.yaml").read_text()
    spec.write_text(example.replace("resources: {cpu: 1, mem_mb: 2000, gpu: 0}", "resources: {nodes: 2}"))
    p = run_cli("run", str(spec), "--db", f"sqlite:///{tmp_path}/d.db", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "trial.resources.nodes is 2, but runner.scheduler local_cwd runs a trial on one node" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    spec.write_text(spec.read_text().replace("nodes: 2", "nodes: 0"))
    p = run_cli("run", str(spec), "--db", f"sqlite:///{tmp_path}/d.db", cwd=tmp_path)
    assert p.returncode == 2 and "nodes" in p.stderr


def test_each_node_runs_torchrun_with_its_rank_and_the_first_nodes_address() -> None:
    env = {"SLURM_NODEID": "1", "SLURM_JOB_ID": "123", "SLURM_JOB_NODELIST": "node1,node2",
           "SLURM_LAUNCH_NODE_IPADDR": "10.0.0.1"}
    rank, host, port = node_placement(env, None, None)
    assert rank == 1 and host in ("node1", "10.0.0.1") and port == rendezvous_port("123") == 20123
    assert node_placement({"VC_TRIAL_0_HOSTS": "trial-0.svc"}, 1, "VC_TRIAL_0_HOSTS") == (1, "trial-0.svc", 29500)
    assert node_placement({**env, "MASTER_PORT": "31000"}, None, None)[2] == 31000  # the environment's own
    with pytest.raises(RuntimeError, match="node rank"):
        node_placement({}, None, None)
    cmd = multi_node_command(["python", "train.py"], 2, 4, 1, ("node1", 20123), "/t/job")
    assert cmd[1:] == ["-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "4",
                       "--master_addr", "node1", "--master_port", "20123",
                       "-m", "nasctl.runners.distributed", "--state-dir", "/t/job", "--", "python", "train.py"]


def test_ranks_other_than_0_log_and_checkpoint_aside() -> None:
    env = {"NASCTL_LOG_DIR": "/t/tb", "NASCTL_CHECKPOINT_DIR": "/t/ckpt", "NASCTL_RESUME_FROM": "/t/ckpt/last.ckpt"}
    assert rank_env(env, 0) == env
    r2 = rank_env(env, 2)
    assert r2["NASCTL_LOG_DIR"] == "/t/tb/ranks/2" and r2["NASCTL_CHECKPOINT_DIR"] == "/t/tb/ranks/2/checkpoints"
    assert r2["NASCTL_RESUME_FROM"] == "/t/ckpt/last.ckpt"  # every rank resumes rank 0's checkpoint


def test_the_metric_reader_skips_other_ranks_files(tmp_path: Path) -> None:
    write_scalars(tmp_path, {"val_acc": 0.5}, step=1)
    write_scalars(tmp_path / "ranks" / "1", {"val_acc": 0.25}, step=1)  # a script that logs from every rank
    write_scalars(tmp_path / "nested", {"other": 1.0}, step=1)
    assert [p.relative_to(tmp_path).parts[0] for p in event_files(tmp_path)].count("ranks") == 0
    values = {(o.metric, o.step): o.value for o in read_scalars(tmp_path)}
    assert values == {("val_acc", 1): 0.5, ("other", 1): 1.0}


def _rank(sdir: Path, rank: int, node: str, ended: float, rc: int | None = None, sig: str | None = None) -> None:
    (sdir / "ranks").mkdir(parents=True, exist_ok=True)
    rec = {"rank": rank, "node": node, "ended": ended, "returncode": rc if rc is not None else -15}
    if sig:
        rec["signal"] = sig
    (sdir / "ranks" / f"rank-{rank}.json").write_text(json.dumps(rec))


def test_the_first_rank_to_fail_on_its_own_is_the_jobs_reason(tmp_path: Path) -> None:
    sdir = tmp_path / "job"
    sdir.mkdir()
    # rank 1 crashed first; rank 0 then lost its peer (exit 1), rank 2 was stopped by Slurm (SIGTERM)
    _rank(sdir, 0, "node1", 102.0, rc=1)
    _rank(sdir, 1, "node2", 101.0, rc=3)
    _rank(sdir, 2, "node2", 103.0, sig="SIGTERM")
    write_json_atomic(str(sdir / "exit.json"), {"returncode": 143, "signal": "SIGTERM", "ended": 104.0})
    record = exit_record(str(sdir))
    assert record is not None and record["failed_rank"]["rank"] == 1
    slurm = JobStatus(JobState.FAILED, "the job exited with a non-zero code", 3, FailureClass.USER, "node[1-2]")
    st = settle(slurm, record)
    assert st.failure_class == FailureClass.USER and "rank 1 (node2) exited with code 3" in (st.message or "")
    # a lost node keeps the scheduler's class: the ranks' ends follow from it
    lost = JobStatus(JobState.FAILED, "the node running the job failed", None, FailureClass.INFRASTRUCTURE)
    assert settle(lost, record).failure_class == FailureClass.INFRASTRUCTURE
    # a segfault is the rank's own failure; a SIGTERM is not
    assert first_failure([{"rank": 3, "ended": 1.0, "signal": "SIGSEGV", "returncode": -11},
                          {"rank": 4, "ended": 0.5, "signal": "SIGTERM", "returncode": -15}])["rank"] == 3
    # node 0's launcher killed before it could write its record (srun --kill-on-bad-exit)
    (sdir / "exit.json").unlink()
    record = exit_record(str(sdir))
    assert record is not None and record["failed_rank"]["rank"] == 1 and record["returncode"] == 3
    assert settle(slurm, record).failure_class == FailureClass.USER
    (sdir / "cancelled.json").write_text("{}")  # nasctl stopped it: no rank's end is the cause
    assert exit_record(str(sdir)) is None
    write_json_atomic(str(sdir / "exit.json"), {"returncode": 0, "ended": 104.0})
    assert "failed_rank" not in (exit_record(str(sdir)) or {})


def test_a_node_of_a_duplicate_submission_runs_nothing(tmp_path: Path) -> None:
    sdir = tmp_path / "job"
    sdir.mkdir()
    (sdir / "claim").write_text(json.dumps({"job": "slurm://torchx/1", "pid": 1}))
    env = {**os.environ, "TORCHX_JOB_ID": "slurm://torchx/2", "SLURM_NODEID": "1", "SLURM_JOB_ID": "2",
           "SLURM_JOB_NODELIST": "localhost"}
    marker = tmp_path / "ran"
    p = subprocess.run([sys.executable, "-m", "nasctl.runners.launcher", "--state-dir", str(sdir), "--nnodes", "2",
                        "--", "touch", str(marker)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == DUPLICATE_EXIT, p.stderr
    assert "claimed by slurm://torchx/1" in p.stderr and not marker.exists()
    assert not (sdir / "node-1.json").exists()


def test_two_nodes_of_one_trial_run_as_one_world_and_a_crashing_rank_is_named(tmp_path: Path) -> None:
    """Two launchers on this machine play two nodes (as Kubernetes starts them: node rank and
    node 0's address given): rank 1 exits 3 after the ranks met; the record names it."""
    script = tmp_path / "crash.py"
    script.write_text(
        "import os, sys, time\n"
        "import torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "r = dist.get_rank()\n"
        "open(os.path.join(os.environ['NASCTL_LOG_DIR'], f'world-{r}'), 'w').write(str(dist.get_world_size()))\n"
        "dist.barrier()\n"
        "if r == 1:\n"
        "    sys.exit(3)\n"
        "dist.barrier()\n")
    sdir, tb = tmp_path / "job", tmp_path / "tb"
    tb.mkdir()
    env = {**os.environ, "TORCHX_JOB_ID": "local://t/1", "NODE0": "127.0.0.1", "NASCTL_LOG_DIR": str(tb),
           "OMP_NUM_THREADS": "1", "MASTER_PORT": str(free_port())}
    env.pop("SLURM_JOB_ID", None)
    procs = [subprocess.Popen([sys.executable, "-m", "nasctl.runners.launcher", "--state-dir", str(sdir),
                               "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(k), "--rank0-env", "NODE0",
                               "--", sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for k in (0, 1)]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert all(p.returncode != 0 for p in procs), outs
    assert (tb / "world-0").read_text() == "2" and (tb / "ranks" / "1" / "world-1").read_text() == "2", outs
    record = exit_record(str(sdir))
    assert record is not None and record["failed_rank"]["rank"] == 1 and record["failed_rank"]["returncode"] == 3
    node1 = json.loads((sdir / "node-1.json").read_text())
    assert node1["node_rank"] == 1 and node1["returncode"] != 0 and "ended" in node1
    assert time.time() - record["ended"] < 180


def test_each_process_of_a_node_takes_its_share_of_the_gpus_or_shares_one() -> None:
    from nasctl.search_spaces.trainer import own_device

    assert [own_device(r, 2, 4) for r in range(2)] == [(0, False), (2, False)]  # 2 GPUs each: the first of them
    assert [own_device(r, 4, 4) for r in range(4)] == [(r, False) for r in range(4)]
    assert [own_device(r, 2, 1) for r in range(2)] == [(0, True), (0, True)]  # one GPU, shared (gloo)
    assert [own_device(r, 3, 2) for r in range(3)] == [(0, True), (1, True), (0, True)]


def test_the_trainer_runs_ddp_with_each_process_one_node_of_one_device(monkeypatch: pytest.MonkeyPatch) -> None:
    from nasctl.search_spaces.trainer import parallel_settings

    assert parallel_settings("cpu") == {"accelerator": "cpu", "devices": 1}
    for k, v in {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "GROUP_RANK": "1",
                 "TORCHELASTIC_RUN_ID": "t"}.items():
        monkeypatch.setenv(k, v)
    settings = parallel_settings("cpu")
    strategy = settings.pop("strategy")
    assert settings == {"accelerator": "cpu", "devices": 1, "num_nodes": 4}
    env = strategy.cluster_environment
    assert env.local_rank() == 0 and env.node_rank() == 3 and env.global_rank() == 3 and env.world_size() == 4
    env.validate_settings(num_devices=1, num_nodes=4)  # what Lightning checks: 1 x 4 = WORLD_SIZE
    assert strategy.process_group_backend == "gloo"


def test_gpu_hours_count_the_devices_of_every_node() -> None:
    from nasctl.orchestration.launch import devices_held

    assert devices_held(request(2, gpu=4)) == 8.0
    assert devices_held(request(1, gpu=2), trials_per_device=2) == 1.0
    assert devices_held(request(3, gpu=0)) == 0.0


def test_the_two_node_example_dry_runs_as_one_job_on_two_nodes(tmp_path: Path) -> None:
    p = run_cli("run", str(ROOT / "examples" / "digits_mlp_slurm_2nodes.yaml"), "--dryrun", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    assert plan["refused"] is None, plan["refused"]
    assert "--nodes=2" in plan["request"] and "--nnodes 2 --nproc-per-node 1" in plan["request"]
