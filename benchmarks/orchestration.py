"""Orchestration cost: what nasctl spends around the trials, per trial and per poll.

    python benchmarks/orchestration.py [--only loop,store,tensorboard,web] [--out DIR]

Prints one markdown table per part and writes raw JSON to
benchmarks/results/orchestration.json:

- loop: the orchestrator loop itself, without candidate generation: 1,000
  no-op trials, 100 in flight, on the in-process trial backend (each trial is
  a function evaluated in the orchestrator's process that writes its metrics
  as TensorBoard events, like a real trial). The optimizer hands out
  precomputed points, so what is timed is the loop's own work: store writes,
  dispatch, polling, metric reads. CPU and wall time per trial.
- store: the database writes of one trial's life (record the candidate,
  mark it running, two metric reads' observations and reader state, finish it;
  each writes its event) on SQLite and PostgreSQL.
- tensorboard: one incremental poll of a short log and of a 10,000-step log,
  when nothing is new and when one step was appended; next to a full re-read
  and TensorBoard's EventMultiplexer (what Ax's TensorboardMetric does on
  every fetch).
- web: `benchmarks/web_bench.py` (dashboard endpoints on 100,000 trials), run
  as is; its own table is printed.
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
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PG_ADMIN = os.environ.get("NASCTL_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

from benchmarks import args as argtypes  # noqa: E402
from nasctl.metrics.tensorboard import TensorBoardReader, read_scalars  # noqa: E402
from nasctl.spec import parse_spec, spec_to_dict  # noqa: E402
from nasctl.store import Store  # noqa: E402
from nasctl.types import Observation, TrialStatus  # noqa: E402


def ms(x: float) -> str:
    return f"{1000 * x:,.2f} ms" if x < 0.1 else f"{1000 * x:,.0f} ms"


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def verdict(ok: bool) -> str:
    return "met" if ok else "**MISSED**"


# --- store -----------------------------------------------------------------------
STORE_SPEC = """
name: store-bench
search_space: {x: {type: float, low: 0, high: 1}, width: {type: int, low: 8, high: 512}}
objectives: {val_acc: {goal: maximize}, num_params: {goal: minimize}}
budget: {max_trials: 100000, parallelism: 100}
trial: {script: train.py}
"""


def one_trial_life(store: Store, exp_id: int, index: int) -> None:
    """The store calls the loop makes for one trial, in its order."""
    t = store.add_trial(exp_id, index, {"x": 0.5, "width": 64}, "Sobol", f"store-bench-{index}", f"/tmp/t{index}")
    t = store.mark_trial_running(t.id, f"local_cwd://torchx/store-bench-{index}", "local_cwd",
                                 {"state_dir": f"/tmp/t{index}/job", "submitted": time.time()})
    curve = [Observation(m, s, 0.5 + 0.01 * s, time.time()) for s in range(3) for m in ("train_loss", "val_acc")]
    store.add_observations(t.id, curve, reader_state={"offsets": {"events.out.tfevents.1": 1234}, "summary": {}})
    final = [Observation(m, 3, v, time.time()) for m, v in
             (("val_acc", 0.9), ("num_params", 5000.0), ("model_bytes", 20000.0), ("latency_ms", 0.03))]
    store.finish_trial(t.id, TrialStatus.COMPLETED, {"val_acc": 0.9, "num_params": 5000.0},
                       observations=final, reader_state={"offsets": {"events.out.tfevents.1": 2345}, "summary": {}})


def bench_store(url: str, n: int) -> dict[str, Any]:
    store = Store(url, create=True)
    try:
        exp = store.create_experiment(f"store-bench-{uuid.uuid4().hex[:6]}",
                                      spec_to_dict(parse_spec(STORE_SPEC)), "/tmp/store-bench")
        for i in range(10):  # warm up connections and statement caches
            one_trial_life(store, exp.id, i)
        times = []
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i in range(10, 10 + n):
            s = time.perf_counter()
            one_trial_life(store, exp.id, i)
            times.append(time.perf_counter() - s)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        store.close()
    return {"trials": n, "median": statistics.median(times), "p95": _q(times, 0.95),
            "mean": wall / n, "cpu_per_trial": cpu / n, "load": load()}


def _q(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def pg_database() -> tuple[str, Callable[[], None]]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"nasctl_bench_{uuid.uuid4().hex[:8]}"
    engine = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(text(f"CREATE DATABASE {name}"))

    def drop() -> None:
        with engine.connect() as c:
            c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        engine.dispose()

    return make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False), drop


def part_store(n: int, tmp: Path) -> tuple[str, dict[str, Any]]:
    results = {"sqlite": bench_store(f"sqlite:///{tmp / 'store.db'}", n)}
    url, drop = pg_database()
    try:
        results["postgresql"] = bench_store(url, n)
    finally:
        drop()
    lines = [f"Store cost of one trial's life ({n} trials after 10 warm-up ones), the loop's calls in its "
             "order: record the candidate, mark it running, one metric read while it runs (6 observations + "
             "reader state), finish it with the last read (4 observations + reader state); 4 transactions, "
             "3 events:", "",
             "| database | median per trial | p95 | mean (wall) | CPU per trial | load | target |",
             "|---|---:|---:|---:|---:|---|---|"]
    for db, r in results.items():
        target = f"< 5 ms: {verdict(r['mean'] < 0.005)}" if db == "sqlite" else "-"
        lines.append(f"| {db} | {ms(r['median'])} | {ms(r['p95'])} | {ms(r['mean'])} | "
                     f"{ms(r['cpu_per_trial'])} | {r['load']} | {target} |")
    return "\n".join(lines), results


# --- tensorboard ----------------------------------------------------------------
def write_log(log_dir: Path, steps: int) -> Any:
    """An event file with `steps` steps of 3 scalars; returns the open writer."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    w = EventFileWriter(str(log_dir), max_queue_size=100_000, flush_secs=3600)
    for s in range(steps):
        w.add_event(_event(Event, Summary, s))
    w.flush()
    return w


def _event(Event: Any, Summary: Any, step: int) -> Any:
    values = [Summary.Value(tag=t, simple_value=v) for t, v in
              (("train_loss", 1.0 / (step + 1)), ("val_loss", 1.1 / (step + 1)), ("val_acc", step / (step + 1)))]
    return Event(step=step, wall_time=time.time(), summary=Summary(value=values))


def multiplexer_read(log_dir: Path) -> None:
    from tensorboard.backend.event_processing import plugin_event_multiplexer as em

    mul = em.EventMultiplexer(max_reload_threads=20)
    mul.AddRunsFromDirectory(str(log_dir), None)
    mul.Reload()


def bench_tb(tmp: Path, steps: int, polls: int) -> dict[str, Any]:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    d = tmp / f"tb_{steps}"
    w = write_log(d, steps)
    reader = TensorBoardReader(d)
    first = reader.read_new()
    assert len(first) == 3 * steps, len(first)
    idle = []
    for _ in range(polls):
        s = time.perf_counter()
        got = reader.read_new()
        idle.append(time.perf_counter() - s)
        assert not got
    new_step = []
    for k in range(polls):
        w.add_event(_event(Event, Summary, steps + k))
        w.flush()
        s = time.perf_counter()
        got = reader.read_new()
        new_step.append(time.perf_counter() - s)
        assert len(got) == 3, got
    full = []
    for _ in range(max(3, polls // 20)):
        s = time.perf_counter()
        read_scalars(d)
        full.append(time.perf_counter() - s)
    mux = []
    for _ in range(3):
        s = time.perf_counter()
        multiplexer_read(d)
        mux.append(time.perf_counter() - s)
    w.close()
    return {"steps": steps, "idle": statistics.median(idle), "one_new": statistics.median(new_step),
            "full_reread": statistics.median(full), "multiplexer": statistics.median(mux), "load": load()}


def part_tensorboard(tmp: Path, polls: int) -> tuple[str, dict[str, Any]]:
    results = {str(n): bench_tb(tmp, n, polls) for n in (10, 10_000)}
    short, long = results["10"], results["10000"]
    lines = [f"TensorBoard read cost per poll (median of {polls} polls; 3 scalars per step):", "",
             "| log | poll, nothing new | poll, one new step | full re-read (nasctl reader) "
             "| EventMultiplexer reload (Ax's TensorboardMetric) | load |",
             "|---|---:|---:|---:|---:|---|"]
    for n, r in results.items():
        lines.append(f"| {int(n):,} steps | {ms(r['idle'])} | {ms(r['one_new'])} | {ms(r['full_reread'])} | "
                     f"{ms(r['multiplexer'])} | {r['load']} |")
    ratio_idle = long["idle"] / short["idle"]
    ratio_new = long["one_new"] / short["one_new"]
    ok = ratio_idle < 2 and ratio_new < 2
    lines += ["", f"10,000-step / 10-step poll cost: {ratio_idle:.2f}x (nothing new), {ratio_new:.2f}x "
              f"(one new step). Target, independent of log length (< 2x): {verdict(ok)}."]
    return "\n".join(lines), results


# --- web ------------------------------------------------------------------------
def part_web() -> tuple[str, dict[str, Any]]:
    db = ROOT / "web_bench.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    before = load()
    try:
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "web_bench.py")], cwd=str(ROOT), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    if proc.returncode != 0:
        raise SystemExit(f"web_bench.py failed:\n{proc.stderr[-2000:]}")
    return proc.stdout.strip(), {"stdout": proc.stdout, "load_before": before, "load_after": load()}


PARTS = ("loop", "store", "tensorboard", "web")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", type=argtypes.names(PARTS), default=list(PARTS), help="comma-separated parts")
    p.add_argument("--trials", type=argtypes.positive_int, default=1000, help="loop: no-op trials")
    p.add_argument("--in-flight", type=argtypes.positive_int, default=100, help="loop: trials in flight")
    p.add_argument("--store-trials", type=argtypes.positive_int, default=300)
    p.add_argument("--polls", type=argtypes.positive_int, default=200)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "orchestration.json"))
    args = p.parse_args()
    parts = args.only
    out: dict[str, Any] = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                    "cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    with tempfile.TemporaryDirectory(prefix="nasctl-orch-") as tmpdir:
        tmp = Path(tmpdir)
        for part in parts:
            print(f"measuring {part}...", file=sys.stderr, flush=True)
            if part == "loop":
                from benchmarks.loop_bench import part_loop

                text, raw = part_loop(args.trials, args.in_flight, tmp)
            elif part == "store":
                text, raw = part_store(args.store_trials, tmp)
            elif part == "tensorboard":
                text, raw = part_tensorboard(tmp, args.polls)
            elif part == "web":
                text, raw = part_web()
            else:  # not reached: --only admits PARTS only
                raise AssertionError(part)
            print(f"### {part}\n\n{text}\n", flush=True)
            out[part] = raw
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"raw results: {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
