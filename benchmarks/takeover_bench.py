"""A standby service takes over after kill -9 of the active one, with 3 experiments running.

    python benchmarks/takeover_bench.py [--db URL] [--hosts same|other] [--runs 3] [--out FILE]

Each run starts two real `nasctl serve` processes on one database (the first
active, the second a standby), submits 3 experiments (8 trials each,
parallelism 2, `--trial-seconds` long local_cwd trials that survive their
service), waits until every experiment has trials running and some completed,
SIGKILLs the active service and watches the standby. `--hosts other` gives the
two services different host names (NASCTL_HOSTNAME), as on two machines: the
standby cannot check the dead process and has only its lease heartbeat to go
by. Printed per run:

- budget met: every experiment COMPLETED with exactly its budget of COMPLETED trials;
- FAILED trials;
- manual actions: experiments left STOPPED or FAILED (each would need `nasctl resume`);
- standby active: seconds from the kill to the standby's /healthz saying `active`;
- takeover: seconds from the kill to the standby having re-attached every experiment
  still running (its loop's `resumed` event after the kill) - the figure with the
  30 s target;
- duplicates: trial launches beyond one per trial (the trial script appends its index
  to a per-experiment file) plus configurations proposed twice.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nasctl.store import Store  # noqa: E402
from nasctl.types import ExperimentStatus, TrialStatus  # noqa: E402

TRIAL = '''
import argparse, os, time
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
p.add_argument("--y", type=float, required=True)
args = p.parse_args()
with open(os.environ["BENCH_RUNS"].replace("{experiment}", os.environ["NASCTL_EXPERIMENT"]), "a") as f:
    f.write(os.environ["NASCTL_TRIAL_ID"] + "\\n")
time.sleep(float(os.environ["BENCH_SLEEP"]))
w = EventFileWriter(os.environ["NASCTL_LOG_DIR"])
for tag, value in (("f1", args.x), ("f2", 1.0 - args.x ** 0.5 + args.y)):
    w.add_event(Event(step=0, wall_time=time.time(), summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])))
w.close()
'''

TOKEN = "bench"
NAMES = ["exp-a", "exp-b", "exp-c"]


def spec_text(name: str, trials: int, script: Path) -> str:
    return (
        f"name: {name}\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize, threshold: 1.1}, f2: {goal: minimize, threshold: 2.1}}\n"
        f"budget: {{max_trials: {trials}, parallelism: 2, max_failures: 0}}\n"
        f"trial: {{script: {script}}}\n"
        "runner: {scheduler: local_cwd, cfg: {}}\n"
        "optimizer: {method: sobol, seed: 0}\n"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """One `nasctl serve` process, its output in a file."""

    def __init__(self, db: str, work: Path, env: dict[str, str], tag: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (work / f"serve-{tag}.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nasctl", "serve", "--db", db, "--port", str(self.port), "--token", TOKEN,
             "--workdir", str(work / "runs"), "--max-experiments", "3"],
            cwd=work, env={**os.environ, **env}, stdout=self.log, stderr=subprocess.STDOUT, text=True)

    def health(self) -> dict[str, Any] | None:
        try:
            r = httpx.get(self.url + "/healthz", timeout=2)
            return r.json() if r.status_code == 200 else None  # type: ignore[no-any-return]
        except httpx.HTTPError:
            return None

    def wait_healthy(self, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while (h := self.health()) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"nasctl serve did not start: see {self.log.name}")
            time.sleep(0.2)
        return h

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def snapshot(store: Store) -> dict[str, tuple[ExperimentStatus, dict[str, int]]]:
    return {e.name: (e.status, counts) for e, counts in store.list_experiments()}


def mid_run(snap: dict[str, tuple[ExperimentStatus, dict[str, int]]]) -> bool:
    return all(n in snap and snap[n][0] == ExperimentStatus.RUNNING and snap[n][1].get("RUNNING", 0) > 0
               and snap[n][1].get("COMPLETED", 0) > 0 for n in NAMES)


def reattached(store: Store, killed: datetime) -> bool:
    """Has every experiment still running been resumed (its running trials re-attached) since `killed`?"""
    for exp, _ in store.list_experiments():
        if exp.status == ExperimentStatus.COMPLETED:
            continue
        events = store.events(exp.id, kinds=["resumed"], newest=True, limit=1)
        if not events or events[0].time <= killed:
            return False
    return True


def one_run(args: argparse.Namespace, k: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="nasctl-takeover-bench-") as tmp:
        work = Path(tmp)
        script = work / "trial.py"
        script.write_text(TRIAL)
        db = args.db or f"sqlite:///{work / 's.db'}"
        if args.db:
            reset(args.db)
        env = {"BENCH_RUNS": str(work / "runs-{experiment}.log"), "BENCH_SLEEP": str(args.trial_seconds)}
        hosts = ({"NASCTL_HOSTNAME": "bench-host-a"}, {"NASCTL_HOSTNAME": "bench-host-b"}) if args.hosts == "other" \
            else ({}, {})
        active = Serve(db, work, {**env, **hosts[0]}, "active")
        active.wait_healthy()
        standby = Serve(db, work, {**env, **hosts[1]}, "standby")
        try:
            if standby.wait_healthy()["role"] != "standby":
                raise SystemExit("the second service is not a standby")
            return measure(args, work, db, script, active, standby)
        finally:
            for s in (active, standby):
                s.stop()
            kill_trials(work)


def measure(args: argparse.Namespace, work: Path, db: str, script: Path, active: Serve,
            standby: Serve) -> dict[str, Any]:
    with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        for n in NAMES:
            r = c.post(active.url + "/api/experiments", json={"spec": spec_text(n, args.trials, script),
                                                               "spec_dir": str(work)})
            if r.status_code != 201:
                raise SystemExit(r.text)
    store = Store(db)
    deadline = time.monotonic() + 300
    while not mid_run(snapshot(store)):
        if time.monotonic() > deadline:
            raise SystemExit(f"never mid-run: {snapshot(store)}")
        time.sleep(0.2)
    time.sleep(args.kill_after)
    killed_utc = datetime.now(timezone.utc).replace(tzinfo=None)
    t_kill = time.monotonic()
    active.proc.kill()
    active.proc.wait()
    t_active = t_all = None
    while t_all is None and time.monotonic() - t_kill < 120:
        if t_active is None and (standby.health() or {}).get("role") == "active":
            t_active = time.monotonic() - t_kill
        if t_active is not None and reattached(store, killed_utc):
            t_all = time.monotonic() - t_kill
        time.sleep(0.1)
    deadline = time.monotonic() + 600
    while any(s in (ExperimentStatus.RUNNING, ExperimentStatus.QUEUED) for s, _ in snapshot(store).values()):
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    result = outcome(store, work, args.trials)
    store.close()
    return {**result, "standby_active_s": t_active, "takeover_s": t_all}


def outcome(store: Store, work: Path, budget: int) -> dict[str, Any]:
    met, failed, manual, duplicates = True, 0, 0, 0
    for n in NAMES:
        exp = store.get_experiment(n)
        trials = store.list_trials(exp.id)
        completed = sum(t.status == TrialStatus.COMPLETED for t in trials)
        failed += sum(t.status == TrialStatus.FAILED for t in trials)
        met &= exp.status == ExperimentStatus.COMPLETED and completed == budget == len(trials)
        manual += exp.status in (ExperimentStatus.STOPPED, ExperimentStatus.FAILED)
        runs_file = work / f"runs-{n}.log"
        launches = Counter(runs_file.read_text().split()) if runs_file.exists() else Counter()
        duplicates += sum(c - 1 for c in launches.values() if c > 1)
        configs = Counter((t.parameters["x"], t.parameters["y"]) for t in trials)
        duplicates += sum(c - 1 for c in configs.values() if c > 1)
    return {"budget_met": met, "failed_trials": failed, "manual_actions": manual, "duplicates": duplicates}


def reset(db: str) -> None:
    """Empty a server database for the next run (the benchmark owns it: pass a scratch database)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(db)
    with engine.begin() as c:
        if engine.dialect.name == "postgresql":
            c.execute(text("DROP SCHEMA public CASCADE"))
            c.execute(text("CREATE SCHEMA public"))
        else:
            c.execute(text("SET FOREIGN_KEY_CHECKS = 0"))
            for (table,) in c.execute(text("SHOW TABLES")).all():
                c.execute(text(f"DROP TABLE `{table}`"))
    engine.dispose()


def kill_trials(work: Path) -> None:
    """Trial processes of this run that are still running (none, when everything completed)."""
    import psutil

    for p in psutil.process_iter():
        try:
            if str(work) in p.environ().get("NASCTL_LOG_DIR", ""):
                p.kill()
        except psutil.Error:
            continue


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", default=None,
                   help="a scratch PostgreSQL/MariaDB database, emptied before each run (default: a new SQLite file)")
    p.add_argument("--hosts", choices=["same", "other"], default="same",
                   help="other: the two services take different NASCTL_HOSTNAME values, as on two machines")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--trials", type=int, default=8, help="budget of each of the 3 experiments")
    p.add_argument("--trial-seconds", type=float, default=2.0)
    p.add_argument("--kill-after", type=float, default=1.0, help="seconds after mid-run before the kill -9")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    kind = (args.db or "sqlite").split(":")[0].split("+")[0]
    rows = []
    print("| run | database | hosts | budget met | FAILED trials | manual actions | standby active (s) "
          "| takeover (s) | duplicates |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    for k in range(args.runs):
        r = one_run(args, k)
        rows.append(r)
        fmt = (lambda v: "-" if v is None else f"{v:.1f}")
        print(f"| {k + 1} | {kind} | {args.hosts} | {'yes' if r['budget_met'] else 'NO'} | {r['failed_trials']} "
              f"| {r['manual_actions']} | {fmt(r['standby_active_s'])} | {fmt(r['takeover_s'])} | {r['duplicates']} |",
              flush=True)
    out = args.out or str(ROOT / "benchmarks" / "results" / f"takeover_{kind}_{args.hosts}.json")
    Path(out).write_text(json.dumps({"database": kind, "hosts": args.hosts, "trials": args.trials,
                                     "trial_seconds": args.trial_seconds, "runs": rows,
                                     "load_average": os.getloadavg()[0]}, indent=1))
    ok = all(r["budget_met"] and not r["failed_trials"] and not r["manual_actions"] and not r["duplicates"]
             and r["takeover_s"] is not None and r["takeover_s"] <= 30 for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
