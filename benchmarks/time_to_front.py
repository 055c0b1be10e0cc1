"""Time to the front on a shared GPU cluster: hypervolume against GPU-hours, per method.

Every method searches the same tabulated NAS problem (benchmarks/nas_tables.py:
a learning curve per configuration, its parameters, latency and measured
seconds per epoch) on the same simulated cluster (nasctl/runners/simcluster.py):
`--gpus` devices, one trial per device, trials that wait for a free device,
epochs that last what the table measured, and a seeded preemption hazard per
device-hour, set so that `--preempt-rate` of the full trainings of the table's
median configuration are preempted. The table's times (measured on a CPU) are
scaled so that the median configuration's full training takes `--full-hours`
device-hours (1 by default); relative costs stay the measured ones. A preempted attempt loses the epoch in
progress and is requeued (`REQUEUE_DELAY` seconds, as Slurm's BeginTime holds
a requeued job). A configuration meets the same preemptions in every method of a
seed (`simcluster.preemption_key`).

Methods:

- `nasctl`: nasctl's real loop (`start_experiment`: SQLite store, generator
  thread, TensorBoard files read back) with the `simulated` runner: asynchronous
  BO with the running trials as pending points, multi-fidelity
  (`optimizer.fidelity` on epochs, eta 3, rungs at E/9, E/3 and E epochs,
  promotions continue from checkpoints)
  and retries from checkpoints;
- `nasctl-full`: the same at full fidelity (every trial trained E epochs; a
  preempted trial still resumes from its checkpoint);
- `ax`: a stock `ax.api.Client` (its default strategy, the running trials as
  pending points), full fidelity; a preempted trial starts over (what Ax's
  orchestrator with TorchX does: it keeps no checkpoint contract);
- `moasha`: Syne Tune's MO-ASHA (stopping variant, the same rungs as
  nasctl's), in Syne Tune's own virtual environment
  (benchmarks/synetune_cluster.py, `NASCTL_SYNETUNE_PYTHON`) on the same cluster
  engine; a preempted trial is an error Syne Tune does not run again;
- `tpe`: Optuna TPE with the constant liar, full fidelity; a preempted trial is
  failed and requeued by Optuna's retry callback (`RetryFailedTrialCallback`,
  named `RetryHeartbeatStaleTrialCallback` in Optuna 5), from scratch;
- `random`: configurations drawn uniformly from the grid, full fidelity,
  starting over after a preemption.

Each run spends `--budget` full trainings of the median configuration in
device-seconds (every method's budget is the same number of GPU-hours); nothing
new starts once it is spent, and what runs then is cancelled. Hypervolumes count
completed full-fidelity results only, normalised by the table's maximal
hypervolume, against the table's reference point.

    python benchmarks/time_to_front.py --problems mlp_digits,cnn_mnist1d --seeds 0-9 \\
        --methods nasctl,nasctl-full,ax,tpe,random --gpus 8 --preempt-rate 0.1 --budget 64 \\
        --out benchmarks/results/time_to_front
    python benchmarks/time_to_front.py --report --out benchmarks/results/time_to_front \\
        --plot docs/img/time_to_front.png

`<out>/summary.json` is a list of {"problem", "peer", "ratio", "seeds"}, one row
per problem and peer (ax, tpe, random; nasctl-full is reported beside them as an
ablation): per seed, the GPU-hours the peer needed to reach its own final
hypervolume divided by those nasctl needed to reach it (0 where nasctl never
did within the budget); `ratio` is their mean over `seeds`.

`<out>/trajectories.json` keeps every run's trajectory and counts (`compact`), a few
kB a run, where its own file holds every job. The repository keeps it beside the
summary, so that a method run again (nasctl after a change to its defaults, with
`--force --methods nasctl`) is summarised against the peers' kept runs without
running them again, and so that a grid can be completed a few seeds at a time.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import args as bargs
from benchmarks.problems import Problem, hypervolume
from nasctl.runners.simcluster import SimCluster, SimJob, hazard_for_share, preemption_after, preemption_key

METHODS = ("nasctl", "nasctl-full", "ax", "moasha", "tpe", "random")
FULL_ONLY = {"nb201": ("nb201_2obj", "benchmarks.problems:nb201_4obj", "train_s")}
"""Problems without learning curves: (scoring problem, trial.function with the cost, cost metric).
NAS-Bench-201 CIFAR-10 (val_error, model_mb), its seed-averaged training time as the cost."""
CURVES_ONLY = ("nasctl-full", "moasha")
"""Methods that need learning curves (on NAS-Bench-201 nasctl runs at full fidelity anyway)."""
PEERS = ("ax", "moasha", "tpe", "random")
SYNETUNE_PYTHON = os.environ.get("NASCTL_SYNETUNE_PYTHON", "/work/venv-synetune/bin/python")
ABLATIONS = ("nasctl-full", "nasctl@no-untried")
REQUEUE_DELAY = 120.0
ETA = 3
RUNGS = 3
ATTEMPT = "__attempt__"
"""The key an ask adds to a configuration that retries an earlier trial: its attempt number."""
"""Rungs of the multi-fidelity methods (nasctl, MO-ASHA): E/9, E/3 and E epochs."""

Ask = Callable[[int], list[tuple[Any, dict[str, Any]]]]


@dataclass(frozen=True)
class Setup:
    """One run's cluster and budget."""

    problem: str
    seed: int
    gpus: int = 8
    preempt_share: float = 0.1
    budget: float = 64.0  # full trainings of the median configuration
    full_hours: float = 1.0  # device-hours of the median configuration's full training

    @property
    def tabulated(self) -> bool:
        """A table of nasctl's own with learning curves (else NAS-Bench-201: final values only)."""
        return self.problem not in FULL_ONLY

    @property
    def table(self) -> str:
        from benchmarks.nas_tables import _split

        return _split(self.problem)[0] if self.tabulated else self.problem

    @property
    def epochs(self) -> int:
        """Epochs of a full training; 1 (one step) for a problem without curves."""
        from benchmarks.nas_tables import TABLES

        return TABLES[self.table].max_epochs if self.tabulated else 1

    def measured_full_seconds(self) -> float:
        """Seconds the table gives a full training of its median configuration."""
        if not self.tabulated:
            from benchmarks.problems import _table

            rows, _ = _table("nb201")
            return statistics.median(r["train_time"] for r in rows.values())
        from benchmarks.nas_tables import load_table

        return self.epochs * statistics.median(r.seconds_per_epoch for r in load_table(self.table).values())

    @property
    def time_scale(self) -> float:
        """What the table's seconds are multiplied by: its median full training takes `full_hours`."""
        return self.full_hours * 3600.0 / self.measured_full_seconds()

    def full_seconds(self) -> float:
        """Seconds of a full training of the table's median configuration on the cluster."""
        return self.full_hours * 3600.0

    def hazard(self) -> float:
        """Preemptions per device-hour: `preempt_share` of median full trainings are preempted."""
        return hazard_for_share(self.preempt_share, self.full_seconds())

    def budget_seconds(self) -> float:
        return self.budget * self.full_seconds()

    def problem_obj(self) -> Problem:
        if not self.tabulated:
            from benchmarks.problems import get_problem as table_problem

            return table_problem(FULL_ONLY[self.problem][0])
        from benchmarks.nas_tables import get_problem

        return get_problem(self.problem)

    def function(self) -> str:
        """The `trial.function` nasctl runs: the problem's, with the cost column among its metrics."""
        return FULL_ONLY[self.problem][1] if not self.tabulated else self.problem_obj().function

    def cost(self, params: Mapping[str, Any], epoch: int) -> float:
        """Cumulative training seconds of `params` after `epoch` epochs (0 at 0)."""
        if epoch <= 0:
            return 0.0
        if not self.tabulated:
            from benchmarks.problems import nb201_4obj

            return epoch * nb201_4obj(params)[FULL_ONLY[self.problem][2]]
        from benchmarks.nas_tables import lookup

        return lookup(self.table, {**params, "epochs": epoch})["train_seconds"]

    def full_parameters(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A configuration as nasctl's full-fidelity trials carry it (with `epochs` where there are curves)."""
        return {**params, "epochs": self.epochs} if self.tabulated else dict(params)

    def epoch_seconds(self, params: Mapping[str, Any], epoch: int) -> float:
        """Seconds of epoch `epoch` of `params`, as the simulated runner takes them from the cost column."""
        return self.time_scale * max(0.0, self.cost(params, epoch) - self.cost(params, epoch - 1))


# --- nasctl -------------------------------------------------------------------------------
def nasctl_spec(setup: Setup, full: bool) -> dict[str, Any]:
    problem, e = setup.problem_obj(), setup.epochs
    space = dict(problem.search_space)
    optimizer: dict[str, Any] = {"method": "auto", "seed": setup.seed}
    cfg: dict[str, Any] = {"seed": setup.seed, "devices": list(range(setup.gpus)), "preempt_rate": setup.hazard(),
                           "requeue_delay": REQUEUE_DELAY, "time_scale": setup.time_scale}
    if not setup.tabulated:  # no curves: one step, its cost the table's training time
        cfg["duration_metric"] = FULL_ONLY[setup.problem][2]
    elif full:
        space["epochs"] = {"type": "fixed", "value": e}
        cfg.update(epochs_parameter="epochs", duration_metric="train_seconds")
    else:
        optimizer["fidelity"] = {"parameter": "epochs", "min": rungs(e)[0], "max": e, "eta": ETA}
        cfg.update(epochs_parameter="epochs", duration_metric="train_seconds")
    return {
        "name": f"ttf-{setup.problem}-{'full' if full else 'mf'}-{setup.seed}".replace("_", "-"),
        "search_space": space,
        "objectives": {o: {"goal": "minimize", "threshold": r} for o, r in zip(problem.objectives, problem.ref)},
        # the GPU-hours a user would give: nothing new starts once they are spent (the
        # results within the budget are those of a run stopped there), and cost-aware
        # proposals (`optimizer.cost_aware`) cool by the share spent
        "budget": {"max_trials": 100_000, "parallelism": setup.gpus, "max_failures": 0,
                   "max_gpu_hours": setup.budget_seconds() / 3600.0},
        "trial": {"function": setup.function(), "resources": {"gpu": 1}, "max_retries": 20},
        "optimizer": optimizer,
        "runner": {"scheduler": "simulated", "cfg": cfg},
    }


def run_nasctl(setup: Setup, full: bool) -> dict[str, Any]:
    """nasctl's real loop on the simulated cluster until the budget's device-seconds are
    spent (then stopped, running trials cancelled); its jobs from their outcome files."""
    from nasctl.orchestration.control import request_stop, start_experiment
    from nasctl.runners.simulated import cluster_accounting
    from nasctl.spec import parse_spec
    from nasctl.store import Store

    spec = parse_spec(json.dumps(nasctl_spec(setup, full)), source="<benchmark>")
    budget = setup.budget_seconds()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nasctl-ttf-") as tmp:
        store = Store(f"sqlite:///{tmp}/nasctl.db", create=True)
        work = str(Path(tmp) / spec.name)
        seen = {"ended": -1, "stopped": False}

        def on_progress(progress: Any) -> None:
            ended = sum(v for k, v in progress.counts.items() if k not in ("RUNNING", "CANDIDATE"))
            if seen["stopped"] or ended == seen["ended"]:
                return
            seen["ended"] = ended
            if sum(j["gpu_seconds"] for j in cluster_accounting(work)) >= budget:
                seen["stopped"] = True
                request_stop(store, spec.name, cancel=True)

        summary = start_experiment(store, spec, tmp, on_progress=on_progress)
        if not seen["stopped"] and summary.status.value != "COMPLETED":  # a signal, a failure: no result
            raise RuntimeError(f"nasctl run ended {summary.status.value}: {summary.reason}")
        jobs = cluster_accounting(work)
        generation = list(summary.generation_seconds)
    return {"jobs": [_job_row(j) for j in jobs], "status": summary.status.value, "reason": summary.reason,
            "gen_seconds": generation, "wall_seconds": time.perf_counter() - t0}


def _job_row(j: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("parameters", "attempt", "submitted", "running_since", "ended", "end", "first_epoch", "epochs_done",
            "last_epoch", "gpus", "gpu_seconds", "lost_seconds", "values")
    return {k: j.get(k) for k in keep}


# --- peers on the same cluster ---------------------------------------------------------------
def simulate_peer(setup: Setup, ask: Ask, tell: Callable[[Any, Mapping[str, float]], None],
                  preempted: Callable[[Any], bool]) -> dict[str, Any]:
    """Drive an ask/tell optimizer at full fidelity on the simulated cluster: every free
    device is filled (one ask for all of them), results are told in the order trials
    end, a preempted trial is given to `preempted(token)`, which returns whether the
    same trial starts over (requeued after REQUEUE_DELAY on its device) or frees its
    device (the optimizer requeues it itself, as Optuna's retry callback does: its ask
    then marks the configuration with its attempt number, `ATTEMPT`, so that it meets
    that attempt's preemption draw and waits the requeue delay)."""
    cluster, e, budget, problem = SimCluster(), setup.epochs, setup.budget_seconds(), setup.problem_obj()
    hazard, free = setup.hazard(), [str(d) for d in range(setup.gpus)]
    running: dict[str, tuple[Any, dict[str, Any], int, str]] = {}
    rows: list[dict[str, Any]] = []
    gen: list[float] = []
    now, n, stopped = 0.0, 0, False

    def submit(token: Any, params: dict[str, Any], attempt: int, device: str, delay: float) -> None:
        nonlocal n
        full = setup.full_parameters(params)
        key = f"{n}-a{attempt}"
        n += 1
        cluster.add(SimJob(key, now, 0, e, functools.partial(setup.epoch_seconds, dict(params)),
                           delay=delay, devices=(device,), gpus=1,
                           preempt_after=preemption_after(preemption_key(full, attempt), setup.seed, hazard, 1)))
        running[key] = (token, full, attempt, device)

    while True:
        if not stopped and free:
            t0 = time.perf_counter()
            got = ask(len(free))
            gen.append(time.perf_counter() - t0)
            for token, params in got:
                attempt = int(params.pop(ATTEMPT, 1))  # > 1: a retry the optimizer asked for itself
                submit(token, params, attempt, free.pop(0), REQUEUE_DELAY if attempt > 1 else 0.0)
        t = cluster.next_time()
        if t is None:
            break
        now = t
        for ev in cluster.step(now):
            token, params, attempt, device = running[ev.job.key]
            if ev.kind == "epoch" and ev.final:
                del running[ev.job.key]
                values = problem.evaluate(params)
                rows.append(_sim_row(ev.job, params, attempt, values))
                tell(token, values)
                free.append(device)
            elif ev.kind == "preempt":
                del running[ev.job.key]
                rows.append(_sim_row(ev.job, params, attempt, None))
                if preempted(token):
                    submit(token, {k: v for k, v in params.items() if k in problem.search_space}, attempt + 1,
                           device, REQUEUE_DELAY)
                else:
                    free.append(device)
        spent = sum(r["gpu_seconds"] for r in rows) + sum(
            max(0.0, now - j.running_since) for j in cluster.active() if j.running_since is not None)
        if not stopped and spent >= budget:
            stopped = True
            for key in list(running):
                cluster.cancel(key, now)
                _, params, attempt, _ = running.pop(key)
                rows.append(_sim_row(cluster.jobs[key], params, attempt, None))
    return {"jobs": rows, "gen_seconds": gen}


def _sim_row(job: SimJob, params: Mapping[str, Any], attempt: int,
             values: Mapping[str, float] | None) -> dict[str, Any]:
    return _job_row({**job.accounting(), "parameters": dict(params), "attempt": attempt,
                     "values": dict(values) if values is not None else None})


def rungs(epochs: int, eta: int = ETA, count: int = RUNGS) -> list[int]:
    """`count` rungs eta apart ending at `epochs` (27: 3, 9, 27; 9: 1, 3, 9), the lowest at least 1."""
    out = [epochs]
    while len(out) < count and out[0] // eta >= 1:
        out.insert(0, out[0] // eta)
    return out


def run_moasha(setup: Setup) -> dict[str, Any]:
    """Syne Tune's MO-ASHA in its own environment, given every configuration's curves and
    epoch seconds (benchmarks/synetune_cluster.py)."""
    import itertools

    from benchmarks.nas_tables import TABLES, lookup

    problem, e = setup.problem_obj(), setup.epochs
    grid = TABLES[setup.table].grid
    table = {}
    for config in itertools.product(*grid.values()):
        params = dict(zip(grid, config))
        per_epoch = [lookup(setup.table, {**params, "epochs": k}) for k in range(1, e + 1)]
        table[json.dumps(params, sort_keys=True)] = {
            "curves": {o: [m[o] for m in per_epoch] for o in problem.objectives},
            "seconds_per_epoch": setup.epoch_seconds(params, 1)}
    job = {"space": problem.search_space, "table": table, "objectives": list(problem.objectives), "epochs": e,
           "rungs": rungs(e), "eta": ETA, "gpus": setup.gpus, "hazard": setup.hazard(), "seed": setup.seed,
           "budget_seconds": setup.budget_seconds()}
    with tempfile.TemporaryDirectory(prefix="ttf-moasha-") as tmp:
        job_path, out_path = Path(tmp, "job.json"), Path(tmp, "out.json")
        job_path.write_text(json.dumps(job))
        script = Path(__file__).resolve().parent / "synetune_cluster.py"
        r = subprocess.run([SYNETUNE_PYTHON, str(script), str(job_path), str(out_path)], capture_output=True,
                           text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"MO-ASHA failed ({r.returncode}): {r.stderr[-3000:]}")
        return {"jobs": json.loads(out_path.read_text())["jobs"]}


def run_peer(setup: Setup, method: str) -> dict[str, Any]:
    problem = setup.problem_obj()
    if method == "moasha":
        return run_moasha(setup)
    if method == "random":
        rng = random.Random(setup.seed)

        def ask(n: int) -> list[tuple[Any, dict[str, Any]]]:
            return [(None, {k: rng.choice(p["values"]) for k, p in problem.search_space.items()}) for _ in range(n)]

        return simulate_peer(setup, ask, lambda token, values: None, lambda token: True)
    if method == "ax":
        from benchmarks.parallel import ax_ask_tell
        from benchmarks.sample_efficiency import _ax_client

        ask_ax, tell_ax = ax_ask_tell(problem, _ax_client(problem, setup.seed))
        return simulate_peer(setup, ask_ax, tell_ax, lambda token: True)
    if method == "tpe":
        import warnings

        import optuna
        from optuna.exceptions import ExperimentalWarning
        from optuna.storages import RetryHeartbeatStaleTrialCallback as RetryFailedTrialCallback

        warnings.filterwarnings("ignore", category=ExperimentalWarning)

        from benchmarks.sample_efficiency import _optuna_distributions

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(directions=["minimize"] * len(problem.objectives),
                                    sampler=optuna.samplers.TPESampler(seed=setup.seed, multivariate=True,
                                                                       constant_liar=True))
        dists, retry = _optuna_distributions(problem), RetryFailedTrialCallback(max_retry=None)

        def ask_tpe(n: int) -> list[tuple[Any, dict[str, Any]]]:
            out = []
            for _ in range(n):
                trial = study.ask(dists)
                params = dict(trial.params)
                # a retry the callback enqueued runs as the next attempt of the trial it retries
                params[ATTEMPT] = 1 + len(RetryFailedTrialCallback.retry_history(study.trials[trial.number]))
                out.append((trial, params))
            return out

        def tell_tpe(trial: Any, values: Mapping[str, float]) -> None:
            study.tell(trial, [values[o] for o in problem.objectives])

        def preempted_tpe(trial: Any) -> bool:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            retry(study, study.trials[trial.number])
            return False  # the retry is a new trial, asked for by the next free device

        return simulate_peer(setup, ask_tpe, tell_tpe, preempted_tpe)
    raise KeyError(f"unknown method {method!r}")


# --- scoring ---------------------------------------------------------------------------------
def trajectory(jobs: Sequence[Mapping[str, Any]], problem: Problem, epochs: int,
               budget_seconds: float) -> list[tuple[float, float]]:
    """(GPU-hours spent, hypervolume / max) after each full-fidelity result, in the order
    they arrived, up to the budget. Device time at an instant counts every job's
    running seconds up to it (exclusive devices: one device-second per second)."""
    spans = [(float(j["running_since"]), float(j["ended"]), float(j.get("gpus") or 1)) for j in jobs
             if j.get("running_since") is not None and j.get("ended") is not None]

    def spent(t: float) -> float:
        return sum(g * max(0.0, min(t, end) - start) for start, end, g in spans)

    done = sorted((float(j["ended"]), k, j["values"]) for k, j in enumerate(jobs)
                  if j.get("end") == "completed" and j.get("last_epoch") == epochs and j.get("values"))
    out, pts = [], []
    for t, _, values in done:
        used = spent(t)
        if used > budget_seconds + 1e-6:
            break
        pts.append([values[o] for o in problem.objectives])
        out.append((used / 3600.0, hypervolume(pts, problem.ref) / problem.max_hv))
    return out


def hv_at(traj: Sequence[tuple[float, float]], hours: float) -> float:
    return max([hv for h, hv in traj if h <= hours + 1e-12], default=0.0)


def hours_to(traj: Sequence[tuple[float, float]], hv: float) -> float | None:
    """GPU-hours at the first result with hypervolume >= hv (None if never)."""
    return next((h for h, v in traj if v >= hv - 1e-12), None)


def seed_ratio(nasctl: Sequence[tuple[float, float]], peer: Sequence[tuple[float, float]]) -> float:
    """The peer's GPU-hours to its own final hypervolume over nasctl's to the same (0 if never)."""
    if not peer:
        return math.inf if nasctl else 1.0
    final = peer[-1][1]
    theirs, ours = hours_to(peer, final), hours_to(nasctl, final)
    if ours is None or theirs is None:
        return 0.0
    return theirs / ours if ours > 0 else math.inf


# --- grid, summary, report --------------------------------------------------------------------
def result_path(out: Path, problem: str, method: str, seed: int) -> Path:
    return out / problem / method / f"seed{seed:02d}.json"


def run_one(setup: Setup, method: str, out: Path) -> Path:
    """Run `method` (`nasctl@VARIANT`: with an optimizer variant of benchmarks/ablation.py,
    applied in this process) and store its result."""
    t0 = time.perf_counter()
    base, _, variant = method.partition("@")
    if variant:
        from benchmarks.ablation import apply_variant

        apply_variant(variant)
    if base in ("nasctl", "nasctl-full"):
        res = run_nasctl(setup, full=base == "nasctl-full")
    else:
        res = run_peer(setup, method)
    problem = setup.problem_obj()
    traj = trajectory(res["jobs"], problem, setup.epochs, setup.budget_seconds())
    res.update(problem=setup.problem, method=method, seed=setup.seed, gpus=setup.gpus,
               preempt_share=setup.preempt_share, budget=setup.budget, full_hours=setup.full_hours,
               budget_gpu_hours=setup.budget_seconds() / 3600,
               hazard_per_gpu_hour=setup.hazard(), trajectory=traj, seconds=time.perf_counter() - t0,
               preempted_attempts=sum(1 for j in res["jobs"] if j["end"] == "preempted"),
               attempts=len(res["jobs"]))
    path = result_path(out, setup.problem, method, setup.seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res))
    return path


KEPT = ("problem", "method", "seed", "gpus", "preempt_share", "budget", "full_hours", "budget_gpu_hours",
        "attempts", "preempted_attempts")
"""What `trajectories.json` keeps of a run besides its trajectory: enough for the summary,
the report and the plot, a few kB a run where the run's own file (every job) is ~200 kB."""


def compact(result: Mapping[str, Any]) -> dict[str, Any]:
    """A run as `trajectories.json` keeps it: `KEPT` and the trajectory (6 decimals)."""
    return {k: result[k] for k in KEPT} | {
        "trajectory": [[round(h, 6), round(hv, 6)] for h, hv in result["trajectory"]]}


def load(out: Path) -> list[dict[str, Any]]:
    """Every run in `out`: its own file (`<problem>/<method>/seedNN.json`) where there is
    one, else its entry in `out/trajectories.json` (what an earlier full run kept, so a
    method run again is summarised against the peers' runs without running them again)."""
    runs = {(r["problem"], r["method"], r["seed"]): r
            for r in (json.loads(p.read_text()) for p in sorted(out.glob("*/*/seed*.json")))}
    kept = out / "trajectories.json"
    if kept.exists():
        for r in json.loads(kept.read_text()):
            runs.setdefault((r["problem"], r["method"], r["seed"]), r)
    return [runs[k] for k in sorted(runs)]


def summary(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per problem and peer (and ablation): the mean per-seed ratio, over the seeds
    both nasctl and the peer ran."""
    by = {(r["problem"], r["method"], r["seed"]): r for r in results}
    rows = []
    for problem in sorted({r["problem"] for r in results}):
        for peer in (*PEERS, *ABLATIONS):
            seeds = sorted(s for (p, m, s) in by if p == problem and m == peer and (p, "nasctl", s) in by)
            if not seeds:
                continue
            ratios = [seed_ratio(by[(problem, "nasctl", s)]["trajectory"], by[(problem, peer, s)]["trajectory"])
                      for s in seeds]
            rows.append({"problem": problem, "peer": peer, "ratio": statistics.fmean(ratios), "seeds": seeds,
                         "per_seed": ratios, "ablation": peer in ABLATIONS})
    return rows


def methods_in(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """The methods of `results`: METHODS' order first, variants after their method."""
    present = {r["method"] for r in results}
    return sorted(present, key=lambda m: (METHODS.index(m.partition("@")[0]), m))


def report(results: Sequence[Mapping[str, Any]]) -> str:
    """Markdown: per problem and method, mean hypervolume at 1/4, 1/2 and all of the budget,
    preempted attempts, and the ratios."""
    lines = ["| problem | method | seeds | HV @25% | HV @50% | HV @100% | preempted / attempts | ratio vs nasctl |",
             "|---|---|---|---|---|---|---|---|"]
    ratios = {(r["problem"], r["peer"]): r for r in summary(results)}
    for problem in sorted({r["problem"] for r in results}):
        for method in methods_in(results):
            rs = [r for r in results if r["problem"] == problem and r["method"] == method]
            if not rs:
                continue
            cells = []
            for share in (0.25, 0.5, 1.0):
                hvs = [hv_at(r["trajectory"], share * r["budget_gpu_hours"]) for r in rs]
                sd = statistics.stdev(hvs) / math.sqrt(len(hvs)) if len(hvs) > 1 else 0.0
                cells.append(f"{statistics.fmean(hvs):.3f} ± {sd:.3f}")
            pre = f"{sum(r['preempted_attempts'] for r in rs)} / {sum(r['attempts'] for r in rs)}"
            ratio = ratios.get((problem, method))
            rtxt = (f"{ratio['ratio']:.2f} (>= 1.5 in {sum(x >= 1.5 for x in ratio['per_seed'])} of "
                    f"{len(ratio['per_seed'])})") if ratio else ""
            lines.append(f"| {problem} | {method} | {len(rs)} | {' | '.join(cells)} | {pre} | {rtxt} |")
    return "\n".join(lines)


def plot(results: Sequence[Mapping[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = sorted({r["problem"] for r in results})
    fig, axes = plt.subplots(1, len(problems), figsize=(5.5 * len(problems), 4), squeeze=False)
    # one colour a method in every panel (a panel without some methods keeps the others' colours)
    colours = {m: f"C{i % 10}" for i, m in enumerate(methods_in(results))}
    for ax, problem in zip(axes[0], problems):
        for method in methods_in(results):
            rs = [r for r in results if r["problem"] == problem and r["method"] == method]
            if not rs:
                continue
            top = max(r["budget_gpu_hours"] for r in rs)
            grid = [top * k / 100 for k in range(101)]
            mean = [statistics.fmean(hv_at(r["trajectory"], h) for r in rs) for h in grid]
            ax.plot(grid, mean, label=f"{method} ({len(rs)} seeds)", color=colours[method])
        ax.set_title(problem)
        ax.set_xlabel("GPU-hours (simulated cluster)")
        ax.set_ylabel("hypervolume / max")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def method_list(text: str) -> list[str]:
    """`--methods`: names of METHODS, nasctl ones optionally `@VARIANT` (checked by ablation.py)."""
    from benchmarks.ablation import parse_variant

    out = text.split(",")
    for name in out:
        base, _, variant = name.partition("@")
        if base not in METHODS or (variant and not base.startswith("nasctl")):
            raise argparse.ArgumentTypeError(f"unknown method {name!r} (known: {', '.join(METHODS)}, nasctl@VARIANT)")
        if variant:
            try:
                parse_variant(variant)
            except ValueError as e:
                raise argparse.ArgumentTypeError(str(e)) from None
    if len({n.partition("@")[2] for n in out} - {""}) > 1:
        raise argparse.ArgumentTypeError("one optimizer variant per process: run the others separately")
    return out


def main(argv: list[str] | None = None) -> int:
    from benchmarks.nas_tables import PROBLEMS as TABLE_PROBLEMS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--problems", type=bargs.names([*TABLE_PROBLEMS, *FULL_ONLY]), default=["mlp_digits"])
    p.add_argument("--seeds", type=bargs.seeds, default=list(range(10)))
    p.add_argument("--methods", type=method_list, default=list(METHODS),
                   help=f"of {', '.join(METHODS)}; nasctl@VARIANT or nasctl-full@VARIANT for an optimizer variant "
                        "of benchmarks/ablation.py (one variant per process)")
    p.add_argument("--gpus", type=bargs.positive_int, default=8)
    p.add_argument("--preempt-rate", type=float, default=0.1,
                   help="share of the median configuration's full trainings that are preempted (0 <= r < 1)")
    p.add_argument("--budget", type=bargs.positive_float, default=64.0,
                   help="GPU budget in full trainings of the median configuration")
    p.add_argument("--full-hours", type=bargs.positive_float, default=1.0,
                   help="device-hours of the median configuration's full training (the table's times are scaled)")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/time_to_front"))
    p.add_argument("--report", action="store_true", help="only summarise the runs already in --out")
    p.add_argument("--force", action="store_true",
                   help="run again what --out already holds, as a run's file or in its trajectories.json (else skipped)")
    p.add_argument("--plot", type=Path, default=None, help="write the hypervolume / GPU-hours plot here")
    a = p.parse_args(argv)
    if not 0 <= a.preempt_rate < 1:
        p.error(f"--preempt-rate must be in [0, 1), got {a.preempt_rate}")
    if not a.report:
        held = {(r["problem"], r["method"], r["seed"]) for r in load(a.out)}
        for problem in a.problems:
            for seed in a.seeds:
                for method in a.methods:
                    setup = Setup(problem, seed, a.gpus, a.preempt_rate, a.budget, a.full_hours)
                    if ((problem, method, seed) in held and not a.force) or (not setup.tabulated and
                                                           method.partition("@")[0] in CURVES_ONLY):
                        continue
                    path = run_one(setup, method, a.out)
                    r = json.loads(path.read_text())
                    final = r["trajectory"][-1][1] if r["trajectory"] else 0.0
                    print(f"{problem} {method} seed {seed}: HV {final:.3f} at {r['budget_gpu_hours']:.2f} GPU-h, "
                          f"{r['preempted_attempts']}/{r['attempts']} attempts preempted, {r['seconds']:.0f}s",
                          flush=True)
    results = load(a.out)
    if not results:  # nothing to summarise: keep what --out holds (a summary without its runs) as it is
        print(f"error: {a.out} holds no runs (no <problem>/<method>/seedNN.json, no trajectories.json): "
              "run the methods first, or point --out at a folder of runs", file=sys.stderr)
        return 2
    rows = summary(results)
    (a.out / "summary.json").parent.mkdir(parents=True, exist_ok=True)
    (a.out / "summary.json").write_text(json.dumps(
        [{k: r[k] for k in ("problem", "peer", "ratio", "seeds")} | {"per_seed": r["per_seed"],
                                                                      "ablation": r["ablation"]} for r in rows],
        indent=1))
    (a.out / "trajectories.json").write_text(json.dumps([compact(r) for r in results], separators=(",", ":")))
    print(report(results))
    if a.plot is not None:
        plot(results, a.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
