"""The service under load: one real `nasctl serve` driving many experiments at once.

    python benchmarks/service_bench.py --mode overhead [--db URL] [--out FILE]
    python benchmarks/service_bench.py --mode scale [--db URL] [--out FILE]

overhead: 20 experiments x 50 trials submitted at once (max-experiments 20),
each trial a `trial.function` on the `inprocess` runner that sleeps 0.2 s
(parallelism 4, quasi-random proposals, so what is timed is orchestration, not
the model; `--trial-seconds` and `--parallelism` change the trials' length and
how many run at once). Per experiment, overhead per trial = (makespan x parallelism - the
trials' own seconds) / trials: the slot time nasctl spends around each trial
(proposal, store writes, dispatch, polling, metric reads). Also the service
process's CPU seconds per trial, and the latency of the dashboard's API
(experiment list, summary, trial page, /metrics) sampled while they run.

scale: 20 experiments x parallelism 50 = 1,000 trials in flight, each a 20 s
sleep that stands in for a cluster job (the service pays the same per trial:
records, polls, event-file reads; the cluster does the running), 100 trials per
experiment. Reported: proposals per second while the first wave is created,
store rows written per second, the service's CPU per experiment-loop tick while
all 1,000 trials sleep, and API latency.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nasctl.store import Store  # noqa: E402
from nasctl.types import TrialStatus  # noqa: E402

FUNCTION = '''
import time


def sleepy(p):
    time.sleep(p["seconds"] * (0.5 + p["x"] if p["jitter"] else 1.0))
    return {"f1": p["x"], "f2": 1.0 - p["x"] + p["y"]}
'''

TOKEN = "bench"


def own_seconds(params: dict[str, Any], seconds: float, jitter: bool) -> float:
    """What `sleepy` sleeps for these parameters."""
    return seconds * (0.5 + float(params["x"])) if jitter else seconds


def spec_text(name: str, trials: int, parallelism: int, seconds: float, jitter: bool = False) -> str:
    return (
        f"name: {name}\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize, threshold: 1.1}, f2: {goal: minimize, threshold: 2.1}}\n"
        f"budget: {{max_trials: {trials}, parallelism: {parallelism}, max_failures: 0}}\n"
        f"trial: {{function: sleepy:sleepy, args: {{seconds: {seconds}, jitter: {str(jitter).lower()}}}}}\n"
        f"runner: {{scheduler: inprocess, cfg: {{workers: {parallelism}}}}}\n"
        "optimizer: {method: sobol, seed: 0}\n"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def slot_costs(done: list[Any], parallelism: int, seconds: float, jitter: bool) -> dict[str, float]:
    """What a slot loses around each trial, from the store's timestamps: the
    trial's recorded duration beyond its own sleep (dispatch, start-up, noticing
    the end, reading its metrics), and, for trials after the first wave, the gap
    between a trial ending and the next one starting in the freed slot
    (recording the result, proposing, dispatching). Unlike the makespan figure,
    neither counts slots left idle because the budget has fewer trials left than
    slots."""
    ends = sorted(t.ended_at.timestamp() for t in done)
    starts = sorted(t.started_at.timestamp() for t in done)
    inside = [(t.ended_at - t.started_at).total_seconds() - own_seconds(t.parameters, seconds, jitter) for t in done]
    gaps = [starts[k] - ends[k - parallelism] for k in range(parallelism, len(starts))]
    return {"inside_ms": statistics.mean(inside) * 1000 if inside else float("nan"),
            "refill_ms": statistics.mean(gaps) * 1000 if gaps else float("nan"),
            "slot_ms_per_trial": (sum(inside) + sum(gaps)) / max(1, len(done)) * 1000}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class ApiSampler(threading.Thread):
    """GETs the dashboard's endpoints in a loop and keeps each answer's seconds."""

    def __init__(self, base: str, names: list[str], interval: float) -> None:
        super().__init__(daemon=True)
        self.base, self.names, self.interval = base, names, interval
        self.times: dict[str, list[float]] = {"list": [], "summary": [], "trials": [], "metrics": []}
        self.errors = 0
        self.done = threading.Event()

    def run(self) -> None:
        k = 0
        with httpx.Client(timeout=30) as c:
            while not self.done.is_set():
                name = self.names[k % len(self.names)]
                k += 1
                for kind, path in (("list", "/api/experiments"), ("summary", f"/api/experiments/{name}"),
                                   ("trials", f"/api/experiments/{name}/trials?limit=50"), ("metrics", "/metrics")):
                    t0 = time.perf_counter()
                    try:
                        ok = c.get(self.base + path).status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    self.times[kind].append(time.perf_counter() - t0)
                    self.errors += not ok
                self.done.wait(self.interval)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["overhead", "scale"], required=True)
    p.add_argument("--db", default=None, help="database URL (default: a new SQLite file)")
    p.add_argument("--experiments", type=int, default=20)
    p.add_argument("--api-interval", type=float, default=1.0,
                   help="seconds between rounds of API requests (one dashboard refreshing once a second)")
    p.add_argument("--trial-seconds", type=float, default=None,
                   help="each trial's sleep (default 0.2 s for overhead, 20 s for scale)")
    p.add_argument("--parallelism", type=int, default=None,
                   help="trials in flight per experiment (default 4 for overhead, 50 for scale)")
    p.add_argument("--jitter", action="store_true",
                   help="each trial sleeps its length x (0.5 + x), x its first parameter, so that trials do not all "
                        "end in the same instant (real trials don't)")
    p.add_argument("--profile", action="store_true", help="record the service with py-spy (if installed)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if args.mode == "overhead":
        trials, parallelism, seconds = 50, 4, 0.2
    else:
        trials, parallelism, seconds = 100, 50, 20.0
    seconds = args.trial_seconds if args.trial_seconds is not None else seconds
    parallelism = args.parallelism if args.parallelism is not None else parallelism
    with tempfile.TemporaryDirectory(prefix="nasctl-service-bench-") as tmp:
        work = Path(tmp)
        (work / "sleepy.py").write_text(FUNCTION)
        db = args.db or f"sqlite:///{work / 's.db'}"
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = (work / "serve.log").open("w")  # a file, not a pipe nobody reads while it runs
        serve = subprocess.Popen(
            [sys.executable, "-m", "nasctl", "serve", "--db", db, "--port", str(port), "--token", TOKEN,
             "--workdir", str(work / "runs"), "--max-experiments", str(args.experiments)],
            cwd=work, stdout=subprocess.DEVNULL, stderr=log, text=True)
        try:
            return run(args, work, db, base, serve, trials, parallelism, seconds)
        finally:
            if serve.poll() is None:
                serve.terminate()
                serve.wait(60)
            log.close()


def run(args: argparse.Namespace, work: Path, db: str, base: str, serve: subprocess.Popen[str],
        trials: int, parallelism: int, seconds: float) -> int:
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if serve.poll() is not None or time.monotonic() > deadline:
            print((work / "serve.log").read_text(), file=sys.stderr)
            return 1
        time.sleep(0.2)
    proc = psutil.Process(serve.pid)
    if args.profile:
        subprocess.Popen(["py-spy", "record", "-p", str(serve.pid), "-d", "40", "-f", "raw", "-o",
                          str(ROOT / "benchmarks" / "results" / "service_profile.txt")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    names = [f"bench-{i:02d}" for i in range(args.experiments)]
    cpu0 = proc.cpu_times()
    load0 = os.getloadavg()[0]
    t_submit = time.time()
    with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        for n in names:
            r = c.post(base + "/api/experiments", json={"spec": spec_text(n, trials, parallelism, seconds, args.jitter),
                                                         "spec_dir": str(work)})
            if r.status_code != 201:
                print(r.text, file=sys.stderr)
                return 1
    sampler = ApiSampler(base, names, args.api_interval)
    sampler.start()
    store = Store(db)
    steady: dict[str, float] = {}
    total = trials * len(names)
    marks: list[tuple[int, float]] = []  # (trials ended, service CPU seconds) at 10% and at 90% of the trials
    while True:
        listed = store.list_experiments()
        exps = {e.name: e for e, _ in listed}
        states = [exps[n].status.value for n in names]
        ended = sum(n for e, counts in listed if e.name in exps for k, n in counts.items()
                    if k in ("COMPLETED", "FAILED", "ABANDONED", "EARLY_STOPPED"))
        if len(marks) < 2 and ended >= total * (0.1 if not marks else 0.9):
            c = proc.cpu_times()
            marks.append((ended, c.user + c.system))
        if all(s in ("COMPLETED", "FAILED", "STOPPED") for s in states):
            break
        if args.mode == "scale" and not steady:
            running = sum(c.get("RUNNING", 0) for _, c in store.list_experiments())
            if running >= len(names) * parallelism:  # every slot of the first wave is busy
                t1, c1 = time.time(), proc.cpu_times()
                time.sleep(8.0)
                c2 = proc.cpu_times()
                steady = {"seconds": time.time() - t1,
                          "cpu": (c2.user + c2.system) - (c1.user + c1.system),
                          "in_flight": sum(c.get("RUNNING", 0) for _, c in store.list_experiments())}
        if serve.poll() is not None:
            print("the service died", file=sys.stderr)
            return 1
        time.sleep(1.0)
    t_end = time.time()
    cpu1 = proc.cpu_times()
    sampler.done.set()
    sampler.join()
    rows = []
    created, writes = [], 0
    for n in names:
        exp = store.get_experiment(n)
        ts = store.list_trials(exp.id)
        done = [t for t in ts if t.status == TrialStatus.COMPLETED]
        start = min(t.started_at for t in ts if t.started_at).timestamp()  # type: ignore[union-attr]
        end = max(t.ended_at for t in ts if t.ended_at).timestamp()  # type: ignore[union-attr]
        work_s = sum(own_seconds(t.parameters, seconds, args.jitter) for t in done)
        overhead = ((end - start) * parallelism - work_s) / max(1, len(ts))
        rows.append({"experiment": n, "status": exp.status.value, "completed": len(done),
                     "makespan_s": end - start, "overhead_ms_per_trial": overhead * 1000,
                     **slot_costs(done, parallelism, seconds, args.jitter)})
        created += [t.created_at.timestamp() for t in ts]
        writes += len(ts) * 3 + store.count_observations(exp.id) + len(store.events(exp.id, limit=1_000_000))
    store.close()
    cpu_s = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    api = {k: {"p50_ms": pct(v, 0.5) * 1000, "p95_ms": pct(v, 0.95) * 1000, "n": len(v)}
           for k, v in sampler.times.items()}
    result: dict[str, Any] = {"mode": args.mode, "database": db.split(":")[0], "experiments": len(names),
                              "trials": total, "parallelism": parallelism, "trial_seconds": seconds, "jitter": args.jitter,
                              "wall_s": t_end - t_submit, "service_cpu_s": cpu_s, "api": api,
                              "api_errors": sampler.errors, "per_experiment": rows,
                              "load_average": {"start": load0, "end": os.getloadavg()[0]}}
    ok = all(r["completed"] == trials for r in rows)
    over = [float(r["overhead_ms_per_trial"]) for r in rows]
    print(f"{args.mode} on {result['database']}: {len(names)} experiments x {trials} trials "
          f"(parallelism {parallelism}, {seconds:g} s each), all completed: {ok}, wall {t_end - t_submit:.0f} s, "
          f"load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    if len(marks) == 2 and marks[1][0] > marks[0][0]:
        # without the one-time costs (imports, building each experiment's optimizer, the
        # last trials' wind-down): what each further trial costs the service
        result["steady_cpu_ms_per_trial"] = (marks[1][1] - marks[0][1]) / (marks[1][0] - marks[0][0]) * 1000
    if args.mode == "overhead":
        result["overhead_ms_per_trial"] = {"median": statistics.median(over), "max": max(over)}
        slot = [float(r["slot_ms_per_trial"]) for r in rows]
        result["slot_ms_per_trial"] = {"median": statistics.median(slot), "max": max(slot),
                                       "inside_ms_median": statistics.median(float(r["inside_ms"]) for r in rows),
                                       "refill_ms_median": statistics.median(float(r["refill_ms"]) for r in rows)}
        print(f"overhead per trial: median {statistics.median(over):.1f} ms, max {max(over):.1f} ms "
              f"(slot time beyond the trials' own {seconds:g} s); service CPU {cpu_s / total * 1000:.1f} ms per trial"
              + (f", {result['steady_cpu_ms_per_trial']:.1f} ms per trial from 10% to 90% of the trials"
                 if "steady_cpu_ms_per_trial" in result else ""))
        sl = result["slot_ms_per_trial"]
        print(f"slot cost per trial (idle tail slots not counted): median {sl['median']:.1f} ms, max {sl['max']:.1f} ms "
              f"(inside the trial's record {sl['inside_ms_median']:.1f} ms, refilling the slot {sl['refill_ms_median']:.1f} ms)")
    else:
        first_wave = sorted(created)[: len(names) * parallelism]
        span = first_wave[-1] - first_wave[0]
        result.update(proposals_per_s=len(first_wave) / span if span > 0 else None,
                      store_rows_per_s=writes / (t_end - t_submit), steady=steady)
        if steady:
            ticks = steady["seconds"] / 0.25 * len(names)
            result["cpu_ms_per_tick"] = steady["cpu"] / ticks * 1000
            print(f"{steady['in_flight']} trials in flight: service CPU {steady['cpu'] / steady['seconds']:.2f} s/s, "
                  f"{result['cpu_ms_per_tick']:.2f} ms per experiment-loop tick (0.25 s ticks)")
        print(f"first wave proposed at {result['proposals_per_s']:.0f} trials/s; "
              f"{result['store_rows_per_s']:.0f} store rows/s over the run")
    retries = (work / "serve.log").read_text().count("retrying in")
    result["store_retries"] = retries
    print(f"store operations retried by the service (database busy or unreachable): {retries}")
    print("API while they ran: " + ", ".join(f"{k} p50 {v['p50_ms']:.0f} ms / p95 {v['p95_ms']:.0f} ms"
                                              for k, v in api.items()) + f"; errors {sampler.errors}")
    out = args.out or str(ROOT / "benchmarks" / "results" / f"service_{args.mode}_{result['database']}.json")
    Path(out).write_text(json.dumps(result, indent=1))
    return 0 if ok and sampler.errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
