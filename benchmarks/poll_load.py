"""How hard does nasctl poll a shared Slurm cluster? Scheduler calls per minute with
2, 20 and 200 trials in flight, one experiment (`nasctl run`) or several driven by
one service (`nasctl serve`).

    PYTHONPATH=$PWD python benchmarks/poll_load.py [--trials 2,20,200] [--window 60]
        [--poll-intervals default,0.25] [--serve-experiments 4] [--unpooled] [--out benchmarks/results/poll_load]

Each Slurm command nasctl runs (sacct, squeue, sbatch, scontrol, scancel) goes
through a shim on PATH that logs it and runs the real one. For each size, trials of
benchmarks/fault_trial.py that train far longer than the measurement are all
submitted (the local cluster runs 4 at a time; the rest wait in Slurm's queue: all
are RUNNING trials to nasctl, each with a job to follow), then the calls made in
the next `--window` seconds are counted. `--poll-intervals default` is the
runner's own (Slurm: 5 s); `0.25` is the local runner's interval, which every
scheduler was polled at before per-scheduler intervals. With `--serve-experiments
E`, the same number of trials is split over E experiments driven by one `nasctl
serve`, whose experiments share one status query per poll. Needs
`scripts/slurm-local.sh up`; every job it starts is cancelled at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import args as argtypes  # noqa: E402

TRIAL = ROOT / "benchmarks" / "fault_trial.py"
COMMANDS = ("sacct", "squeue", "sbatch", "scontrol", "scancel")
PREFIX = "pollload-"


def shims(folder: Path, log: Path) -> Path:
    """A folder of scripts named after the Slurm commands: each logs `name time` and runs the real one."""
    folder.mkdir(parents=True, exist_ok=True)
    for cmd in COMMANDS:
        real = shutil.which(cmd)
        if real is None:
            raise SystemExit(f"{cmd} is not installed: start the cluster with scripts/slurm-local.sh up")
        path = folder / cmd
        path.write_text(f'#!/bin/sh\necho "{cmd} $(date +%s.%N)" >> {log}\nexec {real} "$@"\n')
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return folder


def spec(path: Path, name: str, trials: int, poll: str, comment: str | None = None) -> None:
    cfg = ('{time: "30"' + ("" if poll == "default" else f", poll_interval: {poll}")
           + (f", comment: {comment}" if comment else "") + "}")
    path.write_text(
        f"name: {name}\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize}, f2: {goal: minimize}}\n"
        f"budget: {{max_trials: {trials}, parallelism: {trials}}}\n"
        f"trial: {{script: {TRIAL}, args: {{epochs: 100, epoch_seconds: 30}}, resources: {{cpu: 1, mem_mb: 100}}}}\n"
        f"runner: {{scheduler: slurm, cfg: {cfg}}}\n"
        "optimizer: {method: sobol, seed: 0}\n")


def running(db: str, names: list[str], env: dict[str, str]) -> int:
    n = 0
    for name in names:
        p = subprocess.run([sys.executable, "-m", "nasctl", "status", name, "--db", db, "--json"],
                           capture_output=True, text=True, env=env, timeout=120)
        if p.returncode == 0:
            n += json.loads(p.stdout)["trials"].get("RUNNING", 0)
    return n


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(out: Path, trials: int, poll: str, experiments: int, window: float,
            pooled: bool = True) -> dict[str, Any]:
    tag = f"{trials}-{poll}-{experiments}{'' if pooled else '-unpooled'}".replace(".", "p")
    work = out / "runs" / tag
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = work / "calls.log"
    env = {**os.environ, "PATH": f"{shims(work / 'bin', log)}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    db = f"sqlite:///{work / 'n.db'}"
    names = [f"{PREFIX}{tag}-{k}" for k in range(experiments)]
    per = [trials // experiments + (1 if k < trials % experiments else 0) for k in range(experiments)]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        start, end = start_and_count(work, db, env, names, per, poll, trials, experiments, window, procs, pooled)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(120)
        jobs = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True).stdout.split("\n")
        ids = [line.split()[0] for line in jobs if line.strip() and line.split()[1].startswith(PREFIX)]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True)
    counts = {c: 0 for c in COMMANDS}
    for line in log.read_text().splitlines():
        cmd, _, t = line.partition(" ")
        if start <= float(t) < end:
            counts[cmd] += 1
    per_min = {c: round(n * 60.0 / (end - start), 1) for c, n in counts.items()}
    return {"trials": trials, "experiments": experiments, "poll_interval": poll, "pooled": pooled,
            "window_s": round(end - start, 1),
            "per_minute": per_min, "total_per_minute": round(sum(per_min.values()), 1)}


def start_and_count(work: Path, db: str, env: dict[str, str], names: list[str], per: list[int], poll: str,
                    trials: int, experiments: int, window: float,
                    procs: list[subprocess.Popen[bytes]], pooled: bool) -> tuple[float, float]:
    """Start the run (or the service and its experiments), wait until every trial runs,
    then wait `window` seconds; returns the window's start and end (epoch)."""
    if experiments == 1:
        spec(work / "s.yaml", names[0], trials, poll)
        procs.append(subprocess.Popen([sys.executable, "-m", "nasctl", "run", "s.yaml", "--db", db, "--json"],
                                      cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    else:
        port = free_port()
        procs.append(subprocess.Popen([sys.executable, "-m", "nasctl", "serve", "--db", db, "--port", str(port),
                                       "--workdir", str(work / "work"), "--max-experiments", str(experiments),
                                       "--token", "poll-load"],
                                      cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(5)
        for name, n in zip(names, per):
            # a `comment` of its own gives each experiment its own runner.cfg, so its own pool
            spec(work / f"{name}.yaml", name, n, poll, None if pooled else name)
            p = subprocess.run([sys.executable, "-m", "nasctl", "submit", str(work / f"{name}.yaml"), "--server",
                                f"http://127.0.0.1:{port}", "--token", "poll-load"], env=env, capture_output=True,
                               text=True, timeout=120)
            if p.returncode != 0:
                raise SystemExit(f"nasctl submit {name} failed: {p.stderr.strip()}")
    t0 = time.monotonic()
    while running(db, names, env) < trials:
        if time.monotonic() - t0 > 900:
            raise SystemExit(f"only {running(db, names, env)} of {trials} trials running after 900 s")
        time.sleep(2)
    start = time.time()
    time.sleep(window)
    return start, time.time()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=argtypes.positive_ints, default=[2, 20, 200],
                    help="trials in flight, comma-separated (default 2,20,200)")
    ap.add_argument("--window", type=argtypes.positive_float, default=60.0,
                    help="seconds counted once every trial is running (default 60)")
    ap.add_argument("--poll-intervals", default="default,0.25",
                    help="runner.cfg.poll_interval values for `nasctl run`; `default` is the runner's own; "
                         "`none` measures only the service")
    ap.add_argument("--serve-experiments", type=int, default=4,
                    help="also measure the service with the trials split over this many experiments (1 skips)")
    ap.add_argument("--unpooled", action="store_true",
                    help="also measure the service with each experiment in its own status pool (a runner.cfg "
                         "`comment` of its own), as if status queries were not shared")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "poll_load")
    a = ap.parse_args(argv)
    rows = []
    for trials in a.trials:
        for poll in [p for p in a.poll_intervals.split(",") if p != "none"]:
            rows.append(measure(a.out, trials, poll, 1, a.window))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        if a.serve_experiments > 1 and trials >= a.serve_experiments:
            for pooled in ([True, False] if a.unpooled else [True]):
                rows.append(measure(a.out, trials, "default", a.serve_experiments, a.window, pooled))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "poll_load.json").write_text(json.dumps(rows, indent=1))
    print("| trials in flight | experiments | driven by | poll interval | sacct /min | squeue /min | sbatch, scontrol,"
          " scancel /min | all /min |")
    print("|---:|---:|---|---|---:|---:|---:|---:|")
    for r in rows:
        pm = r["per_minute"]
        other = round(pm["sbatch"] + pm["scontrol"] + pm["scancel"], 1)
        by = ("nasctl run" if r["experiments"] == 1 else
              "one nasctl serve" + ("" if r.get("pooled", True) else ", a pool per experiment"))
        poll = "5 s (Slurm default)" if r["poll_interval"] == "default" else f"{r['poll_interval']} s"
        print(f"| {r['trials']} | {r['experiments']} | {by} | {poll} | {pm['sacct']:g} | {pm['squeue']:g} | {other:g} "
              f"| {r['total_per_minute']:g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
