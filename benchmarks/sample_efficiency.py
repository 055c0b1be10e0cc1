"""Sample efficiency: hypervolume found per number of trials, nasctl vs the peers.

    PYTHONPATH=$PWD nice -n 5 python benchmarks/sample_efficiency.py \
        [--problems P,...] [--methods M,...] [--seeds 0-9] [--budget 50] [--jobs 2]

Each (problem, method, seed) run is one process and one JSON file under
--out (default benchmarks/results/sample_efficiency/): finished runs are
skipped, so runs accumulate across invocations and an interrupted grid
resumes. `--methods ax --extend` continues stored shorter stock-Ax runs to
--budget trials: a run's trials are attached to a fresh Client with their
stored values, its generation strategy is put at its model step (where the
stored run was after its first 5 trials), and Ax proposes the rest. At the end (or with --report) the script prints a markdown table
from every result file found and writes plots next to the results.

Methods:
- nasctl: the real loop (`run_experiment`: Orchestrator, SQLite store,
  candidate generator thread, `inprocess` runner writing TensorBoard files,
  metrics read back from them) with `optimizer.method: auto`;
- random, nsga2 (population = budget/5, at least 4), tpe (multivariate),
  gp (Optuna's GPSampler): Optuna 5 ask/tell;
- ax: a stock `ax.api.Client` with its default generation strategy and the
  same objective thresholds (reference point) as nasctl.
All see the same search space; the hypervolume uses the problem's reference
point for everyone. Generation time is the time to produce one candidate
(nasctl: the generator's proposal time; Optuna: `ask`; Ax: `get_next_trials`).

With `--parallelism 1,4,16`, every method runs that many trials at once, asynchronously,
on a simulated clock (benchmarks/parallel.py: nasctl through its real loop on the
`simulated` runner; the peers with their own handling of running trials, TPE with the
constant liar), and the table gives the hypervolume against results and against
simulated time; results go to --out/k<K>/ (default
benchmarks/results/sample_efficiency_parallel/).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import args as argtypes  # noqa: E402
from benchmarks import parallel  # noqa: E402
from benchmarks import summary  # noqa: E402
from benchmarks.problems import PROBLEMS, Problem, get_problem, hv_trace  # noqa: E402

METHODS = ["random", "tpe", "nsga2", "gp", "nasctl", "ax"]
CHECKPOINTS = (10, 20, 30, 50)
GEN_FROM = 40  # generation times are taken for candidates proposed with >= this many observed trials
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "sample_efficiency"
DEFAULT_PARALLEL_OUT = ROOT / "benchmarks" / "results" / "sample_efficiency_parallel"


# --- one run -----------------------------------------------------------------------------
def nasctl_spec(problem: Problem, seed: int, budget: int) -> Any:
    """The spec nasctl runs `problem` with: the reference point as objective
    thresholds, one trial at a time on the in-process runner."""
    from nasctl.spec import parse_spec

    spec_data = {
        "name": f"se-{problem.name}-{seed}",
        "search_space": problem.search_space,
        "objectives": {o: {"goal": "minimize", "threshold": r} for o, r in zip(problem.objectives, problem.ref)},
        "budget": {"max_trials": budget, "parallelism": 1, "max_failures": 0},
        "trial": {"function": problem.function},
        "runner": {"scheduler": "inprocess", "cfg": {"workers": 1}},
        "optimizer": {"method": "auto", "seed": seed},
    }
    return parse_spec(json.dumps(spec_data), source="<benchmark>")


def run_nasctl(problem: Problem, seed: int, budget: int) -> dict[str, Any]:
    from nasctl.optimizer.methods import resolve_method
    from nasctl.orchestration.control import start_experiment
    from nasctl.store import Store

    spec = nasctl_spec(problem, seed, budget)
    with tempfile.TemporaryDirectory(prefix="nasctl-se-") as tmp:
        store = Store(f"sqlite:///{tmp}/nasctl.db", create=True)
        summary = start_experiment(store, spec, tmp, poll_interval=0.1)
        exp = store.get_experiment(spec.name)
        trials = store.list_trials(exp.id)
    if summary.status.value != "COMPLETED":
        raise RuntimeError(f"nasctl run ended {summary.status.value}: {summary.reason}")
    return {
        "values": [t.values for t in trials],
        "params": [t.parameters for t in trials],
        "methods": [t.generation_method for t in trials],
        "gen_seconds": list(summary.generation_seconds),
        "gen_cpu_seconds": list(summary.generation_cpu_seconds),
        "optimizer": str(resolve_method(spec)),
    }


def _optuna_distributions(problem: Problem) -> dict[str, Any]:
    import optuna

    out: dict[str, Any] = {}
    for name, p in problem.search_space.items():
        if p["type"] == "float":
            out[name] = optuna.distributions.FloatDistribution(p["low"], p["high"], log=p.get("log", False))
        elif p["type"] == "int":
            out[name] = optuna.distributions.IntDistribution(p["low"], p["high"], log=p.get("log", False))
        else:
            out[name] = optuna.distributions.CategoricalDistribution(p["values"])
    return out


def _optuna(problem: Problem, method: str, seed: int, budget: int) -> dict[str, Any]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if method == "random":
        sampler: Any = optuna.samplers.RandomSampler(seed=seed)
    elif method == "tpe":
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True)
    elif method == "nsga2":
        sampler = optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, budget // 5))
    else:
        sampler = optuna.samplers.GPSampler(seed=seed)
    study = optuna.create_study(directions=["minimize"] * len(problem.objectives), sampler=sampler)
    dists = _optuna_distributions(problem)
    values, params, gen, cpu = [], [], [], []
    for _ in range(budget):
        t0, c0 = time.perf_counter(), time.thread_time()
        trial = study.ask(dists)
        gen.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        v = problem.evaluate(trial.params)
        study.tell(trial, [v[o] for o in problem.objectives])
        values.append(v)
        params.append(trial.params)
    return {"values": values, "params": params, "gen_seconds": gen, "gen_cpu_seconds": cpu}


def _ax_client(problem: Problem, seed: int) -> Any:
    """A stock `ax.api.Client` for `problem`: its default generation strategy, the
    problem's reference point as objective thresholds."""
    import logging

    import torch
    from ax.api import Client
    from ax.api.configs import ChoiceParameterConfig, RangeParameterConfig

    logging.disable(logging.WARNING)
    torch.set_num_threads(1)  # the stock default (all cores) is 2-8x slower on this 2-core machine
    client = Client(random_seed=seed)
    params: list[Any] = []
    for name, p in problem.search_space.items():
        if p["type"] in ("float", "int"):
            params.append(RangeParameterConfig(name=name, bounds=(p["low"], p["high"]), parameter_type=p["type"],
                                               scaling="log" if p.get("log") else "linear"))
        else:
            kind = {str: "str", int: "int", float: "float", bool: "bool"}[type(p["values"][0])]
            params.append(ChoiceParameterConfig(name=name, values=p["values"], parameter_type=kind,  # type: ignore[arg-type]
                                                is_ordered=bool(p.get("ordered", False))))
    client.configure_experiment(parameters=params, name=f"ax-{problem.name}")
    client.configure_optimization(
        objective=", ".join(f"-{o}" for o in problem.objectives),
        outcome_constraints=[f"{o} <= {r!r}" for o, r in zip(problem.objectives, problem.ref)],
    )
    return client


def _ax(problem: Problem, seed: int, budget: int, earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stock Ax Client run. With `earlier` (a stored run of fewer trials), its trials are
    attached to a fresh Client and completed with their stored values, and Ax's generation
    strategy proposes the rest from there (`--extend`)."""
    client = _ax_client(problem, seed)
    values, gen, chosen, cpu, nodes = [], [], [], [], []
    if earlier is not None:
        for x, v in zip(earlier["params"], earlier["values"]):
            index = client.attach_trial(parameters=x)
            client.complete_trial(index, raw_data={o: v[o] for o in problem.objectives})
        # The stock strategy left its initial nodes (centre point, Sobol) after 5 trials; given
        # attached trials, it would take one generation call per node to notice, and spend the
        # continued run's first proposal on a Sobol point. Resume it where the stored run was.
        strategy = client._generation_strategy_or_choose()
        strategy._curr = strategy.nodes_by_name["MBM"]
        values, chosen = list(earlier["values"]), list(earlier["params"])
        gen = list(earlier["gen_seconds"])
        cpu = list(earlier.get("gen_cpu_seconds") or [None] * len(gen))  # the oldest runs lack CPU times
        nodes = list(earlier.get("methods") or [None] * len(values))  # runs before 2026-11-24 lack them
    while len(values) < budget:
        t0, c0 = time.perf_counter(), time.thread_time()
        trials = client.get_next_trials(max_trials=1)
        gen.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        ((index, x),) = trials.items()
        # the generation node that proposed it (CenterOfSearchSpace, Sobol, MBM)
        nodes.append(client._experiment.trials[index].generator_runs[0]._generation_node_name)
        v = problem.evaluate(x)
        client.complete_trial(index, raw_data={o: v[o] for o in problem.objectives})
        values.append(v)
        chosen.append(dict(x))
    return {"values": values, "params": chosen, "gen_seconds": gen, "gen_cpu_seconds": cpu, "methods": nodes}


def run_one(problem_name: str, method: str, seed: int, budget: int, out: Path, extend: bool = False,
            parallelism: int | None = None) -> Path:
    """Run one (problem, method, seed) and write its JSON result file. With `extend`, a stored
    shorter stock-Ax run is continued to `budget` trials instead of starting over. With
    `parallelism`, the run has that many trials at once on the simulated clock (benchmarks/parallel.py)."""
    problem = get_problem(problem_name)
    path = result_path(out, problem_name, method, seed)
    earlier = json.loads(path.read_text()) if extend and path.exists() else None
    load0, t0 = os.getloadavg(), time.time()
    if parallelism is not None:
        res = _run_parallel(problem, method, seed, budget, parallelism)
    elif method == "nasctl":
        res = run_nasctl(problem, seed, budget)
    elif method == "ax":
        res = _ax(problem, seed, budget, earlier)
    else:
        res = _optuna(problem, method, seed, budget)
    if parallelism is not None:
        res.update(parallelism=parallelism, median_seconds=parallel.MEDIAN_SECONDS, sigma=parallel.SIGMA)
    if earlier is not None and method == "ax":
        res.update(extended_from=len(earlier["values"]), extended_date=earlier["date"],
                   extended_loadavg=[earlier["loadavg_start"], earlier["loadavg_end"]])
    res.update(
        problem=problem_name, method=method, seed=seed, budget=budget,
        hv=hv_trace(problem, res["values"]), wall_seconds=time.time() - t0,
        loadavg_start=load0, loadavg_end=os.getloadavg(),
        date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), host=platform.node(), cpus=os.cpu_count(),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(res, default=str))
    tmp.replace(path)
    return path


def _run_parallel(problem: Problem, method: str, seed: int, budget: int, parallelism: int) -> dict[str, Any]:
    if method in parallel.NASCTL_VARIANTS:
        return parallel.run_nasctl(problem, seed, budget, parallelism, **parallel.NASCTL_VARIANTS[method])
    if method == "ax":
        return parallel.run_ax(problem, seed, budget, parallelism, _ax_client(problem, seed))
    return parallel.run_optuna(problem, method, seed, budget, parallelism, _optuna_distributions(problem))


def result_path(out: Path, problem: str, method: str, seed: int) -> Path:
    return out / problem / method / f"seed{seed:02d}.json"


def _done(out: Path, problem: str, method: str, seed: int, budget: int) -> bool:
    p = result_path(out, problem, method, seed)
    if not p.exists():
        return False
    try:
        return int(json.loads(p.read_text())["budget"]) >= budget
    except (ValueError, KeyError):
        return False


# --- grid, report ----------------------------------------------------------------------------
CHEAP = ("random", "tpe", "nsga2", "gp")


def run_grid(problems: list[str], methods: list[str], seeds: list[int], budget: int, out: Path, jobs: int,
             extend: bool = False, parallelism: int | None = None) -> int:
    """Every missing run, cheap methods first, `jobs` processes at a time. Runs of the
    Optuna methods share one process per (problem, method) to save start-up time;
    nasctl and Ax runs get a fresh process each. A failed run is reported and the
    others go on; returns how many processes failed."""
    todo: list[tuple[str, str, list[int]]] = []
    for m in methods:
        for p in problems:
            missing = [s for s in seeds if not _done(out, p, m, s, budget)]
            if m in CHEAP and missing:
                todo.append((p, m, missing))
            else:
                todo += [(p, m, [s]) for s in missing]
    todo.sort(key=lambda k: (methods.index(k[1]), k[2][0]))
    running: list[tuple[subprocess.Popen[bytes], tuple[str, str, list[int]]]] = []
    failed = 0
    while todo or running:
        while todo and len(running) < jobs:
            p, m, ss = todo.pop(0)
            cmd = [sys.executable, __file__, "--one", p, m, ",".join(map(str, ss)),
                   "--budget", str(budget), "--out", str(out)] + (["--extend"] if extend else [])
            cmd += ["--parallelism", str(parallelism)] if parallelism is not None else []
            running.append((subprocess.Popen(cmd, stderr=subprocess.PIPE), (p, m, ss)))
        for proc, key in list(running):
            if proc.poll() is not None:
                running.remove((proc, key))
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                state = "ok" if proc.returncode == 0 else f"FAILED rc={proc.returncode}: {err.strip()[-400:]}"
                failed += proc.returncode != 0
                print(f"{key[0]} {key[1]} seeds {key[2]}: {state}", file=sys.stderr, flush=True)
        time.sleep(0.2)
    return failed


def load_results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("*/*/seed*.json"))]


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def _gen_times(r: dict[str, Any], key: str = "gen_seconds") -> list[float]:
    """Generation times of candidates proposed with >= GEN_FROM trials observed (parallelism 1:
    candidate k is proposed after k observations); if the run is shorter, its last 10."""
    ts = r.get(key) or []
    start = GEN_FROM if len(ts) > GEN_FROM else max(0, len(ts) - 10)
    return [t for k, t in enumerate(ts) if k >= start and t is not None]


def report(out: Path, problems: list[str], methods: list[str]) -> str:
    results = load_results(out)
    lines = []
    for pname in problems:
        prob = get_problem(pname)
        rows = [r for r in results if r["problem"] == pname]
        if not rows:
            continue
        lines += [f"**{prob.title}** (reference point {', '.join(f'{v:.4g}' for v in prob.ref)}; "
                  f"max HV {prob.max_hv:.4g})", ""]
        lines.append("| method | seeds | " + " | ".join(f"HV@{c}" for c in CHECKPOINTS)
                     + " | gen median (s) | gen p95 (s) | gen CPU median (s) | load avg |")
        lines.append("|---|---|" + "---|" * len(CHECKPOINTS) + "---|---|---|---|")
        means: dict[str, dict[int, float]] = {}
        for m in methods:
            mr = [r for r in rows if r["method"] == m]
            if not mr:
                continue
            cells, means[m] = [], {}
            for c in CHECKPOINTS:
                vals = [r["hv"][c - 1] for r in mr if len(r["hv"]) >= c]
                if vals:
                    mu = statistics.fmean(vals)
                    sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
                    means[m][c] = mu
                    cells.append(f"{mu:.3f} ± {sd:.3f}" + ("" if len(vals) == len(mr) else f" (n={len(vals)})"))
                else:
                    cells.append("-")
            gt = [t for r in mr for t in _gen_times(r)]
            gen = f"{statistics.median(gt):.2f} | {_pct(gt, 0.95):.2f}" if gt else "- | -"
            ct = [t for r in mr for t in _gen_times(r, "gen_cpu_seconds")]
            gen += f" | {statistics.median(ct):.2f}" if ct else " | -"
            loads = [r["loadavg_start"][0] for r in mr] + [r["loadavg_end"][0] for r in mr]
            name = m + (f" ({mr[0]['optimizer'].split(' ')[0]})" if m == "nasctl" and "optimizer" in mr[0] else "")
            lines.append(f"| {name} | {len(mr)} | " + " | ".join(cells)
                         + f" | {gen} | {min(loads):.1f}-{max(loads):.1f} |")
        lines.append("")
        if "nasctl" in means:
            verdicts = []
            for c in (20, 30):
                others = {m: v[c] for m, v in means.items() if m != "nasctl" and c in v}
                if c not in means["nasctl"] or not others:
                    continue
                best = max(others, key=lambda k: others[k])
                ok = means["nasctl"][c] >= others[best]
                verdicts.append(f"HV@{c} {'met' if ok else 'MISSED'} (nasctl {means['nasctl'][c]:.3f}, "
                                f"best peer {best} {others[best]:.3f})")
            nr = [t for r in rows if r["method"] == "nasctl" for t in _gen_times(r)]
            if nr:
                med, p95 = statistics.median(nr), _pct(nr, 0.95)
                verdicts.append(f"generation median {med:.2f} s ({'met' if med <= 1 else 'MISSED'}), "
                                f"p95 {p95:.2f} s ({'met' if p95 <= 3 else 'MISSED'})")
            lines += ["Targets: " + "; ".join(verdicts) + ".", ""]
    return "\n".join(lines)


def plot(out: Path, problems: list[str], methods: list[str]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    results = load_results(out)
    paths = []
    for pname in problems:
        rows = [r for r in results if r["problem"] == pname]
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for m in methods:
            mr = [r["hv"] for r in rows if r["method"] == m]
            if not mr:
                continue
            n = min(len(h) for h in mr)
            arr = np.array([h[:n] for h in mr])
            x = np.arange(1, n + 1)
            mu, sd = arr.mean(axis=0), arr.std(axis=0)
            ax.plot(x, mu, label=f"{m} ({len(mr)})")
            ax.fill_between(x, mu - sd, mu + sd, alpha=0.15)
        ax.set_xlabel("trials")
        ax.set_ylabel("hypervolume / max")
        ax.set_title(get_problem(pname).title, fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / f"{pname}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=argtypes.names(list(PROBLEMS)), default=list(PROBLEMS),
                    help="comma-separated (default: all)")
    ap.add_argument("--methods", type=argtypes.names(METHODS + [m for m in parallel.NASCTL_VARIANTS if m not in METHODS]),
                    default=list(METHODS),
                    help="comma-separated (default: all; with --parallelism also the ablations "
                         + ", ".join(m for m in parallel.NASCTL_VARIANTS if m not in METHODS) + ")")
    ap.add_argument("--seeds", type=argtypes.seeds, default=argtypes.seeds("0-9"), help="e.g. 0-9 or 0,3,5")
    ap.add_argument("--budget", type=argtypes.positive_int, default=50, help="trials per run")
    ap.add_argument("--jobs", type=argtypes.positive_int, default=2, help="runs in parallel (processes)")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"results folder (default {DEFAULT_OUT.relative_to(ROOT)}, with --parallelism "
                         f"{DEFAULT_PARALLEL_OUT.relative_to(ROOT)})")
    ap.add_argument("--parallelism", type=argtypes.positive_ints, default=None,
                    help="e.g. 1,4,16: run every method with that many trials at once on the simulated clock "
                         "(benchmarks/parallel.py); results under --out/k<K>/")
    ap.add_argument("--extend", action="store_true",
                    help="continue stored shorter stock-Ax runs to --budget (their trials are attached to a "
                         "fresh Client) instead of starting them over")
    ap.add_argument("--report", action="store_true", help="only print the table and plots from stored results")
    ap.add_argument("--paired", type=argtypes.names(METHODS + [m for m in parallel.NASCTL_VARIANTS if m not in METHODS]),
                    default=None, metavar="BASE,OTHER",
                    help="with --parallelism: also compare OTHER with BASE seed by seed (seeds both have) at every "
                         "checkpoint")
    ap.add_argument("--from-longer", type=Path, default=None, metavar="DIR",
                    help="take the runs of --methods at --parallelism from longer runs of the same seeds under "
                         "DIR/k<K>/ (their first --budget proposals: benchmarks/parallel.py, `first_proposed`) "
                         "instead of running them")
    ap.add_argument("--from-sequential", action="store_true",
                    help="with --parallelism 1: take the K = 1 runs of --methods from the stored sequential grid "
                         f"({DEFAULT_OUT.relative_to(ROOT)}) instead of running them (benchmarks/parallel.py, "
                         "`from_sequential`)")
    ap.add_argument("--one", nargs=3, metavar=("PROBLEM", "METHOD", "SEED"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.paired is not None and (a.parallelism is None or len(a.paired) != 2):
        ap.error("--paired takes two methods, BASE,OTHER, and runs on the simulated clock: pass --parallelism")
    if a.parallelism is not None and a.extend:
        ap.error("--extend continues parallelism-1 stock-Ax runs only: leave out --parallelism")
    if a.from_longer is not None:
        if a.parallelism is None:
            ap.error("--from-longer takes runs on the simulated clock: pass --parallelism")
        return _import_longer(a.from_longer, a.problems, a.methods, a.seeds, a.budget, a.parallelism,
                              a.out or DEFAULT_PARALLEL_OUT)
    if a.from_sequential:
        if a.parallelism != [1]:
            ap.error("--from-sequential makes parallelism-1 results only: pass --parallelism 1")
        return _import_sequential(a.problems, a.methods, a.seeds, a.budget, a.out or DEFAULT_PARALLEL_OUT)
    ablations = [m for m in a.methods if m not in METHODS]
    if ablations and a.parallelism is None:
        ap.error(f"{', '.join(ablations)} run on the simulated clock only: pass --parallelism")
    if a.one:
        k = a.parallelism[0] if a.parallelism else None
        for seed in argtypes.seeds(a.one[2]):
            run_one(a.one[0], a.one[1], seed, a.budget, a.out or DEFAULT_OUT, a.extend, k)
        return 0
    if a.parallelism is not None:
        return _main_parallel(a.problems, a.methods, a.seeds, a.budget, a.out or DEFAULT_PARALLEL_OUT, a.jobs,
                              a.parallelism, a.report, a.paired)
    a.out = a.out or DEFAULT_OUT
    problems, methods = a.problems, a.methods
    failed = 0
    if not a.report:
        if a.extend and set(methods) != {"ax"}:
            ap.error("--extend continues stock-Ax runs only: pass --methods ax")
        failed = run_grid(problems, methods, a.seeds, a.budget, a.out, a.jobs, a.extend)
    print(report(a.out, problems, methods))
    for p in plot(a.out, problems, methods):
        print(f"plot: {p}", file=sys.stderr)
    _write_summary(a.out, CHECKPOINTS, "--report")
    if failed:
        print(f"{failed} run process(es) failed (above); the table holds the runs that finished", file=sys.stderr)
        return 1
    return 0


def _write_summary(out: Path, checkpoints: tuple[int, ...], report_args: str) -> None:
    """`out/summary.json` from every run stored under `out` (`benchmarks/summary.py`): the
    file the repository keeps; the per-run files stay out of git."""
    shown = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    path = summary.write(out, checkpoints, f"python benchmarks/sample_efficiency.py {report_args} --out {shown}")
    if path is not None:
        print(f"summary: {path}", file=sys.stderr)


def _import_longer(src: Path, problems: list[str], methods: list[str], seeds: list[int], budget: int,
                   ks: list[int], out: Path) -> int:
    missing = 0
    for k in ks:
        for pname in problems:
            for m in methods:
                for seed in seeds:
                    path = result_path(src / f"k{k}", pname, m, seed)
                    stored = json.loads(path.read_text()) if path.exists() else None
                    if stored is None or int(stored["budget"]) < budget or "order" not in stored:
                        print(f"no longer run with trial order at {path}", file=sys.stderr)
                        missing += 1
                        continue
                    res = parallel.first_proposed(get_problem(pname), stored, budget)
                    keep = ("problem", "method", "seed", "parallelism", "median_seconds", "sigma", "optimizer",
                            "date", "host", "cpus")
                    res.update({key: stored[key] for key in keep if key in stored}, budget=budget,
                               derived_from=str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path))
                    dest = result_path(out / f"k{k}", pname, m, seed)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_text(json.dumps(res, default=str))
    return 1 if missing else 0


def _import_sequential(problems: list[str], methods: list[str], seeds: list[int], budget: int, out: Path) -> int:
    missing = 0
    for pname in problems:
        for m in methods:
            for seed in seeds:
                src = result_path(DEFAULT_OUT, pname, m, seed)
                if not src.exists():
                    print(f"no stored sequential run {src.relative_to(ROOT)}", file=sys.stderr)
                    missing += 1
                    continue
                stored = json.loads(src.read_text())
                res = parallel.from_sequential(get_problem(pname), stored, budget)
                res.update(problem=pname, method=m, seed=seed, budget=budget, parallelism=1,
                           median_seconds=parallel.MEDIAN_SECONDS, sigma=parallel.SIGMA,
                           date=stored.get("date"), host=stored.get("host"), cpus=stored.get("cpus"))
                path = result_path(out / "k1", pname, m, seed)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(res, default=str))
    return 1 if missing else 0


def _main_parallel(problems: list[str], methods: list[str], seeds: list[int], budget: int, out: Path, jobs: int,
                   ks: list[int], only_report: bool, pair: list[str] | None = None) -> int:
    failed = 0
    if not only_report:
        for k in ks:
            failed += run_grid(problems, methods, seeds, budget, out / f"k{k}", jobs, parallelism=k)
    results = [r for k in ks for r in load_results(out / f"k{k}")]
    checkpoints = tuple(c for c in CHECKPOINTS if c <= budget) or (budget,)
    print(parallel.report(results, problems, methods, checkpoints))
    if budget >= parallel.TARGET_TRIALS:
        print(parallel.targets(results, problems))
    if pair:
        print()
        print(parallel.paired(results, problems, pair[0], pair[1], checkpoints))
    if 1 in ks and any(k > 1 for k in ks):
        # the time to K = 1's hypervolume from the longer runs where there are some
        # (<out>_long/k<K>/, e.g. 64-trial runs at K = 16), else from these
        longer_dir = out.parent / f"{out.name}_long"
        longer = [r for k in ks if k > 1 for r in load_results(longer_dir / f"k{k}")]
        print()
        print(parallel.speedup([r for r in results if r["parallelism"] == 1],
                               longer or [r for r in results if r["parallelism"] > 1], problems))
    for p in parallel.plot(results, problems, methods, out):
        print(f"plot: {p}", file=sys.stderr)
    _write_summary(out, checkpoints, "--parallelism 1,4,16 --report")
    if failed:
        print(f"{failed} run process(es) failed (above); the table holds the runs that finished", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
