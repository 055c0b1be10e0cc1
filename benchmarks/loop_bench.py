"""Loop overhead per trial without candidate generation (part of `orchestration.py`).

No-op trials (`noop` below: returns two constants) run on the in-process
backend, and the optimizer is `PrecomputedOptimizer`, which hands out points
drawn before the run, so generation costs nothing and the time measured is
the loop's own: store writes, dispatch, status polls, metric reads (plus the
trials' own small TensorBoard writes, which happen in the same process).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nasctl.orchestration.generator import CandidateGenerator
from nasctl.orchestration.loop import Orchestrator
from nasctl.optimizer.ax_optimizer import Candidate
from nasctl.runners import get_runner
from nasctl.spec import parse_spec, spec_to_dict
from nasctl.store import Store


def noop(params: Mapping[str, Any]) -> dict[str, float]:
    """A trial that does nothing but report two metrics."""
    return {"a": float(params["x"]), "b": 1.0 - float(params["x"])}


class PrecomputedOptimizer:
    """The `Optimizer` protocol over a fixed list of points: a benchmark
    instrument that makes candidate generation free."""

    log_scale: tuple[str, ...] | None = None  # no model

    def __init__(self, n: int, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.points = [{"x": rng.random()} for _ in range(n)]
        self.next = 0

    def complete(self, index: int, values: Mapping[str, float]) -> None:
        pass

    def fail(self, index: int, reason: str | None = None) -> None:
        pass

    def abandon(self, index: int) -> None:
        pass

    def attach(self, parameters: Mapping[str, Any]) -> int:
        self.next += 1
        return self.next - 1

    def generate(self, n: int) -> list[Candidate]:
        out = [Candidate(i, self.points[i], "precomputed") for i in range(self.next, min(self.next + n, len(self.points)))]
        self.next += len(out)
        return out


def run_loop(trials: int, in_flight: int, tmp: Path, profile: bool = False) -> dict[str, Any]:
    spec = parse_spec(f"""
name: loop-bench
search_space: {{x: {{type: float, low: 0, high: 1}}}}
objectives: {{a: {{goal: maximize}}, b: {{goal: maximize}}}}
budget: {{max_trials: {trials}, parallelism: {in_flight}}}
trial: {{function: "benchmarks.loop_bench:noop"}}
runner: {{scheduler: inprocess, cfg: {{workers: 4}}}}
""")
    tag = f"{trials}-{in_flight}-{time.monotonic_ns()}"
    store = Store(f"sqlite:///{tmp / f'loop-{tag}.db'}", create=True)
    exp = store.create_experiment("loop-bench", spec_to_dict(spec), str(tmp / f"work-{tag}"))
    gen = CandidateGenerator(lambda: PrecomputedOptimizer(trials))
    orch = Orchestrator(store, exp, spec, get_runner("inprocess", {"workers": 4}), gen)
    prof = cProfile.Profile() if profile else None
    cpu0, t0 = time.process_time(), time.perf_counter()
    if prof:
        prof.enable()
    summary = orch.run()
    if prof:
        prof.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    store.close()
    if summary.counts["COMPLETED"] != trials:
        raise SystemExit(f"loop benchmark: {summary.counts} (expected {trials} completed): {summary.reason}")
    out: dict[str, Any] = {"trials": trials, "in_flight": in_flight, "wall": wall, "cpu": cpu,
                           "wall_per_trial": wall / trials, "cpu_per_trial": cpu / trials,
                           "poll_interval": orch.poll_interval}
    if prof:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(25)
        out["profile"] = buf.getvalue()
    return out


def part_loop(trials: int, in_flight: int, tmp: Path) -> tuple[str, dict[str, Any]]:
    import os

    run_loop(50, 10, tmp)  # warm-up: imports, first database
    r = run_loop(trials, in_flight, tmp)
    r["load"] = "/".join(f"{x:.2f}" for x in os.getloadavg())
    ok = r["cpu_per_trial"] < 0.020
    text = "\n".join([
        f"Loop overhead without generation: {trials:,} no-op trials, {in_flight} in flight, in-process backend, "
        "precomputed candidates, SQLite:", "",
        "| trials | in flight | wall | CPU | wall per trial | CPU per trial | load | target (< 20 ms per trial) |",
        "|---:|---:|---:|---:|---:|---:|---|---|",
        f"| {trials:,} | {in_flight} | {r['wall']:.1f} s | {r['cpu']:.1f} s | {1000 * r['wall_per_trial']:.1f} ms | "
        f"{1000 * r['cpu_per_trial']:.1f} ms | {r['load']} | {'met' if ok else '**MISSED**'} (CPU) |",
    ])
    return text, r
