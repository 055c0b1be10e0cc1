"""Trials that span the two nodes of the real local Slurm cluster: the built-in trainer
as 2 nodes x 1 process with gloo (its ranks on node1 and node2, its metrics those of a
one-process run of the same configuration), node2 set down under a running trial (the
attempt ends infrastructure, the next one resumes its checkpoint, nothing is left
running or queued), and a rank that crashes (the trial fails `user`, its reason
naming the rank)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from nasctl.metrics.tensorboard import read_scalars
from nasctl.types import TrialRecord, TrialStatus
from tests.cluster import require_slurm
from tests.conftest import run_cli
from tests.helpers.cli import start
from tests.helpers.slurm import SCRIPTS, scancel_experiment, slurm_states, trials, wait_until

pytestmark = pytest.mark.e2e

TRAINER_SPEC = """name: {name}
search_space:
  hidden_size_1: {{type: int, low: 16, high: 64}}
  hidden_size_2: {{type: int, low: 16, high: 64}}
  learning_rate: {{type: float, low: 1.0e-3, high: 1.0e-2, log: true}}
objectives:
  val_acc: {{goal: maximize}}
  num_params: {{goal: minimize}}
budget: {{max_trials: 1, parallelism: 1, max_failures: 1}}
trial:
  search_space: mlp_digits
  args: {{epochs: {epochs}, batch_size: {batch_size}, dropout: 0.0}}
  resources: {{cpu: 1, mem_mb: 1000, nodes: 2}}
runner: {{scheduler: slurm, cfg: {{poll_interval: 1, time: "15"}}}}
optimizer: {{method: sobol, initial_trials: 1, seed: 0}}
"""


@pytest.fixture(autouse=True)
def _cluster() -> Iterator[None]:
    require_slurm()
    yield
    # a test that set node2 down gives it back, whatever happened
    subprocess.run(["scontrol", "update", "nodename=node2", "state=resume"], capture_output=True)


def spec(tmp_path: Path, name: str, epochs: int, batch_size: int) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(TRAINER_SPEC.format(name=name, epochs=epochs, batch_size=batch_size))
    return path


def ranks(sdir: str) -> dict[int, dict[str, object]]:
    return {r["rank"]: r for r in (json.loads(p.read_text()) for p in Path(sdir, "ranks").glob("rank-*.json"))}


def left_running(trial_dir: str) -> list[str]:
    """Processes whose command line names the trial's folder (a rank, a launcher, torchrun)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if trial_dir in cmd:
            found.append(f"{p.pid}: {cmd[:200]}")
    return found


def test_a_two_node_trial_trains_on_both_nodes_as_one_run_would(tmp_path: Path) -> None:
    name, db = "slurm-2x1", f"sqlite:///{tmp_path}/m.db"
    path = spec(tmp_path, name, epochs=3, batch_size=64)
    try:
        plan = run_cli("run", str(path), "--db", db, "--dryrun", "--json", cwd=tmp_path)
        assert plan.returncode == 0, plan.stderr
        script = json.loads(plan.stdout)["request"]
        assert "--nodes=2" in script and "--no-requeue" in script and "--nnodes 2 --nproc-per-node 1" in script
        result = run_cli("run", str(path), "--db", db, "--json", cwd=tmp_path, timeout=400)
        assert result.returncode == 0, result.stderr
        (t,) = trials(db, name)
        assert t.status == TrialStatus.COMPLETED, (t.failure_reason, t.log_tail)
        by_rank = ranks(t.runner_metadata["state_dir"])
        assert sorted(by_rank) == [0, 1] and {by_rank[0]["node"], by_rank[1]["node"]} == {"node1", "node2"}
        assert all(r["returncode"] == 0 and r["world_size"] == 2 for r in by_rank.values())
        assert by_rank[0]["node"] == "node1"  # node 0 of the allocation holds rank 0 and the rendezvous
        assert t.info is not None and t.info["final_step"] > 0
        # the reference: the same configuration trained by one process here
        ref_dir = tmp_path / "reference"
        args = [a for k, v in {**t.parameters, "epochs": 3, "batch_size": 64, "dropout": 0.0}.items()
                for a in (f"--{k}", repr(v) if isinstance(v, float) else str(v))]
        ref = subprocess.run([sys.executable, "-m", "nasctl.search_spaces.mlp", *args],
                             env={**os.environ, "NASCTL_LOG_DIR": str(ref_dir), "OMP_NUM_THREADS": "1"},
                             capture_output=True, text=True, timeout=300)
        assert ref.returncode == 0, ref.stderr
        final = {o.metric: o.value for o in read_scalars(ref_dir)}
        assert t.values["num_params"] == final["num_params"]
        # the same global batch and steps; only the data order and the float sums differ
        assert abs(t.values["val_acc"] - final["val_acc"]) < 0.1, (t.values, final)
        assert t.info["final_step"] == json.loads((ref_dir / "trial_info.json").read_text())["final_step"]
        aside = Path(str(by_rank[1]["log_dir"]))
        assert aside == Path(str(by_rank[0]["log_dir"]), "ranks", "1") and aside.is_dir()
        assert not list(aside.rglob("*tfevents*"))  # rank 1 logged nothing: Lightning logs from rank 0
    finally:
        scancel_experiment(db, name)


def test_a_node_lost_under_a_two_node_trial_ends_the_attempt_and_the_next_resumes(tmp_path: Path) -> None:
    name, db = "slurm-2x1-down", f"sqlite:///{tmp_path}/d.db"
    path = spec(tmp_path, name, epochs=12, batch_size=16)
    proc = start(["run", str(path), "--db", db, "--json"], tmp_path, {})
    try:
        def checkpointed() -> TrialRecord | None:
            (t,) = trials(db, name, [TrialStatus.RUNNING])
            sdir = t.runner_metadata.get("state_dir")
            done = Path(t.log_dir or "", "checkpoints", "last.ckpt")  # log_dir: the trial's folder
            return t if sdir and len(ranks(sdir)) == 2 and done.is_file() else None

        t = wait_until("the trial running on both nodes with a checkpoint", checkpointed, 240, proc)
        trial_dir = str(Path(t.runner_metadata["state_dir"]).parent)
        subprocess.run(["scontrol", "update", "nodename=node2", "state=down", "reason=nasctl-test"], check=True,
                       capture_output=True)
        wait_until("the first attempt to end", lambda: len(trials(db, name)[0].attempts) >= 2, 120, proc)
        subprocess.run(["scontrol", "update", "nodename=node2", "state=resume"], capture_output=True)
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        (t,) = trials(db, name)
        assert t.status == TrialStatus.COMPLETED, (t.failure_reason, t.log_tail)
        first, *rest = t.attempts
        assert first["failure_class"] == "infrastructure", first
        assert rest and rest[-1]["failure_class"] is None, t.attempts
        assert t.info is not None and t.info.get("resumed_from"), t.info
        assert t.info["resumed_at_epoch"] >= 1, t.info
        assert slurm_states([t])[0] == "COMPLETED"
        queued = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True).stdout
        assert name not in queued, queued  # no half job of the first attempt waits in the queue
        wait_until("no process of the trial left", lambda: not left_running(trial_dir), 30)
    finally:
        if proc.poll() is None:
            proc.kill()
        scancel_experiment(db, name)


def test_a_rank_that_crashes_fails_the_trial_as_user_and_is_named(tmp_path: Path) -> None:
    name, db = "slurm-2x1-crash", f"sqlite:///{tmp_path}/c.db"
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize}, f2: {goal: minimize}}\n"
        "budget: {max_trials: 1, parallelism: 1, max_failures: 1}\n"
        f"trial: {{script: {SCRIPTS / 'ddp_trial.py'}, args: {{crash_rank: 1}}, "
        "resources: {cpu: 1, mem_mb: 500, nodes: 2}}\n"
        "runner: {scheduler: slurm, cfg: {poll_interval: 1, time: '5'}}\n"
        "optimizer: {method: sobol, initial_trials: 1, seed: 3}\n")
    try:
        result = run_cli("run", str(path), "--db", db, "--json", cwd=tmp_path, timeout=300)
        (t,) = trials(db, name)
        assert t.status == TrialStatus.FAILED and t.failure_class == "user", (t.failure_reason, t.attempts)
        assert "rank 1 (node2) exited with code 3" in (t.failure_reason or ""), t.failure_reason
        assert len(t.attempts) == 1  # the trial's own failure is never retried
        assert result.returncode in (0, 1)
        wait_until("no process of the trial left",
                   lambda: not left_running(str(Path(t.runner_metadata["state_dir"]).parent)), 30)
    finally:
        scancel_experiment(db, name)
