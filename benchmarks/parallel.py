"""Sample efficiency at parallelism K, on a simulated clock (`sample_efficiency.py --parallelism`).

Every trial of every method gets the same simulated duration for the same
configuration and seed: `nasctl.runners.simulated.trial_seconds`, a log-normal
draw (median MEDIAN_SECONDS, sigma SIGMA) seeded by the parameters and the
run's seed. K trials run at once; a slot that frees is refilled at once, and a
proposal takes no simulated time (its real CPU time is reported apart).

- nasctl runs through its real loop (`start_experiment`: Orchestrator, SQLite
  store, generator thread, TensorBoard files read back) with the `simulated`
  runner, whose clock the loop runs against (nasctl/runners/simulated.py).
- The peers are driven by `simulate`, an event loop with the same rules: ask
  for as many candidates as slots are free (each peer with its own handling of
  the trials still running: Ax's pending points, Optuna TPE's constant liar,
  NSGA-II's and GPSampler's none), jump to the earliest end, tell every result
  due then (in submission order), repeat.

Hypervolumes are traced in the order trials end: `hv[n-1]` is the hypervolume
of the first n results, and `end[n-1]` the simulated second the n-th arrived.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchmarks.problems import Problem, hv_trace
from nasctl.runners.simulated import trial_seconds

MEDIAN_SECONDS = 60.0
SIGMA = 0.5
TIME_CHECKPOINTS = (300, 600, 1200)
"""Simulated seconds at which the tables give the hypervolume reached (5, 10, 20 median trials)."""

Ask = Callable[[int], list[tuple[Any, dict[str, Any]]]]
Tell = Callable[[Any, Mapping[str, float]], None]


def duration(params: Mapping[str, Any], seed: int) -> float:
    return trial_seconds(params, seed, MEDIAN_SECONDS, SIGMA)


def _finish(problem: Problem, rows: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """The result of a run from its trials (each: params, values, start, end), in the order they ended."""
    rows = sorted(rows, key=lambda r: (r["end"], r["start"], r["order"]))
    values = [r["values"] for r in rows]
    return {"values": values, "params": [r["params"] for r in rows], "start": [r["start"] for r in rows],
            "end": [r["end"] for r in rows], "order": [r["order"] for r in rows], "hv": hv_trace(problem, values),
            **extra}


def first_proposed(problem: Problem, result: Mapping[str, Any], n: int) -> dict[str, Any]:
    """The run with a budget of `n` trials, from a longer run of the same seed: its first
    n proposals are those of the longer run (none of them saw a later trial), so
    they, in the order they ended, are what the shorter run would have given."""
    rows = [{"params": p, "values": v, "start": s, "end": e, "order": o}
            for p, v, s, e, o in zip(result["params"], result["values"], result["start"], result["end"],
                                     result["order"]) if o < n]
    if len(rows) < n:
        raise ValueError(f"the longer run has {len(rows)} of the first {n} trials")
    keep = [i for i, o in enumerate(result["order"]) if o < n]
    extra = {k: [result[k][i] for i in keep] for k in ("methods",) if k in result}
    return _finish(problem, rows, {**extra, "derived_from_budget": result.get("budget")})


def simulate(problem: Problem, ask: Ask, tell: Tell, seed: int, budget: int, parallelism: int) -> dict[str, Any]:
    """Drive an ask/tell optimizer at `parallelism` on the simulated clock (see the module docstring)."""
    now, order = 0.0, 0
    running: list[dict[str, Any]] = []
    done: list[dict[str, Any]] = []
    gen, cpu = [], []
    while len(done) < budget:
        free = min(parallelism - len(running), budget - order)
        if free > 0:
            t0, c0 = time.perf_counter(), time.thread_time()
            got = ask(free)
            if got:
                gen += [(time.perf_counter() - t0) / len(got)] * len(got)
                cpu += [(time.thread_time() - c0) / len(got)] * len(got)
            for token, params in got:
                running.append({"token": token, "params": dict(params), "start": now,
                                "end": now + duration(params, seed), "order": order})
                order += 1
        if not running:
            raise RuntimeError(f"nothing runs and the optimizer proposed nothing after {len(done)} results")
        now = min(r["end"] for r in running)
        for r in sorted((r for r in running if r["end"] <= now), key=lambda r: r["order"]):
            running.remove(r)
            r["values"] = problem.evaluate(r["params"])
            tell(r.pop("token"), r["values"])
            done.append(r)
    return _finish(problem, done, {"gen_seconds": gen, "gen_cpu_seconds": cpu})


NASCTL_VARIANTS: dict[str, dict[str, Any]] = {
    "nasctl": {},
    "nasctl-ahead0": {"lookahead": 0},
    "nasctl-ahead1": {"lookahead": 1},
}
"""nasctl as shipped, and ablations of what it does at parallelism (keyword arguments of
`run_nasctl`): "nasctl-ahead0" keeps no candidate generated ahead of the free slots,
so a freed slot waits for a proposal that has seen its result (what the shipped rule
of nasctl/orchestration/proposals.py does on this clock, where a proposal takes no
time); "nasctl-ahead1" keeps one ahead once the first result is in (the rule before,
whose minimum was one). At K = 1 nasctl keeps none."""


def run_nasctl(problem: Problem, seed: int, budget: int, parallelism: int,
               lookahead: int | None = None) -> dict[str, Any]:
    """nasctl's real loop on the `simulated` runner, with the same durations as the peers;
    `lookahead` as `start_experiment` takes it."""
    from nasctl.optimizer.methods import resolve_method
    from nasctl.orchestration.control import start_experiment
    from nasctl.spec import parse_spec
    from nasctl.store import Store

    spec = parse_spec(json.dumps({
        "name": f"sep-{problem.name}-{seed}-k{parallelism}",
        "search_space": problem.search_space,
        "objectives": {o: {"goal": "minimize", "threshold": r} for o, r in zip(problem.objectives, problem.ref)},
        "budget": {"max_trials": budget, "parallelism": parallelism, "max_failures": 0},
        "trial": {"function": problem.function},
        "runner": {"scheduler": "simulated", "cfg": {"seed": seed, "median_seconds": MEDIAN_SECONDS, "sigma": SIGMA}},
        "optimizer": {"method": "auto", "seed": seed},
    }), source="<benchmark>")
    with tempfile.TemporaryDirectory(prefix="nasctl-sep-") as tmp:
        store = Store(f"sqlite:///{tmp}/nasctl.db", create=True)
        summary = start_experiment(store, spec, tmp, lookahead=lookahead)
        trials = store.list_trials(store.get_experiment(spec.name).id)
    if summary.status.value != "COMPLETED":
        raise RuntimeError(f"nasctl run ended {summary.status.value}: {summary.reason}")
    rows = [{"params": t.parameters, "values": t.values, "start": t.runner_metadata["simulated_start"],
             "end": t.runner_metadata["simulated_end"], "order": t.index, "method": t.generation_method}
            for t in trials]
    res = _finish(problem, rows, {"gen_seconds": list(summary.generation_seconds),
                                  "gen_cpu_seconds": list(summary.generation_cpu_seconds),
                                  "optimizer": str(resolve_method(spec)), "simulated_seconds": summary.elapsed})
    res["methods"] = [r["method"] for r in sorted(rows, key=lambda r: (r["end"], r["start"], r["order"]))]
    return res


def run_optuna(problem: Problem, method: str, seed: int, budget: int, parallelism: int,
               distributions: dict[str, Any]) -> dict[str, Any]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if method == "random":
        sampler: Any = optuna.samplers.RandomSampler(seed=seed)
    elif method == "tpe":  # the constant liar: running trials count as bad results
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)
    elif method == "nsga2":
        sampler = optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, budget // 5))
    else:  # Optuna 5's GPSampler has no constant liar: running trials are ignored
        sampler = optuna.samplers.GPSampler(seed=seed)
    study = optuna.create_study(directions=["minimize"] * len(problem.objectives), sampler=sampler)

    def ask(n: int) -> list[tuple[Any, dict[str, Any]]]:
        out = []
        for _ in range(n):
            trial = study.ask(distributions)
            out.append((trial, dict(trial.params)))
        return out

    def tell(trial: Any, values: Mapping[str, float]) -> None:
        study.tell(trial, [values[o] for o in problem.objectives])

    return simulate(problem, ask, tell, seed, budget, parallelism)


def from_sequential(problem: Problem, stored: Mapping[str, Any], budget: int) -> dict[str, Any]:
    """A parallelism-1 result on the simulated clock from a stored run of the
    sequential grid (`sample_efficiency.py` without --parallelism): at K = 1 the
    simulated loop is that loop (ask one, evaluate, tell, repeat), so its first
    `budget` trials, each taking `duration` after the one before, are what a
    simulated run would give, up to the method's own run-to-run differences."""
    rows, now = [], 0.0
    for i, params in enumerate(stored["params"][:budget]):
        end = now + duration(params, int(stored["seed"]))
        rows.append({"params": params, "values": stored["values"][i], "start": now, "end": end, "order": i})
        now = end
    if len(rows) < budget:
        raise ValueError(f"the stored run has {len(rows)} trials, fewer than {budget}")
    gen = list(stored.get("gen_seconds") or [])[:budget]
    cpu = list(stored.get("gen_cpu_seconds") or [])[:budget]
    return _finish(problem, rows, {"gen_seconds": gen, "gen_cpu_seconds": cpu,
                                   "derived_from": f"sample_efficiency/{problem.name}/{stored['method']}/"
                                                   f"seed{int(stored['seed']):02d}.json"})


def ax_ask_tell(problem: Problem, client: Any) -> tuple[Ask, Tell]:
    """Ask and tell for a stock Ax Client (configured by the caller): the trials still
    running are its pending points; it is asked for every free slot in one call and may
    give fewer (its quasi-random start waits for results before its model takes over)."""
    from ax.exceptions.core import DataRequiredError

    def ask(n: int) -> list[tuple[Any, dict[str, Any]]]:
        try:
            trials = client.get_next_trials(max_trials=n)
        except DataRequiredError:
            return []
        return [(index, dict(x)) for index, x in trials.items()]

    def tell(index: Any, values: Mapping[str, float]) -> None:
        client.complete_trial(index, raw_data={o: values[o] for o in problem.objectives})

    return ask, tell


def run_ax(problem: Problem, seed: int, budget: int, parallelism: int, client: Any) -> dict[str, Any]:
    """A stock Ax Client on the simulated clock (`ax_ask_tell`)."""
    ask, tell = ax_ask_tell(problem, client)
    return simulate(problem, ask, tell, seed, budget, parallelism)


def hv_at_time(result: Mapping[str, Any], seconds: float) -> float:
    """The hypervolume of the results that arrived by `seconds` of simulated time."""
    n = sum(1 for e in result["end"] if e <= seconds)
    return result["hv"][n - 1] if n else 0.0


def _cell(vals: list[float], digits: int = 3) -> str:
    if not vals:
        return "-"
    sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return f"{statistics.fmean(vals):.{digits}f} ± {sd:.{digits}f}"


def report(results: list[dict[str, Any]], problems: list[str], methods: list[str],
           checkpoints: tuple[int, ...]) -> str:
    """A markdown table per problem: mean ± sd of the hypervolume (share of the maximum)
    after n results and at simulated times, the simulated time all results took, and
    the proposals' median seconds, for every method and parallelism found."""
    from benchmarks.problems import get_problem

    lines = []
    for pname in problems:
        rows = [r for r in results if r["problem"] == pname]
        if not rows:
            continue
        prob = get_problem(pname)
        lines += [f"**{prob.title}** (max HV {prob.max_hv:.4g}; durations log-normal, median "
                  f"{MEDIAN_SECONDS:.0f} s, sigma {SIGMA})", ""]
        lines.append("| method | K | seeds | " + " | ".join(f"HV@{c}" for c in checkpoints) + " | "
                     + " | ".join(f"HV@{t}s" for t in TIME_CHECKPOINTS) + " | sim. time (s) | gen median (s) | gen CPU median (s) |")
        lines.append("|---|---|---|" + "---|" * (len(checkpoints) + len(TIME_CHECKPOINTS)) + "---|---|---|")
        for m in methods:
            for k in sorted({r["parallelism"] for r in rows if r["method"] == m}):
                mr = [r for r in rows if r["method"] == m and r["parallelism"] == k]
                cells = [_cell([r["hv"][c - 1] for r in mr if len(r["hv"]) >= c]) for c in checkpoints]
                cells += [_cell([hv_at_time(r, t) for r in mr]) for t in TIME_CHECKPOINTS]
                cells.append(_cell([r["end"][-1] for r in mr], 0))
                gen = [g for r in mr for g in r.get("gen_seconds") or [] if g is not None]
                cells.append(f"{statistics.median(gen):.2f}" if gen else "-")
                cpu = [g for r in mr for g in r.get("gen_cpu_seconds") or [] if g is not None]
                cells.append(f"{statistics.median(cpu):.2f}" if cpu else "-")
                lines.append(f"| {m} | {k} | {len(mr)} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def paired(results: list[dict[str, Any]], problems: list[str], base: str, other: str,
           checkpoints: tuple[int, ...]) -> str:
    """`other` against `base`, seed by seed (only seeds both have), per problem, K and
    checkpoint: both means, on how many seeds `other` is better / worse, and the mean
    difference with its standard error."""
    lines = [f"| problem | K, at | seeds | {base} | {other} | {other} better / worse | difference (standard error) |",
             "|---|---|---|---|---|---|---|"]
    for pname in problems:
        for k in sorted({r["parallelism"] for r in results if r["problem"] == pname}):
            by = {m: {r["seed"]: r for r in results if r["problem"] == pname and r["parallelism"] == k
                      and r["method"] == m} for m in (base, other)}
            seeds = sorted(set(by[base]) & set(by[other]))
            for c in checkpoints:
                pairs = [(by[base][s]["hv"][c - 1], by[other][s]["hv"][c - 1]) for s in seeds
                         if len(by[base][s]["hv"]) >= c and len(by[other][s]["hv"]) >= c]
                if not pairs:
                    continue
                diffs = [o - b for b, o in pairs]
                se = f" ({statistics.stdev(diffs) / math.sqrt(len(diffs)):.4f})" if len(diffs) > 1 else ""
                lines.append(f"| {pname} | {k}, HV@{c} | {len(pairs)} | {statistics.fmean(b for b, _ in pairs):.3f} "
                             f"| {statistics.fmean(o for _, o in pairs):.3f} | {sum(d > 1e-12 for d in diffs)} / "
                             f"{sum(d < -1e-12 for d in diffs)} | {statistics.fmean(diffs):+.4f}{se} |")
    return "\n".join(lines)


# --- the targets, time to a hypervolume, plots ----------------------------------------
PEERS = ("random", "tpe", "nsga2", "gp", "ax")
TARGET_TRIALS = 30
RETENTION = {4: 0.97, 16: 0.93}
"""nasctl's mean HV@30 at parallelism K must be at least this share of its own at K = 1."""


def _hv_at(rows: list[dict[str, Any]], n: int) -> list[float]:
    return [r["hv"][n - 1] for r in rows if len(r["hv"]) >= n]


def difference(mine: Sequence[float], other: Sequence[float]) -> tuple[float, float | None]:
    """Mean of `mine` minus mean of `other` (independent runs), and the standard error
    of that difference (Welch's: sqrt(var1/n1 + var2/n2)); None with fewer than two
    runs on either side."""
    diff = statistics.fmean(mine) - statistics.fmean(other)
    if len(mine) < 2 or len(other) < 2:
        return diff, None
    return diff, math.sqrt(statistics.variance(mine) / len(mine) + statistics.variance(other) / len(other))


def targets(results: list[dict[str, Any]], problems: list[str], n: int = TARGET_TRIALS) -> str:
    """Per problem and K: nasctl's mean HV@n, its share of its own at K = 1, the best peer
    (mean ± sd), nasctl's mean minus the best peer's with the standard error of that
    difference (`difference`), and whether nasctl is best or within one sd of it; then
    the counts, with how often a peer is ahead by more than two standard errors."""
    lines = [f"| problem | K | nasctl HV@{n} | share of K = 1 | best peer HV@{n} | difference (standard error) "
             "| nasctl |", "|---|---|---|---|---|---|---|"]
    best_count: dict[int, int] = {}
    within_count: dict[int, int] = {}
    clear_count: dict[int, int] = {}  # no peer ahead by more than two standard errors
    retention_ok: dict[int, int] = {}
    probs_per_k: dict[int, int] = {}
    for pname in problems:
        ks = sorted({r["parallelism"] for r in results if r["problem"] == pname and r["method"] == "nasctl"})
        base = _hv_at([r for r in results if r["problem"] == pname and r["method"] == "nasctl"
                       and r["parallelism"] == 1], n)
        for k in ks:
            rows = [r for r in results if r["problem"] == pname and r["parallelism"] == k]
            mine = _hv_at([r for r in rows if r["method"] == "nasctl"], n)
            peers = {m: _hv_at([r for r in rows if r["method"] == m], n) for m in PEERS}
            peers = {m: v for m, v in peers.items() if v}
            if not mine or not peers:
                continue
            mu = statistics.fmean(mine)
            best = max(peers, key=lambda m: statistics.fmean(peers[m]))
            bmu = statistics.fmean(peers[best])
            bsd = statistics.stdev(peers[best]) if len(peers[best]) > 1 else 0.0
            verdict = "best" if mu >= bmu else ("within 1 sd" if mu >= bmu - bsd else "BEHIND")
            diff, se = difference(mine, peers[best])
            probs_per_k[k] = probs_per_k.get(k, 0) + 1
            best_count[k] = best_count.get(k, 0) + (verdict == "best")
            within_count[k] = within_count.get(k, 0) + (verdict != "BEHIND")
            clear_count[k] = clear_count.get(k, 0) + (se is None or diff >= -2 * se)
            share = "-"
            if base and k != 1:
                s = mu / statistics.fmean(base)
                ok = s >= RETENTION.get(k, 0.0)
                retention_ok[k] = retention_ok.get(k, 0) + ok
                share = f"{s:.1%}" + ("" if ok else f" (< {RETENTION.get(k, 0):.0%})")
            gap = f"{diff:+.3f}" + ("" if se is None else f" ({se:.3f})")
            lines.append(f"| {pname} | {k} | {mu:.3f} ({len(mine)}) | {share} | {best} {bmu:.3f} ± {bsd:.3f} "
                         f"| {gap} | {verdict} |")
    lines.append("")
    for k in sorted(probs_per_k):
        part = (f"K = {k}: nasctl best on {best_count[k]} of {probs_per_k[k]} problems, best or within one sd "
                f"of the best peer on {within_count[k]}, no peer ahead by more than two standard errors "
                f"on {clear_count[k]}")
        if k in retention_ok:
            part += f"; HV@{n} at least {RETENTION.get(k, 0):.0%} of K = 1 on {retention_ok[k]}"
        lines.append(f"- {part}.")
    return "\n".join(lines)


def time_to_reach(result: Mapping[str, Any], hv: float) -> float | None:
    """The simulated second at which a run's hypervolume first reached `hv` (None: never)."""
    for h, e in zip(result["hv"], result["end"]):
        if h >= hv - 1e-12:
            return float(e)
    return None


def speedup(base: list[dict[str, Any]], fast: list[dict[str, Any]], problems: list[str],
            n: int = TARGET_TRIALS) -> str:
    """Per problem: for each seed, the K = 1 run's HV after n results and the simulated time
    it took, and when the parallel run of the same seed first reached that hypervolume."""
    lines = [f"| problem | K | seeds | K = 1 time to HV@{n} (s, mean) | reached | time to it (s, mean of those "
             "that did) | ratio per seed (median, max) |", "|---|---|---|---|---|---|---|"]
    for pname in problems:
        b = {r["seed"]: r for r in base if r["problem"] == pname and r["method"] == "nasctl" and len(r["hv"]) >= n}
        for k in sorted({r["parallelism"] for r in fast if r["problem"] == pname}):
            f = {r["seed"]: r for r in fast if r["problem"] == pname and r["method"] == "nasctl"
                 and r["parallelism"] == k}
            seeds = sorted(set(b) & set(f))
            if not seeds:
                continue
            t1 = [b[s]["end"][n - 1] for s in seeds]
            reach = {s: time_to_reach(f[s], b[s]["hv"][n - 1]) for s in seeds}
            got = {s: t for s, t in reach.items() if t is not None}
            ratios = sorted((got[s] / b[s]["end"][n - 1]) if s in got else float("inf") for s in seeds)
            med = ratios[len(ratios) // 2] if len(ratios) % 2 else (ratios[len(ratios) // 2 - 1]
                                                                    + ratios[len(ratios) // 2]) / 2
            lines.append(f"| {pname} | {k} | {len(seeds)} | {statistics.fmean(t1):.0f} | {len(got)} of {len(seeds)} "
                         f"| {statistics.fmean(got.values()):.0f} | " if got else
                         f"| {pname} | {k} | {len(seeds)} | {statistics.fmean(t1):.0f} | 0 of {len(seeds)} | - | ")
            lines[-1] += f"1/{1 / med:.1f}, {'never' if ratios[-1] == float('inf') else f'1/{1 / ratios[-1]:.1f}'} |" \
                if med not in (0.0, float("inf")) else "- |"
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], problems: list[str], methods: list[str], out: Any) -> list[Any]:
    """One figure per problem: the mean hypervolume (± sd) against results (top) and against
    simulated time (bottom), a column per parallelism."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    paths = []
    for pname in problems:
        rows = [r for r in results if r["problem"] == pname]
        ks = sorted({r["parallelism"] for r in rows})
        if not ks:
            continue
        fig, axes = plt.subplots(2, len(ks), figsize=(3.6 * len(ks), 5.6), squeeze=False)
        for col, k in enumerate(ks):
            horizon = max((r["end"][-1] for r in rows if r["parallelism"] == k), default=1.0)
            grid = np.linspace(0.0, horizon, 200)
            for m in methods:
                mr = [r for r in rows if r["method"] == m and r["parallelism"] == k]
                if not mr:
                    continue
                n = min(len(r["hv"]) for r in mr)
                arr = np.array([r["hv"][:n] for r in mr])
                mu, sd = arr.mean(axis=0), arr.std(axis=0)
                x = np.arange(1, n + 1)
                color = f"C{methods.index(m)}"  # one colour per method in every panel
                axes[0][col].plot(x, mu, label=m, color=color)
                axes[0][col].fill_between(x, mu - sd, mu + sd, alpha=0.12, color=color)
                tv = np.array([[hv_at_time(r, t) for t in grid] for r in mr])
                axes[1][col].plot(grid, tv.mean(axis=0), color=color)
            axes[0][col].set_title(f"K = {k}", fontsize=9)
            axes[0][col].set_xlabel("results", fontsize=8)
            axes[1][col].set_xlabel("simulated seconds", fontsize=8)
        axes[0][0].set_ylabel("hypervolume / max", fontsize=8)
        axes[1][0].set_ylabel("hypervolume / max", fontsize=8)
        handles = {h.get_label(): h for ax in axes[0] for h in ax.get_lines()}
        fig.legend([handles[m] for m in methods if m in handles], [m for m in methods if m in handles],
                   loc="lower center", ncol=len(handles), fontsize=8)
        from benchmarks.problems import get_problem

        fig.suptitle(get_problem(pname).title, fontsize=10)
        fig.tight_layout(rect=(0, 0.05, 1, 1))
        path = out / f"{pname}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
