"""The GPU check: a small real NAS with the built-in CNN space on this machine's GPUs.

    python scripts/gpu_check.py [--trials 6] [--out gpu_check.json]

For each precision in fp32, bf16 and fp16 it runs one experiment (MNIST-1D CNN,
`--trials` trials, one trial per device at a time), then fp32 again with two
trials sharing each device (`runner.cfg.trials_per_device: 2`), then fp32 with
multi-fidelity search (`optimizer.fidelity`, rungs 1 and 3 epochs: promoted
trials resume the checkpoints their sources wrote on the GPU), each on its own
SQLite database in a temporary folder (`--runs` picks some of them). It prints one row per run: GPU model,
precision, sharing, median latency_ms, best val_acc, peak GPU memory of a
trial, trials per minute, and whether every trial got a device of its own
(no device ever held by more trials than allowed). Exit 1 when a run fails or
no CUDA GPU is found. `make gpu-check` runs the GPU tests first, then this.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SPACE = """
name: {name}
search_space:
  num_blocks:       {{type: int, low: 1, high: 3}}
  channels_1:       {{type: int, low: 8, high: 64, log: true}}
  kernel_size_1:    {{type: choice, values: [3, 5, 7], ordered: true}}
  channels_2:       {{type: int, low: 8, high: 64, log: true, when: {{num_blocks: [2, 3]}}}}
  kernel_size_2:    {{type: choice, values: [3, 5, 7], ordered: true, when: {{num_blocks: [2, 3]}}}}
  channels_3:       {{type: int, low: 8, high: 64, log: true, when: {{num_blocks: [3]}}}}
  kernel_size_3:    {{type: choice, values: [3, 5, 7], ordered: true, when: {{num_blocks: [3]}}}}
  pooling:          {{type: choice, values: [max, avg]}}
  classifier_width: {{type: int, low: 16, high: 128, log: true}}
  learning_rate:    {{type: float, low: 1.0e-3, high: 2.0e-2, log: true}}
  precision:        {{type: fixed, value: {precision}}}
  batch_size:       {{type: fixed, value: 64}}
{epochs}objectives:
  val_acc:    {{goal: maximize, threshold: 0.30}}
  latency_ms: {{goal: minimize}}
budget: {{max_trials: {trials}, parallelism: {parallelism}, trial_timeout: 900, max_failures: 1}}
trial:
  search_space: cnn
  dataset: mnist1d
  resources: {{cpu: 1, mem_mb: 4000, gpu: 1}}
runner: {{scheduler: local_cwd, cfg: {{trials_per_device: {per_device}}}}}
optimizer: {{initial_trials: {trials}, method: sobol, seed: 0{fidelity}}}
"""
RUNS = {"fp32": ("fp32", 1, False), "bf16": ("bf16", 1, False), "fp16": ("fp16", 1, False),
        "fp32-x2": ("fp32", 2, False), "fp32-mf": ("fp32", 1, True)}
"""name -> (precision, trials per device, multi-fidelity)"""


def gpu_names() -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def max_overlap(trials: list[dict[str, Any]]) -> int:
    """The most trials that held one device at the same moment."""
    points = []
    for t in trials:
        if t["started_at"] and t["ended_at"]:
            for d in t["devices"] or []:
                points += [(t["started_at"], 1, d), (t["ended_at"], -1, d)]
    held: dict[str, int] = {}
    worst = 0
    for _, delta, d in sorted(points, key=lambda p: (p[0], p[1])):
        held[d] = held.get(d, 0) + delta
        worst = max(worst, held[d])
    return worst


def run_one(work: Path, precision: str, per_device: int, trials: int, n_gpus: int,
            multi_fidelity: bool = False) -> dict[str, Any]:
    name = f"gpu-{precision}-x{per_device}" + ("-mf" if multi_fidelity else "")
    spec = work / f"{name}.yaml"
    spec.write_text(SPACE.format(
        name=name, precision=precision, trials=trials, parallelism=n_gpus * per_device, per_device=per_device,
        epochs="" if multi_fidelity else "  epochs:           {type: fixed, value: 3}\n",
        fidelity=", fidelity: {parameter: epochs, min: 1, max: 3, eta: 3}" if multi_fidelity else ""))
    db = f"sqlite:///{work / (name + '.db')}"
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "nasctl", "run", str(spec), "--db", db, "--workdir",
                          str(work / "runs"), "--json"], capture_output=True, text=True, cwd=work)
    elapsed = time.monotonic() - t0
    out = subprocess.run([sys.executable, "-m", "nasctl", "trials", name, "--db", db, "--json"],
                         capture_output=True, text=True)
    rows = json.loads(out.stdout) if out.returncode == 0 else []
    done = [r for r in rows if r["status"] == "COMPLETED"]
    infos = [r["info"] or {} for r in done]
    starts = [r["started_at"] for r in rows if r["started_at"]]
    ends = [r["ended_at"] for r in rows if r["ended_at"]]
    from datetime import datetime

    def ts(s: str) -> float:
        return datetime.fromisoformat(s.rstrip("Z")).timestamp()

    span = (max(map(ts, ends)) - min(map(ts, starts))) if starts and ends else elapsed
    failures = []
    for r in rows:
        if r["status"] == "FAILED":  # the trial's own last words (its stored log tail)
            one = subprocess.run([sys.executable, "-m", "nasctl", "trials", name, "--db", db, "--trial",
                                  str(r["index"]), "--json"], capture_output=True, text=True)
            tail = (json.loads(one.stdout).get("log_tail") or "") if one.returncode == 0 else one.stderr
            failures.append(f"trial {r['index']}: {r['failure_reason']}\n{tail.strip()[-1500:]}")
    return {
        "run": name, "returncode": run.returncode, "stderr": run.stderr[-2000:] if run.returncode else "",
        "failed_trials": failures,
        "precision": precision, "trials_per_device": per_device, "completed": len(done), "trials": len(rows),
        "latency_ms": statistics.median(r["values"]["latency_ms"] for r in done) if done else None,
        "val_acc": max(r["values"]["val_acc"] for r in done) if done else None,
        "peak_memory_mb": max((i.get("peak_memory_mb") or 0) for i in infos) if infos else None,
        "devices_seen": sorted({d for r in rows for d in (r["devices"] or [])}),
        "trial_device": sorted({i.get("device", "?") for i in infos}),
        "trials_per_minute": round(len(done) / span * 60, 2) if span > 0 else None,
        "max_trials_on_one_device": max_overlap(rows),
        "promoted": sum(r["promoted_from"] is not None for r in rows),
        "resumed": sum(bool(i.get("resumed_from")) for i in infos),
        "wall_s": round(elapsed, 1),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=6)
    p.add_argument("--out", default="gpu_check.json")
    p.add_argument("--runs", default=",".join(RUNS), help=f"some of {', '.join(RUNS)}")
    args = p.parse_args()
    runs = [r for r in args.runs.split(",") if r]
    for r in runs:
        if r not in RUNS:
            p.error(f"--runs: unknown run {r!r}; use some of {', '.join(RUNS)}")
    names = gpu_names()
    if not names:
        print("gpu-check: no NVIDIA GPU found (nvidia-smi); nothing to check", file=sys.stderr)
        return 1
    results = []
    with tempfile.TemporaryDirectory(prefix="nasctl-gpu-check-") as tmp:
        for run in runs:
            precision, per_device, mf = RUNS[run]
            res = run_one(Path(tmp), precision, per_device, args.trials, len(names), mf)
            results.append(res)
            print(json.dumps(res), flush=True)
            # after every run, so a check stopped part way keeps the runs it finished
            Path(args.out).write_text(json.dumps({"gpus": names, "results": results}, indent=1))
    header = (f"{'GPU':<28} {'precision':<9} {'per dev':>7} {'latency_ms':>10} {'val_acc':>7} "
              f"{'peak MB':>8} {'trials/min':>10} {'max/dev':>7} {'done':>5} {'promoted':>8} {'resumed':>7}")
    print(f"\n{len(names)} GPU(s): {', '.join(names)}\n{header}")
    for r in results:
        def f(v: Any, fmt: str) -> str:
            return format(v, fmt) if isinstance(v, (int, float)) else "-"
        print(f"{names[0][:28]:<28} {r['precision']:<9} {r['trials_per_device']:>7} {f(r['latency_ms'], '.4f'):>10} "
              f"{f(r['val_acc'], '.3f'):>7} {f(r['peak_memory_mb'], '.1f'):>8} {f(r['trials_per_minute'], '.2f'):>10} "
              f"{r['max_trials_on_one_device']:>7} {r['completed']:>2}/{r['trials']} {r['promoted']:>8} {r['resumed']:>7}")
    ok = all(r["returncode"] == 0 and r["completed"] == r["trials"] == args.trials
             and r["max_trials_on_one_device"] <= r["trials_per_device"]
             and (not r["run"].endswith("-mf") or r["resumed"] == r["promoted"] > 0) for r in results)
    for r in results:
        if r["returncode"] or r["failed_trials"]:
            print(f"{r['run']} failed:\n{r['stderr']}", *r["failed_trials"], sep="\n", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
