"""Faults on a real Slurm cluster: does a trial hit by a fault finish, without
training again what it had done, running twice, leaving jobs behind or needing
a person?

    PYTHONPATH=$PWD python benchmarks/faults.py [--faults requeue,node-down,time-limit,scancel,sigkill,daemons-down,ctld-queued]
        [--repeats 3] [--epochs 8] [--epoch-seconds 3] [--out benchmarks/results/faults]

Each fault, `--repeats` times, on a fresh experiment (its own SQLite database and
trial folders under `--out`/runs/): 2 trials, parallelism 2, of
benchmarks/fault_trial.py, which sleeps `--epochs` epochs of `--epoch-seconds`
and saves `last.ckpt` after each. `nasctl run --json` drives it; once a trial's
checkpoint says one epoch is done, the fault is made half an epoch later (so it
lands inside an epoch) and the run is waited for:

- requeue: `scontrol requeue` of that trial's running Slurm job;
- node-down: `scontrol update nodename=N state=down reason=faults` of the node
  it runs on, `state=resume` 5 s later if the node is not back by itself;
- time-limit: no outside action: `runner.cfg: {time: "1", signal: USR1@30}` and
  trials of `--time-limit-seconds` (default 100) of work, so no trial can finish
  inside one allocation; `trial.retry_on: [infrastructure, timeout]`;
- scancel: `scancel` of that trial's job by hand (class cancelled: not retried
  by default, so that trial is expected not to complete);
- sigkill: SIGKILL of the trial's training process on the local runner;
- daemons-down: slurmctld and slurmdbd stopped (scripts/slurm-local.sh stop) for
  45 s, then started again (`up`): nobody can be asked about the running jobs;
- ctld-queued: slurmctld stopped 30 s from before `nasctl run` starts, so every
  submission fails until it is back: the candidates must wait, not fail.

Slurm holds a requeued job about two minutes (BeginTime) before it runs again;
the harness releases every job of the experiment held that way for 3 s
(`scontrol update jobid=N StartTime=now`), as a busy cluster's scheduler would
start it whenever it could.

Measured per run, from the store, `nasctl trials --json`, squeue and the trials'
TensorBoard files (one event file per run of a trial process): trials completed
of the budget; hits (runs of a trial process that ended unfinished); attempts
and Slurm restarts; training repeated per hit (completed epochs trained again,
times the epoch length, plus the part of the epoch in progress when the run
ended; target at most one epoch, the checkpoint interval); training discarded
(epochs of trials that did not complete); duplicates (parameter sets run as two
trials) and trial runs that overlapped in time; orphan jobs (the experiment's
jobs squeue still lists 5 s after `nasctl run` ended, COMPLETING aside; on the
local runner, its launcher and training processes still alive then); manual
actions (`nasctl resume` the harness had to run because the run hung or ended
with trials unfinished; target 0).

Before each Slurm run the harness waits (every 10 s, up to 10 min) until squeue
lists no job that is not one of this command's, and both nodes are up. After
each run it cancels the experiment's leftover jobs and resumes any node it set
down. Prints a markdown table (min/median/max over repeats where they differ)
and writes every run to `--out`/faults.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import args as argtypes  # noqa: E402

TRIAL = ROOT / "benchmarks" / "fault_trial.py"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "faults"
PREFIX = "faults-"  # every experiment (and so every Slurm job) this command makes
BUDGET = 2
QUIET_WAIT_S, QUIET_POLL_S = 600.0, 10.0
HOLD_RELEASE_S = 3.0  # the requeued job's old credential must have expired (one-second resolution)
NODE_DOWN_S = 5.0
ORPHAN_GRACE_S = 5.0
MAX_RESUMES = 2


@dataclass(frozen=True)
class Fault:
    name: str
    scheduler: str
    what: str
    retry_on: tuple[str, ...] = ("infrastructure",)
    completes: bool = True  # whether every trial is expected to complete
    stop: tuple[str, ...] = ()  # Slurm daemons stopped (scripts/slurm-local.sh stop) for `outage_s`
    outage_s: float = 0.0
    before_start: bool = False  # stopped before `nasctl run` starts: candidates wait to be submitted


FAULTS = {f.name: f for f in (
    Fault("requeue", "slurm", "scontrol requeue of a running job"),
    Fault("node-down", "slurm", "its node set down (state=down), resumed after 5 s"),
    Fault("time-limit", "slurm", "past its time limit (time 1 min, signal USR1@30)", ("infrastructure", "timeout")),
    Fault("scancel", "slurm", "scancel of a running job by hand", completes=False),
    Fault("sigkill", "local_cwd", "SIGKILL of the training process"),
    Fault("daemons-down", "slurm", "slurmctld and slurmdbd stopped for 45 s mid-run",
          stop=("slurmctld", "slurmdbd"), outage_s=45.0),
    Fault("ctld-queued", "slurm", "slurmctld stopped for 30 s while the candidates wait to be submitted",
          stop=("slurmctld",), outage_s=30.0, before_start=True),
)}
SLURM_LOCAL = str(ROOT / "scripts" / "slurm-local.sh")


@dataclass
class Run:
    """One fault on one fresh experiment, as measured."""

    fault: str
    repeat: int
    name: str
    folder: str
    epochs: int
    epoch_seconds: float
    waited_for_cluster_s: float = 0.0
    injected: dict[str, Any] = field(default_factory=dict)
    released_holds: list[str] = field(default_factory=list)
    exit_codes: list[int | None] = field(default_factory=list)
    manual_actions: int = 0
    run_s: float = 0.0
    trials: list[dict[str, Any]] = field(default_factory=list)
    retry_events: list[str] = field(default_factory=list)
    squeue_after: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


# --- Slurm -------------------------------------------------------------------------------
def sh(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)


def squeue() -> list[dict[str, str]]:
    """Every job the controller lists (COMPLETING ones too)."""
    p = sh("squeue", "-h", "-o", "%i|%j|%T|%N|%r")
    keys = ("id", "name", "state", "node", "reason")
    return [dict(zip(keys, line.split("|", 4))) for line in p.stdout.splitlines() if line.count("|") >= 4]


def nodes() -> dict[str, tuple[str, str]]:
    """Node -> (state, reason)."""
    p = sh("sinfo", "-h", "-N", "-o", "%N|%T|%E")
    out = {}
    for line in p.stdout.splitlines():
        name, state, reason = (line.split("|", 2) + ["", ""])[:3]
        out[name] = (state, reason)
    return out


def wait_for_quiet_cluster() -> float:
    """Wait until squeue lists only this command's jobs and every node is up; the seconds waited.

    Raises:
        RuntimeError: still busy after QUIET_WAIT_S.
    """
    t0 = time.monotonic()
    while True:
        foreign = [j for j in squeue() if not j["name"].startswith(PREFIX)]
        down = {n: s for n, s in nodes().items() if s[0].rstrip("*~#$@+") not in ("idle", "mixed", "allocated")}
        if not foreign and not down:
            return time.monotonic() - t0
        if time.monotonic() - t0 > QUIET_WAIT_S:
            raise RuntimeError(f"the cluster stayed busy for {QUIET_WAIT_S:.0f}s: jobs {foreign}, nodes {down}")
        time.sleep(QUIET_POLL_S)


def release_holds(name: str, first_seen: dict[str, float], released: list[str]) -> None:
    """`StartTime=now` for the experiment's jobs that Slurm has held (BeginTime) for HOLD_RELEASE_S."""
    now = time.monotonic()
    for job in squeue():
        if not job["name"].startswith(f"{name}-") or job["state"] != "PENDING" or job["reason"] != "BeginTime":
            first_seen.pop(job["id"], None)
            continue
        if now - first_seen.setdefault(job["id"], now) >= HOLD_RELEASE_S:
            if sh("scontrol", "update", f"jobid={job['id']}", "StartTime=now").returncode == 0:
                released.append(job["id"])
                first_seen.pop(job["id"])


# --- one run -----------------------------------------------------------------------------
def write_spec(path: Path, name: str, fault: Fault, epochs: int, epoch_seconds: float) -> None:
    runner = "{scheduler: local_cwd, cfg: {}}"
    if fault.name == "time-limit":
        runner = '{scheduler: slurm, cfg: {time: "1", signal: USR1@30}}'
    elif fault.scheduler == "slurm":
        runner = '{scheduler: slurm, cfg: {time: "10"}}'
    path.write_text(
        f"name: {name}\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize, threshold: 1.1}, f2: {goal: minimize, threshold: 2.1}}\n"
        f"budget: {{max_trials: {BUDGET}, parallelism: {BUDGET}, max_failures: {BUDGET}}}\n"
        f"trial: {{script: {TRIAL}, args: {{epochs: {epochs}, epoch_seconds: {epoch_seconds}}},\n"
        f"        resources: {{cpu: 1, mem_mb: 500}}, retry_on: [{', '.join(fault.retry_on)}]}}\n"
        f"runner: {runner}\n"
        "optimizer: {method: sobol, seed: 0}\n")


def nasctl(run: Run, *args: str) -> subprocess.Popen[str]:
    folder = Path(run.folder)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    log = len(run.exit_codes)  # nasctl-0.* for the run, nasctl-1.* for a first resume, ...
    with open(folder / f"nasctl-{log}.out", "w") as out, open(folder / f"nasctl-{log}.err", "w") as err:
        return subprocess.Popen([sys.executable, "-m", "nasctl", *args, "--db", f"sqlite:///{folder / 'n.db'}",
                                 "--json"], cwd=folder, env=env, text=True, stdout=out, stderr=err)


def trial_dirs(run: Run) -> list[Path]:
    return sorted((Path(run.folder) / "work" / run.name / "trials").glob("trial_*"))


def first_checkpoint(run: Run, proc: subprocess.Popen[str], timeout: float) -> Path | None:
    """The folder of the first trial whose checkpoint says an epoch is done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for d in trial_dirs(run):
            try:
                if json.loads((d / "checkpoints" / "last.ckpt").read_text())["epoch"] >= 1:
                    return d
            except (OSError, ValueError, KeyError):
                pass
        time.sleep(0.2)
    return None


def inject(run: Run, fault: Fault, trial: Path) -> None:
    """Make `fault` happen to the job of `trial` (its first attempt)."""
    launch = json.loads((trial / "job" / "launch.json").read_text())
    job_id = str(launch["torchx_job_id"]).rpartition("/")[2]
    run.injected = {"trial": trial.name, "job": launch["torchx_job_id"]}
    if fault.name == "sigkill":
        run.injected.update(command=f"kill -KILL {launch['child_pid']}", at=time.time())
        os.kill(int(launch["child_pid"]), signal.SIGKILL)
        return
    if fault.stop:
        stop_daemons(run, fault)
        return
    node = next((j["node"] for j in squeue() if j["id"] == job_id), "")
    cmd = {"requeue": ["scontrol", "requeue", job_id],
           "node-down": ["scontrol", "update", f"nodename={node}", "state=down", "reason=faults"],
           "scancel": ["scancel", job_id]}[fault.name]
    run.injected.update(node=node, command=" ".join(cmd), at=time.time())
    p = sh(*cmd)
    if p.returncode != 0:
        run.errors.append(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")


def stop_daemons(run: Run, fault: Fault) -> None:
    cmd = [SLURM_LOCAL, "stop", *fault.stop]
    run.injected.update(command=" ".join(["slurm-local.sh", "stop", *fault.stop]), at=time.time())
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        run.errors.append(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")


def daemons_up(run: Run) -> None:
    """Start the stopped daemons again (`slurm-local.sh up` starts only what is not running)."""
    p = subprocess.run([SLURM_LOCAL, "up"], capture_output=True, text=True, timeout=300)
    run.injected["restored_at"] = time.time()
    if p.returncode != 0:
        run.errors.append(f"slurm-local.sh up: exit {p.returncode}: {p.stderr.strip()[-300:]}")


def wait_for_end(run: Run, fault: Fault, proc: subprocess.Popen[str], deadline: float) -> bool:
    """Poll until `proc` ends (True) or the deadline passes (False), releasing held jobs,
    resuming the node this run set down and starting the daemons it stopped."""
    first_seen: dict[str, float] = {}
    node_back = fault.name != "node-down"
    while proc.poll() is None:
        if time.monotonic() > deadline:
            return False
        if fault.stop and "restored_at" not in run.injected and run.injected.get("at") and (
                time.time() - run.injected["at"] >= fault.outage_s):
            daemons_up(run)
        if fault.stop and "restored_at" not in run.injected:
            time.sleep(1.0)
            continue  # nothing to ask the controller while it is down
        if fault.scheduler == "slurm":
            release_holds(run.name, first_seen, run.released_holds)
        if not node_back and time.time() - run.injected.get("at", 0) >= NODE_DOWN_S:
            state = nodes().get(run.injected["node"], ("", ""))
            if "down" in state[0] or "drain" in state[0]:
                sh("scontrol", "update", f"nodename={run.injected['node']}", "state=resume")
                run.injected["resumed_node"] = True
            else:
                run.injected["resumed_node"] = f"back by itself ({state[0]})"
            node_back = True
        time.sleep(1.0)
    return True


def execute(run: Run, fault: Fault, timeout: float) -> None:
    folder = Path(run.folder)
    folder.mkdir(parents=True)
    write_spec(folder / "spec.yaml", run.name, fault, run.epochs, run.epoch_seconds)
    if fault.before_start:
        stop_daemons(run, fault)
    t0 = time.monotonic()
    proc = nasctl(run, "run", "spec.yaml", "--workdir", str(folder / "work"))
    trial = None if fault.before_start else first_checkpoint(run, proc, 180.0)
    if fault.before_start:
        pass  # made before the run started
    elif trial is None:
        run.errors.append("no trial saved a checkpoint within 180 s" if proc.poll() is None else
                          f"nasctl run ended (exit {proc.returncode}) before any checkpoint")
    elif fault.name == "time-limit":
        run.injected = {"trial": None, "at": None, "command": "(none: the time limit)"}
    else:
        time.sleep(run.epoch_seconds / 2)
        inject(run, fault, trial)
    ended = wait_for_end(run, fault, proc, t0 + timeout)
    for attempt in range(MAX_RESUMES + 1):
        if not ended:
            proc.terminate()
            proc.wait(60)
            run.errors.append(f"nasctl {'run' if attempt == 0 else 'resume'} did not end within {timeout:.0f}s")
        run.exit_codes.append(proc.returncode)
        if ended and proc.returncode == 0 and not unfinished(run):
            break
        if attempt == MAX_RESUMES:
            break
        run.manual_actions += 1
        proc = nasctl(run, "resume", run.name)
        ended = wait_for_end(run, fault, proc, time.monotonic() + timeout)
    run.run_s = time.monotonic() - t0


def unfinished(run: Run) -> list[int]:
    return [t["index"] for t in trials_json(run) if t["status"] in ("CANDIDATE", "RUNNING")]


def trials_json(run: Run) -> list[dict[str, Any]]:
    folder = Path(run.folder)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "nasctl", "trials", run.name, "--db", f"sqlite:///{folder / 'n.db'}",
                        "--json"], capture_output=True, text=True, env=env, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"nasctl trials {run.name} failed: {p.stderr.strip()[-300:]}")
    data: list[dict[str, Any]] = json.loads(p.stdout)
    return data


# --- measuring ---------------------------------------------------------------------------
def trial_runs(tb: Path) -> list[dict[str, Any]]:
    """Each run of the trial process (one event file each), in the order they started."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    runs = []
    for f in tb.glob("events.out.tfevents.*"):
        ev: dict[str, list[tuple[int, float]]] = {}
        for e in EventFileLoader(str(f)).Load():
            for v in e.summary.value:
                value = v.simple_value if v.HasField("simple_value") else float(v.tensor.float_val[0])
                ev.setdefault(v.tag, []).append((int(value), e.wall_time))
        if "resumed_at" not in ev:
            continue
        started, done = dict(ev.get("epoch_started", [])), dict(ev.get("epoch_done", []))
        walls = [w for pairs in ev.values() for _, w in pairs]
        runs.append({"file": f.name, "start": min(walls), "last_event": max(walls),
                     "resumed_at": ev["resumed_at"][0][0], "epochs_done": sorted(done),
                     "in_progress": {"epoch": max(started), "since": started[max(started)]}
                     if started and max(started) not in done else None,
                     "stopped_at": ev["stopped"][0][1] if "stopped" in ev else None,
                     "warnings": len(ev.get("warned", [])), "finished": "f1" in ev})
    return sorted(runs, key=lambda r: r["start"])


def hits(runs: list[dict[str, Any]], killed_at: float | None, epoch_s: float) -> list[dict[str, Any]]:
    """Each run that ended unfinished, with the training the next run repeated: the
    completed epochs it trained again, and the part of the epoch in progress (until
    the run's SIGTERM, else until the fault was made)."""
    out = []
    for i, r in enumerate(runs):
        if r["finished"]:
            continue
        done = max(r["epochs_done"], default=r["resumed_at"])
        nxt = runs[i + 1] if i + 1 < len(runs) else None
        partial = 0.0
        if r["in_progress"]:
            end = r["stopped_at"] or (killed_at if killed_at and killed_at > r["in_progress"]["since"] else None)
            partial = min(epoch_s, (end or r["last_event"]) - r["in_progress"]["since"])
        redone = max(0, done - nxt["resumed_at"]) if nxt else 0
        out.append({"epochs_done": done, "next_resumed_at": nxt["resumed_at"] if nxt else None,
                    "epochs_redone": redone, "partial_epoch_s": round(partial, 2),
                    "repeated_s": round(redone * epoch_s + partial, 2) if nxt else None})
    return out


def overlapping(runs: list[dict[str, Any]]) -> int:
    return sum(1 for a, b in zip(runs, runs[1:]) if b["start"] < a["last_event"] - 0.5)


def measure(run: Run) -> None:
    from nasctl.store import Store

    rows = trials_json(run)
    for row in rows:
        tdir = Path(row["log_dir"])
        runs = trial_runs(tdir / "tb")
        restarts = 0
        for sdir in tdir.glob("job*"):
            try:
                restarts += len(json.loads((sdir / "launch.json").read_text()).get("restarts") or [])
            except (OSError, ValueError):
                pass
        run.trials.append({
            "index": row["index"], "status": row["status"], "failure_class": row["failure_class"],
            "parameters": row["parameters"], "attempts": row["attempts"], "slurm_restarts": restarts,
            "nasctl_restarts": int(row.get("restarts") or 0),
            "runs": runs, "hits": hits(runs, run.injected.get("at"), run.epoch_seconds),
            "overlapping_runs": overlapping(runs)})
    store = Store(f"sqlite:///{Path(run.folder) / 'n.db'}")
    try:
        exp = store.get_experiment(run.name)
        run.retry_events = [e.message for e in store.events(exp.id, limit=10_000, kinds=["retry"])]
    finally:
        store.close()


def check_orphans(run: Run) -> None:
    time.sleep(ORPHAN_GRACE_S)
    mine = [j for j in squeue() if j["name"].startswith(f"{run.name}-")]
    run.squeue_after = ["|".join(j.values()) for j in mine]
    run.orphans = [j["id"] for j in mine if j["state"] != "COMPLETING"]


def check_local_orphans(run: Run) -> None:
    """Launcher or training processes of the experiment still alive after the run ended."""
    import psutil

    time.sleep(ORPHAN_GRACE_S)
    for launch in Path(run.folder, "work", run.name, "trials").glob("trial_*/job*/launch.json"):
        info = json.loads(launch.read_text())
        for pid, started in ((info.get("pid"), info.get("create_time")),
                             (info.get("child_pid"), info.get("child_create_time"))):
            try:
                if pid and started and abs(psutil.Process(int(pid)).create_time() - float(started)) < 1:
                    run.orphans.append(f"pid {pid} ({launch.parent.name})")
            except psutil.NoSuchProcess:
                pass


def clean_up(run: Run) -> None:
    """Cancel this run's leftover jobs; resume a node it set down."""
    for j in squeue():
        if j["name"].startswith(f"{run.name}-"):
            sh("scancel", j["id"])
    for node, (state, reason) in nodes().items():
        if reason == "faults" and ("down" in state or "drain" in state):
            sh("scontrol", "update", f"nodename={node}", "state=resume")


# --- report ------------------------------------------------------------------------------
def summary(run: Run) -> dict[str, Any]:
    hit_list = [h for t in run.trials for h in t["hits"]]
    repeated = [h["repeated_s"] for h in hit_list if h["repeated_s"] is not None]
    discarded = sum(len(r["epochs_done"]) for t in run.trials if t["status"] != "COMPLETED" for r in t["runs"])
    params = Counter(json.dumps(t["parameters"], sort_keys=True) for t in run.trials)
    hit_trials = [t for t in run.trials if t["hits"]]
    return {
        "completed": sum(t["status"] == "COMPLETED" for t in run.trials), "hits": len(hit_list),
        "failed": sum(t["status"] == "FAILED" for t in run.trials),
        "attempts": max((len(t["attempts"]) for t in hit_trials), default=0),
        "restarts": sum(t["slurm_restarts"] for t in run.trials),
        "restarts_seen": sum(t.get("nasctl_restarts", 0) for t in run.trials),  # by nasctl, on the attempts
        "repeated_s": max(repeated) if repeated else None,
        "discarded_s": round(discarded * run.epoch_seconds, 1),
        "duplicates": sum(n - 1 for n in params.values()),
        "overlapping": sum(t["overlapping_runs"] for t in run.trials),
        "orphans": len(run.orphans), "manual": run.manual_actions, "run_s": round(run.run_s),
    }


def spread(values: list[Any], unit: str = "") -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "–"
    if min(vals) == max(vals):
        return f"{vals[0]:g}{unit}"
    return f"{statistics.median(vals):g}{unit} ({min(vals):g}–{max(vals):g})"


def verdict(fault: Fault, rows: list[dict[str, Any]], runs: list[Run], epoch_s: float) -> str:
    missed = []
    if any(r.errors for r in runs):
        missed.append("errors (see JSON)")
    if any(r["completed"] < BUDGET for r in rows):
        missed.append("trials not completed")
    if any((r["repeated_s"] or 0) > epoch_s for r in rows):
        missed.append("training repeated > 1 epoch")
    for key, what in (("failed", "FAILED trials"), ("duplicates", "duplicates"), ("overlapping", "overlapping runs"),
                      ("orphans", "orphan jobs"), ("manual", "manual actions")):
        if any(r[key] for r in rows):
            missed.append(what)
    if not fault.completes and missed == ["trials not completed"] and all(r["completed"] == BUDGET - 1 for r in rows):
        return "expected not met: cancelled is not retried by default"
    return "met" if not missed else "not met: " + ", ".join(missed)


def table(runs: list[Run], epoch_s: float) -> str:
    lines = ["| fault | runner | repeats | hits | trials completed | FAILED trials | attempts (hit trial) | "
             "Slurm restarts | training repeated per hit, worst (s) | training discarded (s) | duplicates | "
             "overlapping runs | orphan jobs | manual actions | run (s) | targets |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, fault in FAULTS.items():
        mine = [r for r in runs if r.fault == name]
        if not mine:
            continue
        rows = [summary(r) for r in mine]

        def col(key: str) -> str:
            return spread([r[key] for r in rows])

        completed = spread([r["completed"] for r in rows]) + f" / {BUDGET}"
        lines.append(f"| {name}: {fault.what} | {fault.scheduler} | {len(mine)} | {col('hits')} | {completed} | "
                     f"{col('failed')} | "
                     f"{col('attempts')} | {col('restarts') if fault.scheduler == 'slurm' else '–'} | "
                     f"{col('repeated_s')} | {col('discarded_s')} | {col('duplicates')} | {col('overlapping')} | "
                     f"{col('orphans')} | {col('manual')} | {col('run_s')} | {verdict(fault, rows, mine, epoch_s)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--faults", type=argtypes.names(list(FAULTS)), default=list(FAULTS),
                    help=f"comma-separated, of {', '.join(FAULTS)} (default: all)")
    ap.add_argument("--repeats", type=argtypes.positive_int, default=3, help="runs of each fault (default 3)")
    ap.add_argument("--epochs", type=argtypes.positive_int, default=8,
                    help="epochs of each trial, except time-limit's (default 8)")
    ap.add_argument("--epoch-seconds", type=argtypes.positive_float, default=3.0,
                    help="seconds of each epoch, the checkpoint interval (default 3)")
    ap.add_argument("--time-limit-seconds", type=argtypes.positive_int, default=100,
                    help="work of each time-limit trial: more than one 60-90 s allocation holds (default 100)")
    ap.add_argument("--run-timeout", type=argtypes.positive_int, default=600,
                    help="seconds a nasctl run may take before the harness stops and resumes it (default 600)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args(argv)
    if a.epochs < 3:
        ap.error(f"--epochs {a.epochs} is too few: a fault is made after the first epoch; give at least 3")
    if a.epoch_seconds > 20:
        ap.error(f"--epoch-seconds {a.epoch_seconds:g} leaves fewer than 3 epochs per one-minute allocation "
                 "of the time-limit fault; give at most 20")
    if "time-limit" in a.faults and a.time_limit_seconds <= 90:
        ap.error(f"--time-limit-seconds {a.time_limit_seconds} fits inside one allocation (60-90 s); give more than 90")
    slurm = [f for f in a.faults if FAULTS[f].scheduler == "slurm"]
    if slurm and (shutil.which("sinfo") is None or sh("sinfo", "-h").returncode != 0):
        print(f"faults {', '.join(slurm)} need the Slurm cluster; start it with scripts/slurm-local.sh up",
              file=sys.stderr)
        return 1
    runs: list[Run] = []
    out_json = a.out / "faults.json"
    for repeat in range(1, a.repeats + 1):
        for name in a.faults:
            fault = FAULTS[name]
            epochs = math.ceil(a.time_limit_seconds / a.epoch_seconds) if name == "time-limit" else a.epochs
            exp = f"{PREFIX}{name}-{repeat}-{secrets.token_hex(2)}"
            run = Run(name, repeat, exp, str(a.out / "runs" / exp), epochs, a.epoch_seconds)
            runs.append(run)
            print(f"{exp}: {fault.what} ...", file=sys.stderr, flush=True)
            try:
                if fault.scheduler == "slurm":
                    run.waited_for_cluster_s = round(wait_for_quiet_cluster(), 1)
                execute(run, fault, a.run_timeout)
                check_orphans(run) if fault.scheduler == "slurm" else check_local_orphans(run)
                measure(run)
            except Exception as e:  # one broken run is recorded and the matrix goes on
                run.errors.append(f"{type(e).__name__}: {e}")
            finally:
                if fault.stop and "restored_at" not in run.injected:
                    daemons_up(run)
                if fault.scheduler == "slurm":
                    clean_up(run)
            s = summary(run) if run.trials else {}
            print(f"  {s} {run.errors or ''}", file=sys.stderr, flush=True)
            out_json.parent.mkdir(parents=True, exist_ok=True)
            out_json.write_text(json.dumps({"argv": sys.argv[1:] if argv is None else argv,
                                            "epoch_seconds": a.epoch_seconds, "budget": BUDGET,
                                            "runs": [{**r.__dict__, "summary": summary(r) if r.trials else None}
                                                     for r in runs]}, indent=1))
    print(table(runs, a.epoch_seconds))
    print(f"\nall runs: {out_json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
