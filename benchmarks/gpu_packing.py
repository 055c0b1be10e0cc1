"""GPU packing: how fully nasctl keeps a node's devices busy, without GPUs.

    python benchmarks/gpu_packing.py [--devices 8] [--trials 200] [--out FILE]

A simulated node of `--devices` devices (a fake inventory, NASCTL_DEVICES),
two experiments driven at once by two `nasctl run` processes on one SQLite
database: `one-gpu` (gpu: 1, parallelism = devices) and `two-gpus` (gpu: 2,
parallelism = devices / 2), together `--trials` trials, so work is always
queued. Each trial holds its devices for a random 3-9 s (the trial script of
tests/e2e/scripts/device_trial.py, which records its CUDA_VISIBLE_DEVICES and
its start and end). One orchestrator is killed with SIGKILL mid-run (right
after submitting its 40th trial, before recording it) and resumed 2 s later.

Printed, before the kill, after the resume and overall:
- busy (held): device-seconds between a trial's submission and its recorded
  end (what its leases hold) / (devices x interval);
- busy (trial): device-seconds the trial processes themselves ran;
- overlaps: moments a device was held by two trials (must be 0);
- mean wait: seconds from a candidate being recorded to its submission.
The intervals end when the last trial was submitted (after that no work is
queued and the node drains).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.args import positive_int  # noqa: E402
from nasctl.store import Store  # noqa: E402

SCRIPT = ROOT / "tests" / "e2e" / "scripts" / "device_trial.py"


def spec(path: Path, name: str, gpu: int, trials: int, parallelism: int) -> Path:
    path.write_text(
        f"name: {name}\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize, threshold: 1.1}, f2: {goal: minimize, threshold: 2.1}}\n"
        f"budget: {{max_trials: {trials}, parallelism: {parallelism}, max_failures: 0}}\n"
        f"trial: {{script: {SCRIPT}, resources: {{gpu: {gpu}}}}}\n"
        f"optimizer: {{method: sobol, seed: {gpu}}}\n"
    )
    return path


def ts(when: datetime) -> float:
    """Epoch seconds of a stored (naive UTC) time."""
    return when.replace(tzinfo=timezone.utc).timestamp()


def busy(intervals: list[tuple[float, float, int]], lo: float, hi: float, devices: int) -> float:
    used = sum(max(0.0, min(e, hi) - max(s, lo)) * n for s, e, n in intervals)
    return used / (devices * (hi - lo)) if hi > lo else float("nan")


def overlaps(recs: list[dict[str, Any]]) -> int:
    points = []
    for r in recs:
        for d in r["visible"].split(","):
            points += [(r["start"], 1, d), (r["end"], -1, d)]
    held: dict[str, int] = {}
    bad = 0
    for _, delta, d in sorted(points, key=lambda p: (p[0], p[1])):
        held[d] = held.get(d, 0) + delta
        bad += held[d] > 1
    return bad


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=positive_int, default=8)
    p.add_argument("--trials", type=positive_int, default=200)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_packing.json"))
    args = p.parse_args()
    if args.devices < 2:
        p.error("--devices must be at least 2 (one experiment asks for 2 per trial)")
    with tempfile.TemporaryDirectory(prefix="nasctl-gpu-packing-") as tmp:
        work = Path(tmp)
        db = f"sqlite:///{work / 'n.db'}"
        log = work / "devices.jsonl"
        env = {**os.environ, "NASCTL_DEVICES": ",".join(map(str, range(args.devices))),
               "NASCTL_TEST_DEVICES": str(log), "NASCTL_TEST_SLEEP": "3", "NASCTL_TEST_SCALE": "6"}
        n1 = args.trials * 3 // 5
        a = spec(work / "a.yaml", "one-gpu", 1, n1, args.devices)
        b = spec(work / "b.yaml", "two-gpus", 2, args.trials - n1, args.devices // 2)

        def start(cmd: list[str], extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
            return subprocess.Popen([sys.executable, "-m", "nasctl", *cmd, "--db", db, "--json"], cwd=work,
                                    env={**env, **(extra or {})}, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)

        pa = start(["run", str(a)], {"NASCTL_FAILPOINTS": "after_submit:40"})
        time.sleep(2.0)
        pb = start(["run", str(b)])
        pa.communicate()
        killed_at = time.time()
        if pa.returncode != -signal.SIGKILL:
            print(f"one-gpu was expected to die at its failpoint; exit {pa.returncode}", file=sys.stderr)
            return 1
        time.sleep(2.0)
        resumed_at = time.time()
        pr = start(["resume", "one-gpu"])
        failed = []
        for name, proc in (("two-gpus", pb), ("one-gpu", pr)):
            out, err = proc.communicate()
            if proc.returncode != 0:
                failed.append(f"{name}: exit {proc.returncode}: {err[-500:]}")
        store = Store(db)
        rows = {name: store.list_trials(store.get_experiment(name).id) for name in ("one-gpu", "two-gpus")}
        store.close()
        recs = [json.loads(line) for line in log.read_text().splitlines()]
    if failed:
        print("\n".join(failed), file=sys.stderr)
        return 1
    all_rows = [r for rs in rows.values() for r in rs]
    held = [(ts(r.started_at), ts(r.ended_at), len(r.devices or [])) for r in all_rows if r.started_at and r.ended_at]
    ran = [(r["start"], r["end"], len(r["visible"].split(","))) for r in recs]
    t0 = min(s for s, _, _ in held)
    last_submit = max(s for s, _, _ in held)
    end = max(e for _, e, _ in held)
    waits = {name: [ts(r.started_at) - ts(r.created_at) for r in rs if r.started_at] for name, rs in rows.items()}
    windows = {"before the kill": (t0, killed_at), "after the resume": (resumed_at, last_submit),
               "while work is queued": (t0, last_submit), "whole run (incl. drain)": (t0, end)}
    table = []
    print(f"{args.devices} devices, {len(all_rows)} trials ({len(rows['one-gpu'])} x gpu:1, "
          f"{len(rows['two-gpus'])} x gpu:2), kill -9 of one-gpu at {killed_at - t0:.0f}s, resumed at "
          f"{resumed_at - t0:.0f}s, makespan {end - t0:.0f}s\n")
    print("| interval | seconds | busy (held) | busy (trial) |")
    print("|---|---:|---:|---:|")
    for label, (lo, hi) in windows.items():
        row = {"interval": label, "seconds": round(hi - lo, 1), "busy_held": busy(held, lo, hi, args.devices),
               "busy_trial": busy(ran, lo, hi, args.devices)}
        table.append(row)
        print(f"| {label} | {row['seconds']:.0f} | {row['busy_held']:.1%} | {row['busy_trial']:.1%} |")
    n_over = overlaps(recs)
    runs = {name: sum(1 for r in recs if r["experiment"] == name) for name in rows}
    for name, w in waits.items():
        print(f"mean wait of {name}: {sum(w) / len(w):.2f}s (candidate recorded -> submitted; max {max(w):.1f}s)")
    print(f"\noverlaps: {n_over}; trial processes started: {runs} (each trial once: "
          f"{all(runs[n] == len(rows[n]) for n in rows)})")
    Path(args.out).write_text(json.dumps({"devices": args.devices, "windows": table, "overlaps": n_over,
                                          "runs": runs, "mean_wait_s": {n: sum(w) / len(w) for n, w in waits.items()},
                                          "killed_at": killed_at - t0,
                                          "resumed_at": resumed_at - t0}, indent=1))
    return 0 if n_over == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
