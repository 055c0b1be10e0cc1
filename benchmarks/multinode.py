"""What a trial that spans nodes costs per epoch, against the same trial on one node.

    PYTHONPATH=$PWD python benchmarks/multinode.py [--model mlp|cnn] [--layouts 1x1,2x1,1x2] [--epochs 6] [--repeats 2]

Needs the local Slurm cluster (`scripts/slurm-local.sh up`). Each layout NxM
(N nodes x M processes per node) runs one `nasctl run` of the built-in trainer
(`--model`: the digits MLP or the MNIST-1D CNN, a fixed configuration, `batch_size`
the global batch) as a Slurm
job with `trial.resources.nodes: N` and `runner.cfg.nproc_per_node: M`, `--repeats`
times. Printed per layout: the nodes rank records name, the trainer's own training
seconds per epoch (median over repeats), the attempt's running seconds (start-up,
rendezvous, latency timing and training), steps and final val_acc.

On the local cluster both nodes are one machine, so this measures what the
rendezvous, the all-reduce of every step and the second process cost (gloo over
loopback), not a network. Figures: docs/benchmarks.md, "What does a second node
cost per epoch?".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "mlp": ("digits MLP 64-64",
            "  search_space: mlp_digits\n  args: {{epochs: {epochs}, batch_size: {batch_size}, hidden_size_1: 64, "
            "hidden_size_2: 64, learning_rate: 0.003}}"),
    "cnn": ("MNIST-1D CNN, 2 blocks of 32 channels, kernel 5",
            "  search_space: cnn\n  dataset: mnist1d\n  args: {{epochs: {epochs}, batch_size: {batch_size}, "
            "num_blocks: 2, channels_1: 32, kernel_size_1: 5, channels_2: 32, kernel_size_2: 5, "
            "learning_rate: 0.003}}"),
}

SPEC = """name: {name}
search_space:  # the first trial is the centre: dropout 0.005 in every run
  dropout: {{type: float, low: 0.0, high: 0.01}}
objectives:
  val_acc: {{goal: maximize}}
  num_params: {{goal: minimize}}
budget: {{max_trials: 1, parallelism: 1, max_failures: 0}}
trial:
{trial}
  resources: {{cpu: 1, mem_mb: 1500, nodes: {nodes}}}
runner: {{scheduler: slurm, cfg: {{poll_interval: 1, time: "20", nproc_per_node: {procs}}}}}
optimizer: {{method: sobol, initial_trials: 1, seed: 0}}
"""


def run_layout(work: Path, model: str, nodes: int, procs: int, epochs: int, batch_size: int, k: int) -> dict[str, Any]:
    name = f"mn-{model}-{nodes}x{procs}-{k}"
    spec = work / f"{name}.yaml"
    trial = MODELS[model][1].format(epochs=epochs, batch_size=batch_size)
    spec.write_text(SPEC.format(name=name, nodes=nodes, procs=procs, trial=trial))
    db = f"sqlite:///{work}/{name}.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "nasctl", "run", str(spec), "--db", db, "--json"], cwd=work, env=env,
                       capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"{name}: nasctl run failed: {p.stderr.strip()[-500:]}")
    out = subprocess.run([sys.executable, "-m", "nasctl", "trials", name, "--db", db, "--json"], cwd=work, env=env,
                         capture_output=True, text=True, check=True).stdout
    (t,) = json.loads(out)
    if t["status"] != "COMPLETED":
        raise SystemExit(f"{name}: the trial ended {t['status']}: {t.get('failure_reason')}")
    sdir = Path(t["log_dir"], "job", "ranks")
    nodes_seen = sorted({json.loads(f.read_text())["node"] for f in sdir.glob("rank-*.json")}) if sdir.is_dir() \
        else ["(one process)"]
    info = t["info"]
    return {"layout": f"{nodes}x{procs}", "nodes": nodes_seen, "world_size": info.get("world_size", 1),
            "train_s_per_epoch": info["train_seconds"] / epochs, "running_s": t["attempts"][-1]["running_s"],
            "steps": info["final_step"], "val_acc": t["values"]["val_acc"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), default="mlp")
    p.add_argument("--layouts", default="1x1,2x1,1x2", help="NxM: N nodes x M processes per node")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=32, help="the global batch")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    layouts = [tuple(int(x) for x in item.split("x")) for item in args.layouts.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="nasctl-multinode-") as tmp:
        for nodes, procs in layouts:
            runs = [run_layout(Path(tmp), args.model, nodes, procs, args.epochs, args.batch_size, k)
                    for k in range(args.repeats)]
            row = {**runs[0], "train_s_per_epoch": statistics.median(r["train_s_per_epoch"] for r in runs),
                   "running_s": statistics.median(r["running_s"] for r in runs),
                   "val_acc": statistics.median(r["val_acc"] for r in runs), "repeats": len(runs)}
            rows.append(row)
    base = rows[0]["train_s_per_epoch"]
    print(f"{MODELS[args.model][0]}, {args.epochs} epochs, global batch {args.batch_size}, median of {args.repeats}")
    print("| layout | ranks on | train s/epoch | vs first | attempt running s | steps | val_acc |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['layout']} | {', '.join(r['nodes'])} | {r['train_s_per_epoch']:.2f} | "
              f"{r['train_s_per_epoch'] / base:.2f}x | {r['running_s']:.1f} | {r['steps']} | {r['val_acc']:.3f} |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
