"""Multi-fidelity search on real training: hypervolume against training epochs spent.

Methods, each on the same search space, objectives, trainer and maximum epochs:

- `full`: nasctl, every trial trained to the maximum epochs (Ax, qLogNEHVI);
- `mf`: nasctl with `optimizer.fidelity` (asynchronous multi-objective
  successive halving, Ax proposals scored at the top rung, promotions continue
  from checkpoints), with its defaults `promotion: eager` and `rank: rung`;
- `mf-model`: the same with `rank: model` (a rung is ranked by the model's
  prediction of its trials at the top rung, not by the values they reached);
- `mf-strict`: `promotion: strict` (classic ASHA: a rung promotes nobody
  before it has eta results);
- `random`: nasctl at full fidelity with `optimizer.method: sobol`;
- `moasha`: Syne Tune's MO-ASHA (benchmarks/synetune_moasha.py, its own venv),
  training through the same trainer and checkpoints.

nasctl runs go through `nasctl run` (TorchX local_cwd, one process per trial).
Costs: a trial that continued from a checkpoint costs its fidelity minus the
fidelity it started from; any other trial its fidelity. Training seconds are
the trainer's own `train_seconds` (wall time of `trainer.fit`, one thread).
Hypervolume counts top-rung results only, against the objectives' thresholds
(the same reference point for every method).

    python benchmarks/multifidelity.py --problems digits,mnist1d --seeds 0-2 \\
        --max-epochs 9 --eta 3 --budget-epochs 108 --out benchmarks/results/multifidelity.json
    python benchmarks/multifidelity.py --report benchmarks/results/multifidelity*.json \\
        --plot docs/img/multifidelity.png
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SYNETUNE_PYTHON = os.environ.get("NASCTL_SYNETUNE_PYTHON", "/work/venv-synetune/bin/python")

PROBLEMS: dict[str, dict[str, Any]] = {
    # the tutorial's digits MLP (examples/digits_mlp.yaml) without its epochs parameter
    "digits": {
        "search_space": {
            "hidden_size_1": {"type": "int", "low": 16, "high": 128, "log": True},
            "hidden_size_2": {"type": "int", "low": 16, "high": 128, "log": True},
            "learning_rate": {"type": "float", "low": 1.0e-4, "high": 1.0e-2, "log": True},
            "dropout": {"type": "float", "low": 0.0, "high": 0.5},
            "batch_size": {"type": "choice", "values": [32, 64, 128, 256], "ordered": True},
        },
        "objectives": {"val_acc": {"goal": "maximize", "threshold": 0.80},
                       "num_params": {"goal": "minimize", "threshold": 80000}},
        "trial": {"search_space": "mlp_digits"},
    },
    # examples/cnn_mnist1d.yaml with two objectives (latency is noisy on a shared machine)
    # and fp32 only (precision and channels_last change latency only)
    "mnist1d": {
        "search_space": {
            "num_blocks": {"type": "int", "low": 1, "high": 3},
            "channels_1": {"type": "int", "low": 4, "high": 32, "log": True},
            "kernel_size_1": {"type": "choice", "values": [3, 5, 7], "ordered": True},
            "channels_2": {"type": "int", "low": 4, "high": 32, "log": True, "when": {"num_blocks": [2, 3]}},
            "kernel_size_2": {"type": "choice", "values": [3, 5, 7], "ordered": True,
                              "when": {"num_blocks": [2, 3]}},
            "channels_3": {"type": "int", "low": 4, "high": 32, "log": True, "when": {"num_blocks": [3]}},
            "kernel_size_3": {"type": "choice", "values": [3, 5, 7], "ordered": True, "when": {"num_blocks": [3]}},
            "pooling": {"type": "choice", "values": ["max", "avg"]},
            "classifier_width": {"type": "int", "low": 16, "high": 128, "log": True},
            "dropout": {"type": "float", "low": 0.0, "high": 0.3},
            "learning_rate": {"type": "float", "low": 1.0e-3, "high": 2.0e-2, "log": True},
            "batch_size": {"type": "fixed", "value": 64},
        },
        "objectives": {"val_acc": {"goal": "maximize", "threshold": 0.30},
                       "num_params": {"goal": "minimize", "threshold": 50000}},
        "trial": {"search_space": "cnn", "dataset": "mnist1d"},
    },
}

METHODS = ("full", "mf", "mf-strict", "mf-model", "random", "moasha")
TRIAL_ARGS = {"latency_repeats": 5, "latency_warmup": 1, "latency_min_seconds": 0.0}
"""Latency is not an objective here: measure it briefly (it is logged by every trial)."""


def make_spec(problem: str, method: str, seed: int, max_epochs: int, eta: int, budget_epochs: int,
              parallelism: int) -> dict[str, Any]:
    p = PROBLEMS[problem]
    space = dict(p["search_space"])
    optimizer: dict[str, Any] = {"seed": seed}
    if method.startswith("mf"):
        optimizer["fidelity"] = {"parameter": "epochs", "min": 1, "max": max_epochs, "eta": eta,
                                 "promotion": "strict" if method == "mf-strict" else "eager",
                                 "rank": "model" if method == "mf-model" else "rung"}
        # the epoch budget (budget.max_fidelity) ends the run; as many trials as epochs never binds
        max_trials = budget_epochs
    else:
        space["epochs"] = {"type": "fixed", "value": max_epochs}
        max_trials = max(1, budget_epochs // max_epochs)
    if method == "random":
        optimizer["method"] = "sobol"
    return {
        "name": f"{problem}-{method.replace('_', '-')}-{seed}",
        "search_space": space,
        "objectives": p["objectives"],
        "budget": {"max_trials": max_trials, "parallelism": parallelism, "trial_timeout": 900, "max_failures": 5,
                   **({"max_fidelity": budget_epochs} if method.startswith("mf") else {})},
        "trial": {**p["trial"], "args": TRIAL_ARGS, "resources": {"cpu": 1, "mem_mb": 2000, "gpu": 0}},
        "runner": {"scheduler": "local_cwd", "cfg": {}},
        "optimizer": optimizer,
    }


def trial_cost(t: dict[str, Any], by_index: dict[int, dict[str, Any]], max_epochs: int) -> float:
    fid = t.get("fidelity") or t["parameters"].get("epochs") or max_epochs
    src = t.get("promoted_from")
    resumed = (t.get("info") or {}).get("resumed_from")
    if src is not None and resumed:
        return float(fid) - float(by_index[src].get("fidelity") or 0.0)
    return float(fid)


def run_nasctl(problem: str, method: str, seed: int, args: argparse.Namespace, work: str) -> dict[str, Any]:
    spec = make_spec(problem, method, seed, args.max_epochs, args.eta, args.budget_epochs, args.parallelism)
    path = os.path.join(work, f"{spec['name']}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(spec, f)
    db = f"sqlite:///{os.path.join(work, spec['name'] + '.db')}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "nasctl"]
    t0 = time.monotonic()
    subprocess.run([*cli, "run", path, "--db", db, "--workdir", os.path.join(work, spec["name"]), "--json"],
                   env=env, capture_output=True, text=True, check=False)
    return {"records": _records(cli, env, spec["name"], db, args.max_epochs),
            "wall_seconds": time.monotonic() - t0}


def _records(cli: list[str], env: dict[str, str], name: str, db: str, max_epochs: int) -> list[dict[str, Any]]:
    r = subprocess.run([*cli, "trials", name, "--db", db, "--json"], env=env, capture_output=True, text=True,
                       check=False)
    if r.returncode != 0:
        return []
    trials = json.loads(r.stdout)
    by_index = {t["index"]: t for t in trials}
    out = []
    for t in sorted(trials, key=lambda t: t["ended_at"] or "~"):
        if t["status"] != "COMPLETED":
            continue
        out.append({"trial": t["index"], "epochs": t.get("fidelity") or t["parameters"].get("epochs"),
                    "cost_epochs": trial_cost(t, by_index, max_epochs),
                    "train_seconds": float((t.get("info") or {}).get("train_seconds", 0.0)),
                    "values": t["values"], "promoted_from": t.get("promoted_from")})
    return out


def run_moasha(problem: str, seed: int, args: argparse.Namespace, work: str) -> dict[str, Any]:
    from nasctl.search_spaces import get_search_space
    from nasctl.spec import FidelitySpec

    p = PROBLEMS[problem]
    rungs = list(FidelitySpec(parameter="epochs", min=1, max=args.max_epochs, eta=args.eta).rungs)
    job = {
        "space": p["search_space"], "objectives": {k: o["goal"] == "maximize" for k, o in p["objectives"].items()},
        "rungs": rungs, "eta": args.eta, "seed": seed, "parallelism": args.parallelism,
        "budget_epochs": args.budget_epochs, "python": sys.executable, "pythonpath": str(ROOT),
        "fidelity_parameter": "epochs",
        "command": ["-m", get_search_space(p["trial"]["search_space"]).module,
                    *(["--dataset", p["trial"]["dataset"]] if "dataset" in p["trial"] else [])],
        "args": TRIAL_ARGS,
    }
    jpath, opath = os.path.join(work, f"moasha-{problem}-{seed}.json"), os.path.join(work, f"out-{problem}-{seed}.json")
    with open(jpath, "w") as f:
        json.dump(job, f)
    t0 = time.monotonic()
    r = subprocess.run([SYNETUNE_PYTHON, str(ROOT / "benchmarks" / "synetune_moasha.py"), jpath, opath],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"MO-ASHA failed: {r.stderr[-3000:]}")
    out = json.load(open(opath))
    return {"records": out["records"], "wall_seconds": time.monotonic() - t0}


def hv_trace(records: list[dict[str, Any]], problem: str, max_epochs: int) -> list[tuple[float, float, float]]:
    """(cumulative epochs, cumulative training seconds, hypervolume of top-rung results) after each result."""
    from nasctl.pareto import compute_front
    from nasctl.spec import Objective

    objectives = {k: Objective(**o) for k, o in PROBLEMS[problem]["objectives"].items()}
    done: list[tuple[int, dict[str, float]]] = []
    out, epochs, secs = [], 0.0, 0.0
    for k, r in enumerate(records):
        epochs += r["cost_epochs"]
        secs += r["train_seconds"]
        if r["epochs"] is not None and float(r["epochs"]) >= max_epochs:
            done.append((k, {m: r["values"][m] for m in objectives}))
        hv = compute_front(done, objectives).hypervolume if done else 0.0
        out.append((epochs, secs, hv))
    return out


def hv_at(trace: list[tuple[float, float, float]], epochs: float) -> float:
    best = 0.0
    for e, _, hv in trace:
        if e <= epochs + 1e-9:
            best = hv
    return best


def hv_at_seconds(trace: list[tuple[float, float, float]], seconds: float, budget_epochs: float) -> float:
    """The hypervolume after `seconds` of training, counting results within the epoch budget only."""
    best = 0.0
    for e, sec, hv in trace:
        if sec <= seconds + 1e-9 and e <= budget_epochs + 1e-9:
            best = hv
    return best


def epochs_to_reach(trace: list[tuple[float, float, float]], target: float) -> float | None:
    for e, _, hv in trace:
        if hv >= target - 1e-12 and target > 0:
            return e
    return None


def report(results: dict[str, Any], plot: str | None) -> None:
    meta = results["meta"]
    for problem, by_method in results["runs"].items():
        print(f"\n{problem}: max epochs {meta['max_epochs']}, eta {meta['eta']}, budget {meta['budget_epochs']} "
              f"epochs, parallelism {meta['parallelism']}")
        traces = {m: {s: hv_trace(r["records"], problem, meta["max_epochs"]) for s, r in runs.items()}
                  for m, runs in by_method.items()}
        full_final = {s: t[-1][2] for s, t in traces.get("full", {}).items() if t}
        grid = [meta["budget_epochs"] * f for f in (0.25, 0.4, 0.6, 1.0)]
        print(f"{'method':8} {'seeds':>5} " + " ".join(f"HV@{g:>5.0f}ep" for g in grid)
              + "  epochs->full HV  train s  wall s")
        for m, by_seed in traces.items():
            seeds = sorted(by_seed)
            cols = []
            for g in grid:
                vals = [hv_at(by_seed[s], g) for s in seeds]
                cols.append(f"{_mean(vals):>10.4g}")
            reach = []
            for s in seeds:
                if s in full_final and full_final[s] > 0:
                    e = epochs_to_reach(by_seed[s], full_final[s])
                    reach.append(f"{e:.0f}" if e is not None else "-")
            secs = _mean([by_seed[s][-1][1] if by_seed[s] else 0.0 for s in seeds])
            wall = _mean([by_method[m][s]["wall_seconds"] for s in seeds])
            print(f"{m:8} {len(seeds):>5} " + " ".join(cols) + f"  {'/'.join(reach) or '-':>15} {secs:8.1f} "
                  f"{wall:7.0f}")
        if "moasha" in traces:  # same-seed comparison with MO-ASHA: seeds ahead / common seeds, per column
            for m, by_seed in traces.items():
                common = sorted(set(by_seed) & set(traces["moasha"]))
                if m == "moasha" or not common:
                    continue
                ahead = [sum(hv_at(by_seed[s], g) > hv_at(traces["moasha"][s], g) for s in common) for g in grid]
                print(f"{m:8} above moasha on " + " ".join(f"{a:>4}/{len(common)}" for a in ahead)
                      + " seeds (same seeds, same columns)")
    if plot:
        _plot(results, plot)


def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Several results files as one (same settings; a later file's run of a seed wins)."""
    out: dict[str, Any] = {"meta": results[0]["meta"], "runs": {}}
    for r in results:
        if r["meta"]["budget_epochs"] != out["meta"]["budget_epochs"] or r["meta"]["max_epochs"] != \
                out["meta"]["max_epochs"]:
            raise SystemExit("error: the results files were made with different --budget-epochs or --max-epochs")
        for problem, by_method in r["runs"].items():
            for m, by_seed in by_method.items():
                out["runs"].setdefault(problem, {}).setdefault(m, {}).update(by_seed)
    return out


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def _plot(results: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta = results["meta"]
    problems = list(results["runs"])
    # top row: against training epochs; bottom row: against the trainers' own seconds
    fig, axes = plt.subplots(2, len(problems), figsize=(5.5 * len(problems), 8), squeeze=False)
    for col, problem in enumerate(problems):
        traces = {m: [hv_trace(r["records"], problem, meta["max_epochs"]) for r in runs.values()]
                  for m, runs in results["runs"][problem].items()}
        grid = [meta["budget_epochs"] * i / 50 for i in range(51)]
        last = max((t[-1][1] for ts in traces.values() for t in ts if t), default=1.0)
        seconds = [last * i / 50 for i in range(51)]
        for m, ts in traces.items():
            by_epochs = [_mean([hv_at(t, g) for t in ts]) for g in grid]
            by_seconds = [_mean([hv_at_seconds(t, g, meta["budget_epochs"]) for t in ts]) for g in seconds]
            color = f"C{METHODS.index(m)}" if m in METHODS else None  # one colour per method in every panel
            axes[0][col].plot(grid, by_epochs, label=f"{m} ({len(ts)} seeds)", color=color)
            axes[1][col].plot(seconds, by_seconds, label=f"{m} ({len(ts)} seeds)", color=color)
        axes[0][col].set_title(f"{problem} (max {meta['max_epochs']} epochs, eta {meta['eta']})")
        axes[0][col].set_xlabel("training epochs spent (all trials)")
        axes[1][col].set_xlabel("training seconds spent (trainer.fit, all trials; within the epoch budget)")
        for ax in (axes[0][col], axes[1][col]):
            ax.set_ylabel("hypervolume, top-rung results")
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> int:
    from benchmarks.args import positive_int, seeds

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="digits,mnist1d")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--seeds", type=seeds, default=[0, 1, 2])
    ap.add_argument("--max-epochs", type=positive_int, default=9)
    ap.add_argument("--eta", type=positive_int, default=3)
    ap.add_argument("--budget-epochs", type=positive_int, default=108)
    ap.add_argument("--parallelism", type=positive_int, default=2)
    ap.add_argument("--out", default="benchmarks/results/multifidelity.json")
    ap.add_argument("--report", nargs="+", help="print the table of results files (merged) instead of running")
    ap.add_argument("--plot", help="with --report: write the figure here")
    ap.add_argument("--report-seeds", type=seeds, help="with --report: only these seeds (to compare methods on the "
                                                        "same seeds)")
    ap.add_argument("--report-methods", help="with --report: only these methods (comma-separated)")
    args = ap.parse_args()
    if args.report:
        merged = merge([json.load(open(p)) for p in args.report])
        if args.report_seeds is not None:
            keep = {str(s) for s in args.report_seeds}
            for by_method in merged["runs"].values():
                for m in by_method:
                    by_method[m] = {s: r for s, r in by_method[m].items() if s in keep}
        if args.report_methods:
            keep_methods = set(args.report_methods.split(","))
            for problem in merged["runs"]:
                merged["runs"][problem] = {m: r for m, r in merged["runs"][problem].items() if m in keep_methods}
        report(merged, args.plot)
        return 0
    problems = [p for p in args.problems.split(",") if p]
    methods = [m for m in args.methods.split(",") if m]
    for p in problems:
        if p not in PROBLEMS:
            ap.error(f"--problems: unknown problem {p!r}; use some of {', '.join(PROBLEMS)}")
    for m in methods:
        if m not in METHODS:
            ap.error(f"--methods: unknown method {m!r}; use some of {', '.join(METHODS)}")
    results: dict[str, Any] = {"meta": {k: v for k, v in vars(args).items()
                                        if k not in ("report", "plot", "report_seeds")},
                               "runs": {}}
    if os.path.exists(args.out):  # go on where an interrupted run stopped
        old = json.load(open(args.out))
        if old.get("meta", {}).get("budget_epochs") == args.budget_epochs:
            results["runs"] = old["runs"]
    with tempfile.TemporaryDirectory(prefix="nasctl-mf-") as work:
        for seed in args.seeds:
            for problem in problems:
                for m in methods:
                    done = results["runs"].setdefault(problem, {}).setdefault(m, {})
                    if str(seed) in done:
                        continue
                    t0 = time.monotonic()
                    res = run_moasha(problem, seed, args, work) if m == "moasha" else \
                        run_nasctl(problem, m, seed, args, work)
                    done[str(seed)] = res
                    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
                    with open(args.out + ".tmp", "w") as f:
                        json.dump(results, f)
                    os.replace(args.out + ".tmp", args.out)
                    spent = sum(r["cost_epochs"] for r in res["records"])
                    print(f"{problem} {m} seed {seed}: {len(res['records'])} results, {spent:.0f} epochs, "
                          f"{time.monotonic() - t0:.0f}s", flush=True)
    report(results, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
