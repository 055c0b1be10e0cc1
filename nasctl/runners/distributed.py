"""Data-parallel trials: N nodes x M processes under torch.distributed.run, as TorchX's dist.ddp.

A trial with `runner.cfg.nproc_per_node: M` runs M processes on one node
(`torch.distributed.run --standalone`); with `trial.resources.nodes: N` as well
it spans N nodes. The scheduler starts one task per node (Slurm: `--nodes N`,
one task per node; Kubernetes: N replicas of the trial's role), each running
`nasctl.runners.launcher`, which starts `torch.distributed.run` on its node with
the node's rank and the rendezvous on the first node (`multi_node_command`):

- node rank: Slurm's `SLURM_NODEID`, or the replica id TorchX gives (`--node-rank`);
- rendezvous host: the first host of Slurm's allocation (`scontrol show hostnames`),
  or the one TorchX names in the environment variable it passes (`--rank0-env`);
- rendezvous port: `MASTER_PORT` where the environment sets one; else derived from
  the Slurm job id (`rendezvous_port`), so two trials whose first node is the same
  do not meet; a fixed one on Kubernetes, where each pod has its own address.

Every process runs the trial's command under this module's `rank` wrapper
(`python -m nasctl.runners.distributed --state-dir ... -- COMMAND`), which

- keeps the trial contract for rank 0 and moves the others aside: a rank r > 0
  gets `NASCTL_LOG_DIR=<log dir>/ranks/<r>` and a checkpoint folder under it, so
  that a script that writes TensorBoard files or checkpoints from every rank does
  not add its copies to rank 0's (the metric reader skips `ranks/`, see
  `RANKS_DIR`), and `NASCTL_RESUME_FROM` stays the one checkpoint every rank loads;
- records, in the attempt's state folder, `ranks/rank-<r>.json`: the rank, its
  node, pid, devices, start, and at its end its exit code or signal. The runner
  names the first rank that failed on its own (nasctl.runners.outcome.first_failure) as the reason of
  a failed multi-node job: the ranks that fail after it do so because it did.

Devices follow torch.distributed.run's convention (docs/gpu.md): the processes of
a node see the node's devices (`CUDA_VISIBLE_DEVICES` as the scheduler set it), and
the one with `LOCAL_RANK` r uses its r-th share.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from nasctl.metrics.tensorboard import RANKS_DIR

# RANKS_DIR: under NASCTL_LOG_DIR, where ranks other than 0 write (`ranks/<rank>`);
# under an attempt's state folder, the rank records (`ranks/rank-<rank>.json`)
LOG_DIR_ENV, CHECKPOINT_DIR_ENV = "NASCTL_LOG_DIR", "NASCTL_CHECKPOINT_DIR"
K8S_PORT = 29500
PORT_BASE, PORT_SPAN = 20000, 20000
"""Slurm rendezvous ports: PORT_BASE + job id mod PORT_SPAN."""


def ranks_command(command: Sequence[str], state_dir: str) -> list[str]:
    """What torch.distributed.run starts in each process: the rank wrapper around `command`
    (arguments for `torch.distributed.run ... -m`)."""
    return ["-m", "nasctl.runners.distributed", "--state-dir", state_dir, "--", *command]


def single_node_command(command: Sequence[str], nproc_per_node: int, state_dir: str) -> list[str]:
    """`command` run by `nproc_per_node` processes on one node (TorchX's dist.ddp); as is for 1."""
    if nproc_per_node <= 1:
        return list(command)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc_per_node", str(nproc_per_node), *ranks_command(command, state_dir)]


def multi_node_command(command: Sequence[str], nnodes: int, nproc_per_node: int, node_rank: int,
                       master: tuple[str, int], state_dir: str) -> list[str]:
    """The command that node `node_rank` of `nnodes` runs: torch.distributed.run with the
    static rendezvous at `master` (host, port) on node 0."""
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--node_rank", str(node_rank),
            "--nproc_per_node", str(nproc_per_node), "--master_addr", master[0], "--master_port", str(master[1]),
            *ranks_command(command, state_dir)]


def rendezvous_port(job_id: str | None) -> int:
    """The rendezvous port of a Slurm job (PORT_BASE + id mod PORT_SPAN), K8S_PORT without an id."""
    return PORT_BASE + int(job_id) % PORT_SPAN if job_id and job_id.isdigit() else K8S_PORT


def slurm_first_host(env: Mapping[str, str]) -> str | None:
    """The first host of the Slurm job's allocation (where node 0 runs), None outside Slurm."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        return None
    try:
        p = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=30)
        hosts = p.stdout.split() if p.returncode == 0 else []
    except (OSError, subprocess.SubprocessError):
        hosts = []
    return hosts[0] if hosts else env.get("SLURM_LAUNCH_NODE_IPADDR")


def node_placement(env: Mapping[str, str], node_rank: int | None, rank0_env: str | None) -> tuple[int, str, int]:
    """This node's rank, the rendezvous host and port, from the arguments TorchX filled in
    (Kubernetes) or Slurm's environment.

    Raises:
        RuntimeError: neither says (the launcher was not started by a scheduler that
            places nodes); the message says what is missing.
    """
    if node_rank is None:
        nodeid = env.get("SLURM_NODEID")
        if nodeid is None or not nodeid.isdigit():
            raise RuntimeError("a multi-node trial needs its node rank: SLURM_NODEID is not set and no --node-rank "
                               "was given")
        node_rank = int(nodeid)
    host = env.get(rank0_env) if rank0_env else slurm_first_host(env)
    if not host:
        raise RuntimeError(f"a multi-node trial needs the first node's address: {rank0_env or 'SLURM_JOB_NODELIST'} "
                           "is not set")
    given = env.get("MASTER_PORT", "")
    port = int(given) if given.isdigit() else rendezvous_port(env.get("SLURM_JOB_ID") if not rank0_env else None)
    return node_rank, host.split(",")[0], port


def node_name(env: Mapping[str, str]) -> str:
    """The node a process runs on: Slurm's name for it, else the host name."""
    return env.get("SLURMD_NODENAME") or socket.gethostname()


def rank_env(env: Mapping[str, str], rank: int) -> dict[str, str]:
    """The trial contract's environment for one rank: rank 0's unchanged; a rank r > 0 logs
    and checkpoints under `<log dir>/ranks/<r>`, aside from what nasctl reads."""
    out = dict(env)
    if rank > 0 and env.get(LOG_DIR_ENV):
        aside = os.path.join(env[LOG_DIR_ENV], RANKS_DIR, str(rank))
        out[LOG_DIR_ENV] = aside
        if env.get(CHECKPOINT_DIR_ENV):
            out[CHECKPOINT_DIR_ENV] = os.path.join(aside, "checkpoints")
    return out


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def rank_records(state_dir: str) -> list[dict[str, Any]]:
    """The rank records of one attempt, by rank."""
    records = []
    for path in glob.glob(os.path.join(state_dir, RANKS_DIR, "rank-*.json")):
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("rank"), int):
            records.append(data)
    return sorted(records, key=lambda r: r["rank"])


def _signame(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def main(argv: list[str] | None = None) -> int:
    """The rank wrapper: run the command as this rank, record its start and end."""
    p = argparse.ArgumentParser(prog="nasctl.runners.distributed")
    p.add_argument("--state-dir", required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        p.error("no command given after --")
    rank = int(os.environ.get("RANK", "0"))
    folder = os.path.join(args.state_dir, RANKS_DIR)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"rank-{rank}.json")
    env = rank_env(os.environ, rank)
    if rank > 0 and env.get(LOG_DIR_ENV):
        os.makedirs(env[LOG_DIR_ENV], exist_ok=True)
    record: dict[str, Any] = {
        "rank": rank, "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
        "world_size": int(os.environ.get("WORLD_SIZE", "1")), "node": node_name(os.environ),
        "host": socket.gethostname(), "pid": os.getpid(), "devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "log_dir": env.get(LOG_DIR_ENV), "started": time.time(),
    }
    _write(path, record)
    # torch.distributed.run ends a worker by signalling its process group, and Slurm
    # signals every process of its step: the command gets each stop signal itself.
    # The wrapper outlives it to record its end (warnings stay ignored, as the
    # launcher started the node's processes: a command that wants them installs handlers).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _signum, _frame: None)
    child = subprocess.Popen(cmd, env=env)
    rc = child.wait()
    record.update(returncode=rc, ended=time.time())
    if rc < 0:
        record["signal"] = _signame(-rc)
    _write(path, record)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main())
