"""Two designs of multi-fidelity proposals, measured on synthetic learning curves.

Both designs promote by the same rule (nasctl/optimizer/promotion.py) and fit
one GP over every rung with the fidelity as an input; they differ in the
fidelity new configurations are scored at: `max` (the top rung, nasctl's
default) or `min` (the rung they start at). `full` is the plain Ax optimizer
at full fidelity, for scale.

The problems are BoTorch's BraninCurrin (2-D) and DTLZ2 (4-D, 2 objectives),
turned into training runs: the second objective (like a parameter count) does
not depend on the epochs; the first (like an error) approaches its final value
as 1/epochs with a speed that depends on the configuration, so configurations
change rank between rungs. One worker, in process (no trial processes): the
cost is the epochs trained (a promotion pays only the epochs it adds).

    python benchmarks/multifidelity_designs.py --seeds 0-2 --max-epochs 9 --budget-epochs 72
    python benchmarks/multifidelity_designs.py --report benchmarks/results/multifidelity_designs.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any, Literal

# dimension and reference point (BoTorch's) of each problem
PROBLEMS = {"branincurrin": (2, {"f1": 18.0, "f2": 6.0}), "dtlz2": (4, {"f1": 1.1, "f2": 1.1}),
            "zdt1": (4, {"f1": 11.0, "f2": 11.0})}


def make_problem(name: str) -> Any:
    from botorch.test_functions.multi_objective import DTLZ2, ZDT1, BraninCurrin

    if name == "zdt1":
        return ZDT1(dim=4, num_objectives=2)
    return BraninCurrin() if name == "branincurrin" else DTLZ2(dim=4, num_objectives=2)


def evaluate(problem: Any, name: str, x: list[float], epochs: float, max_epochs: float) -> dict[str, float]:
    import torch

    y = problem(torch.tensor([x], dtype=torch.double))[0].tolist()
    ref = PROBLEMS[name][1]["f1"]
    slowness = 0.5 + 0.5 * math.sin(7.0 * x[-1] + 3.0 * x[0]) ** 2  # how slowly this configuration converges
    gap = (max_epochs / epochs - 1.0) / (max_epochs - 1.0)  # 1 at one epoch, 0 at max
    return {"f1": y[0] + ref * slowness * gap, "f2": y[1]}


def spec_for(name: str, design: str, seed: int, max_epochs: int, eta: int) -> Any:
    """`design`: `full`, or where proposals are scored (`max`, `min`) with an optional
    promotion rule (`max-strict`; `eager` when none is named) and an optional rank
    (`max-eager-model`; `rung` when none is named)."""
    from nasctl.spec import parse_spec

    dim, thresholds = PROBLEMS[name]
    space = "\n".join(f"  x{i}: {{type: float, low: 0.0, high: 1.0}}" for i in range(dim))
    parts = design.split("-")
    rule = parts[1] if len(parts) > 1 else "eager"
    rank = parts[2] if len(parts) > 2 else "rung"
    fid = "" if design == "full" else (f", fidelity: {{parameter: epochs, min: 1, max: {max_epochs}, eta: {eta}, "
                                       f"promotion: {rule}, rank: {rank}}}")
    return parse_spec(
        f"name: {name}-{design}\nsearch_space:\n{space}\n"
        f"objectives:\n  f1: {{goal: minimize, threshold: {thresholds['f1']}}}\n"
        f"  f2: {{goal: minimize, threshold: {thresholds['f2']}}}\n"
        "budget: {max_trials: 1000, parallelism: 1}\ntrial: {script: train.py}\n"
        f"optimizer: {{initial_trials: 5, seed: {seed}{fid}}}\n")


def run(name: str, design: str, seed: int, args: argparse.Namespace) -> list[tuple[float, float]]:
    from nasctl.optimizer.ax_optimizer import AxOptimizer
    from nasctl.optimizer.multifidelity import MultiFidelityOptimizer
    from nasctl.pareto import compute_front

    spec = spec_for(name, design, seed, args.max_epochs, args.eta)
    propose_at: Literal["max", "min"] = "min" if design.startswith("min") else "max"
    opt = AxOptimizer(spec) if design == "full" else MultiFidelityOptimizer(spec, propose_at=propose_at)
    problem = make_problem(name)
    dim = PROBLEMS[name][0]
    fid_of: dict[int, float] = {}
    top: list[tuple[int, dict[str, float]]] = []
    spent, trace = 0.0, []
    while spent < args.budget_epochs:
        (c,) = opt.generate(1)
        e = float(c.parameters.get("epochs", args.max_epochs))
        values = evaluate(problem, name, [float(c.parameters[f"x{i}"]) for i in range(dim)], e, args.max_epochs)
        spent += e - (fid_of[c.promoted_from] if c.promoted_from is not None else 0.0)
        fid_of[c.index] = e
        opt.complete(c.index, values)
        if e >= args.max_epochs:
            top.append((c.index, values))
        trace.append((spent, compute_front(top, spec.objectives).hypervolume if top else 0.0))
    return trace


def hv_at(trace: list[tuple[float, float]], epochs: float) -> float:
    best = 0.0
    for e, hv in trace:
        if e <= epochs + 1e-9:
            best = hv
    return best


def main() -> int:
    from benchmarks.args import positive_int, seeds

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=seeds, default=[0, 1, 2])
    ap.add_argument("--problems", default="branincurrin,dtlz2")
    ap.add_argument("--designs", default="max,min,full",
                    help="full, or max/min (where proposals are scored) with -strict or -eager (the default), "
                         "then -rung (the default) or -model (the promotion rank)")
    ap.add_argument("--max-epochs", type=positive_int, default=9)
    ap.add_argument("--eta", type=positive_int, default=3)
    ap.add_argument("--budget-epochs", type=positive_int, default=72)
    ap.add_argument("--out", default="benchmarks/results/multifidelity_designs.json")
    ap.add_argument("--report", help="print the table of this results file instead of running")
    args = ap.parse_args()
    if args.report:
        report(json.load(open(args.report)))
        return 0
    results: dict[str, Any] = {"meta": {k: v for k, v in vars(args).items() if k != "report"}, "runs": {}}
    for seed in args.seeds:
        for name in args.problems.split(","):
            for design in args.designs.split(","):
                t0 = time.process_time()
                trace = run(name, design, seed, args)
                results["runs"].setdefault(name, {}).setdefault(design, {})[str(seed)] = trace
                print(f"{name} {design} seed {seed}: HV {trace[-1][1]:.4g} after {trace[-1][0]:.0f} epochs, "
                      f"{len(trace)} trials, {time.process_time() - t0:.0f} CPU s", flush=True)
                with open(args.out, "w") as f:
                    json.dump(results, f)
    report(results)
    return 0


def report(results: dict[str, Any]) -> None:
    grid = [results["meta"]["budget_epochs"] * f for f in (0.25, 0.5, 0.75, 1.0)]
    for name, by_design in results["runs"].items():
        print(f"\n{name}: mean hypervolume at equal epochs")
        print(f"{'design':16} {'seeds':>5} " + " ".join(f"@{g:>5.0f}ep" for g in grid))
        for design, by_seed in by_design.items():
            cols = [sum(hv_at(t, g) for t in by_seed.values()) / len(by_seed) for g in grid]
            print(f"{design:16} {len(by_seed):>5} " + " ".join(f"{c:>8.4g}" for c in cols))


if __name__ == "__main__":
    sys.exit(main())
