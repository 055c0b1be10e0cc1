"""Optimizer ablations: one setting of nasctl's optimizer changed, the rest as shipped.

    PYTHONPATH=$PWD python benchmarks/ablation.py --problem branin_currin \
        --variants default,no-raw-scale,botorch-budget --seeds 0-29 --budget 30

Each (variant, seed) drives `AxOptimizer` directly: propose one trial, evaluate
it, report it, repeat, with the benchmark problem's reference point as the
objective thresholds (the spec of `sample_efficiency.nasctl_spec`). That is the
optimizer of the loop without the loop around it, so a run takes seconds and
many seeds fit in a session; its trajectories differ from the loop's grid runs
(which also differ between machines), so compare variants with each other, not
with the grid. Variants:

- default: as shipped;
- no-raw-scale: hypervolume improvements on the model's (log) scale, as Ax does;
- no-log-scale: no objective modelled on the log scale;
- botorch-budget: BoTorch's acquisition budget (20 restarts from 1,024 raw samples);
- budget-R-S: R restarts from S raw samples;
- mc-N: N quasi-MC samples for the hypervolume improvement;
- no-repeat-guard: model proposals that repeat a trial are kept;
- no-untried: with features held fixed (multi-fidelity), Ax's own optimiser over
  the mixed space instead of the untried configurations listed (`untried`);
- pending-at-top: with features held fixed (multi-fidelity), every
  configuration in flight at another rung is a pending point at those features
  too, not only the trials pending there (Ax's rule; `untried.pending_at_fixed`);
- list-unfixed: every fully discrete space with nothing held fixed is listed
  (up to `untried.MAX_ENUMERATED` configurations) and scored whole by the exact
  acquisition, without the screen (`screen`), whatever its size;
- screen: a list longer than BoTorch's 10,000 is screened to 256 by a cheap
  hypervolume improvement before the exact one, and such a fully discrete space
  with nothing held fixed (NAS-Bench-201's 15,625 cells) is listed so, instead
  of Ax's local search from a few starts (`screen.SCREEN`);
- continue-paused: with features held fixed (multi-fidelity), configurations
  trained only to a lower rung are among the model's candidates too, and one it
  chooses continues from its checkpoint to the next rung (`untried.CONTINUE_PAUSED`);
- end-game: with multi-fidelity and `budget.max_gpu_hours`, once too little of
  the budget is left for a new configuration to climb to the top rung, free
  slots promote the best waiting trials of the rung below the top past the
  rung's quota first (`multifidelity.END_GAME`);
- carry-thresholds: with multi-fidelity, each rung below the top is also ranked
  by the objectives' thresholds carried down to it (moved by what the
  configurations within them at the top improved after that rung, but for the
  slowest tenth; `multifidelity.CARRY_THRESHOLDS`);
- front-starts-K: the local search of a fully discrete space too large to list
  starts from the K best untried neighbours of the acquisition's baseline as
  well as from its random starts (`frontstarts.FRONT_STARTS`; 0 turns it off);
- warm-from-N: GP fits start warm only from N training points on (`gpfit.WARM_FROM`);
- cold-fits: every GP fit starts from Ax's initial hyperparameters (no warm start);
- one-hot: `auto` never picks the categorical method (unordered choices are
  one-hot encoded for the plain GP);
- no-single-candidate, no-numpy-boxes, no-batched-boxes, no-pairwise-pruning,
  no-joint-posterior: one speed-up of nasctl's qLogNEHVI subclass off
  (`acquisition.SPEEDUPS`; the same proposals, compare the CPU time).
  no-batched-boxes decomposes each sample's front on its own in NumPy;
  no-numpy-boxes leaves the decompositions to BoTorch (batched-boxes needs it);
- min-observed-N: the model waits for N results before it starts, with
  quasi-random points for the slots that free meanwhile (default
  `strategies.MIN_OBSERVED_RESULTS`: 1, the model from the first result);
  meaningful with --parallelism, where
  the quasi-random start is spent before its results are in;
- botorch-retry: BoTorch's second optimisation of a continuous space's
  acquisition after a restart warns (`strategies.RETRY_ON_OPTIMIZATION_WARNING`);
- stock-strategy: Ax's default generation strategy (what `Client` chooses when
  given none) inside nasctl's optimizer: none of nasctl's generator settings;
- idle-wait: while the model waits for its results (min-observed-N), freed
  slots stay idle instead of getting quasi-random points;
- cap-start: the first request gets at most `initial_trials` candidates
  (`strategies.START_WITHIN_REQUEST`), the other free slots wait for the
  model; with start-5, min-observed-3 and idle-wait what a stock Ax `Client`
  does at parallelism;
- start-N: a quasi-random start of N trials (`optimizer.initial_trials`; by
  default 5, or the parallelism where that is larger). The first request
  still fills every free slot with quasi-random points (Ax counts the
  start's trials only between requests), so below K it changes what
  follows a failure, not the start;
- brackets-B: with multi-fidelity, new configurations start at one of the B
  lowest rungs (asynchronous Hyperband), the bracket whose starts have cost
  least so far (`multifidelity.BRACKETS`);
- a+b: the changes of a and of b (budget-20-1024+mc-64, no-numpy-boxes+no-single-candidate).

With `--parallelism K` (K > 1) the optimizer is driven asynchronously on the
simulated clock of `benchmarks/parallel.py` (K trials at once, log-normal
durations fixed by the parameters and the seed; a freed slot is refilled at
once, asking the optimizer for as many candidates as slots are free, with the
running trials pending): the optimizer at parallelism without the loop around
it (the loop at parallelism is `sample_efficiency.py --parallelism`). Results
then go to --out/k<K>/.

Results go to --out/<problem>/<variant>/seedNN.json (finished runs are skipped);
`--jobs N` runs N of them at a time (one per core; proposal CPU times are
thread times, so they hold up under that load, unlike wall-clock times).
The script prints the mean hypervolume / max hypervolume at 10, 20 and 30
trials for each variant, how many seeds each variant did better and worse on
than the first variant, the mean of those per-seed differences at the last
checkpoint with its standard error, and the median CPU time of a proposal at
20-29 trials (and, for runs of 50 trials or more, the median and 95th
percentile at 40-49 trials).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.problems import EXTRA_PROBLEMS, PROBLEMS, get_problem, hv_trace  # noqa: E402
from benchmarks import args as argtypes  # noqa: E402
from benchmarks import summary  # noqa: E402
from benchmarks.sample_efficiency import nasctl_spec  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "ablation"
SPEEDUPS = ("single-candidate", "numpy-boxes", "batched-boxes", "pairwise-pruning", "joint-posterior")
"""The names in `nasctl.optimizer.acquisition.SPEEDUPS` (not imported here: names are
checked before anything heavy is imported)."""
CHECKPOINTS = (10, 20, 30)
SPEC = "spec"
"""The "module" of a variant's change to the spec's `optimizer` section (`variant_spec`)."""


def stock_strategy(spec: Any, method: str, device: str | None) -> Any:
    """Ax's default generation strategy (what `Client` chooses when given none),
    seeded by the spec's seed: none of nasctl's settings (transforms, acquisition,
    budgets, GP fits, the model's start) but still nasctl's optimizer around it."""
    from ax.api.utils.generation_strategy_dispatch import choose_generation_strategy
    from ax.api.utils.structs import GenerationStrategyDispatchStruct

    return choose_generation_strategy(
        GenerationStrategyDispatchStruct(initialization_random_seed=spec.optimizer.seed, torch_device=device))


def parse_variant(name: str) -> list[tuple[str, str, Any]]:
    """The settings variant `name` changes: (module of nasctl.optimizer, attribute,
    new value). Nothing is imported here, so names are checked before any run starts.
    `a+b` makes the changes of both. Raises ValueError for an unknown name."""
    if "+" in name:
        return [change for part in name.split("+") for change in parse_variant(part)]
    fixed: dict[str, list[tuple[str, str, Any]]] = {
        "default": [],
        "no-raw-scale": [("logscale", "RAW_SCALE", False)],
        "no-log-scale": [("logscale", "SPAN", math.inf)],
        "botorch-budget": [("strategies", "acquisition_budget", lambda *_: {"num_restarts": 20, "raw_samples": 1024})],
        "no-repeat-guard": [("novelty", "REPEAT_RADIUS", 0.0)],
        "no-untried": [("untried", "MAX_ENUMERATED", 0)],
        "pending-at-top": [("untried", "PENDING_AT_FIXED", True)],
        "list-unfixed": [("untried", "UNFIXED", True), ("screen", "SCREEN", False)],
        "screen": [("screen", "SCREEN", True)],
        "continue-paused": [("untried", "CONTINUE_PAUSED", True)],
        "end-game": [("multifidelity", "END_GAME", True)],
        "carry-thresholds": [("multifidelity", "CARRY_THRESHOLDS", True)],
        "late-full": [("multifidelity", "LATE_FULL_FROM", 0.5)],
        "front-distance": [("promotion", "DISTANCE", True)],
        "cost-aware": [("costaware", "COST_AWARE", True)],
        "cold-fits": [("gpfit", "COLD_GROWTH", 1.0)],
        "one-hot": [("methods", "categorical_parameters", lambda *_: [])],
        "idle-wait": [("strategies", "FILL_WHILE_WAITING", False)],
        "cap-start": [("strategies", "START_WITHIN_REQUEST", False)],
        "stock-strategy": [("ax_optimizer", "build_strategy", stock_strategy)],
        "botorch-retry": [("strategies", "RETRY_ON_OPTIMIZATION_WARNING", True)],
    }
    if name in fixed:
        return fixed[name]
    if name.startswith("no-") and name[3:] in SPEEDUPS:
        return [("acquisition", "SPEEDUPS", ("without", name[3:]))]
    parts = name.split("-")
    if parts[0] == "budget" and len(parts) == 3 and all(x.isdigit() for x in parts[1:]):
        budget = {"num_restarts": int(parts[1]), "raw_samples": int(parts[2])}
        return [("strategies", "acquisition_budget", lambda *_: budget)]
    if parts[0] == "mc" and len(parts) == 2 and parts[1].isdigit():
        return [("strategies", "mc_samples", lambda *_: int(parts[1]))]
    if parts[0] == "warm" and len(parts) == 3 and parts[1] == "from" and parts[2].isdigit():
        return [("gpfit", "WARM_FROM", int(parts[2]))]
    if parts[0] == "front" and len(parts) == 3 and parts[1] == "starts" and parts[2].isdigit():
        return [("frontstarts", "FRONT_STARTS", int(parts[2]))]
    if parts[0] == "brackets" and len(parts) == 2 and parts[1].isdigit() and int(parts[1]) > 0:
        return [("multifidelity", "BRACKETS", int(parts[1]))]
    if name.startswith("min-observed-") and name[13:].isdigit() and int(name[13:]) > 0:
        return [("strategies", "MIN_OBSERVED_RESULTS", int(name[13:]))]
    if parts[0] == "start" and len(parts) == 2 and parts[1].isdigit() and int(parts[1]) > 0:
        return [(SPEC, "initial_trials", int(parts[1]))]
    known = [*fixed, *(f"no-{s}" for s in SPEEDUPS)]
    raise ValueError(f"unknown variant {name!r} (known: {', '.join(known)}, budget-R-S, mc-N, min-observed-N, start-N, brackets-B, a+b)")


def variant_list(text: str) -> list[str]:
    """`--variants`: comma-separated names, each checked by `parse_variant`."""
    names = text.split(",")
    for name in names:
        try:
            parse_variant(name)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return names


def apply_variant(name: str) -> None:
    """Make variant `name`'s changes in this process, before an optimizer is built."""
    import importlib

    for module, attribute, value in parse_variant(name):
        if module == SPEC:
            continue  # see `variant_spec`
        target = importlib.import_module(f"nasctl.optimizer.{module}")
        if isinstance(value, tuple) and value[0] == "without":  # a speed-up switched off
            value = getattr(target, attribute) - {value[1]}
        setattr(target, attribute, value)


def variant_spec(name: str, spec: Any) -> Any:
    """`spec` with variant `name`'s changes to the experiment's optimizer settings."""
    changes = {attribute: value for module, attribute, value in parse_variant(name) if module == SPEC}
    return spec.model_copy(update={"optimizer": spec.optimizer.model_copy(update=changes)}) if changes else spec


def run_one(problem_name: str, variant: str, seed: int, budget: int, parallelism: int = 1) -> dict[str, Any]:
    from nasctl.orchestration.control import prepare_orchestrator_process

    prepare_orchestrator_process()
    from nasctl.optimizer import ax_optimizer as optimizer

    optimizer.build_extension()
    apply_variant(variant)
    problem = get_problem(problem_name)
    spec = variant_spec(variant, nasctl_spec(problem, seed, budget))
    if parallelism > 1:
        return _run_async(optimizer, problem, spec.model_copy(
            update={"budget": spec.budget.model_copy(update={"parallelism": parallelism})}), variant, seed, budget,
            parallelism)
    opt = optimizer.AxOptimizer(spec)
    values, methods, cpu, wall = [], [], [], []
    for _ in range(budget):
        c0, w0 = time.thread_time(), time.perf_counter()
        (cand,) = opt.generate(1)
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
        v = problem.evaluate(cand.parameters)
        opt.complete(cand.index, v)
        values.append(v)
        methods.append(cand.method)
    return {"problem": problem_name, "variant": variant, "seed": seed, "budget": budget, "values": values,
            "methods": methods, "gen_cpu_seconds": cpu, "gen_seconds": wall, "hv": hv_trace(problem, values),
            "loadavg": os.getloadavg(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _run_async(optimizer: Any, problem: Any, spec: Any, variant: str, seed: int, budget: int,
               parallelism: int) -> dict[str, Any]:
    """The optimizer at `parallelism` on the simulated clock (`parallel.simulate`)."""
    from benchmarks import parallel

    opt = optimizer.AxOptimizer(spec)
    methods: dict[int, str] = {}

    def ask(n: int) -> list[tuple[Any, dict[str, Any]]]:
        cands = opt.generate(n)
        methods.update((c.index, c.method) for c in cands)
        return [(c.index, dict(c.parameters)) for c in cands]

    res = parallel.simulate(problem, ask, opt.complete, seed, budget, parallelism)
    return {"problem": problem.name, "variant": variant, "seed": seed, "budget": budget, "parallelism": parallelism,
            "values": res["values"], "params": res["params"], "end": res["end"], "hv": res["hv"],
            "gen_cpu_seconds": res["gen_cpu_seconds"], "methods": sorted(methods.items()),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def run_path(out: Path, problem: str, variant: str, seed: int) -> Path:
    """Where the run of `variant` with `seed` on `problem` is stored."""
    return out / problem / variant / f"seed{seed:02d}.json"


def report(out: Path, problem: str, variants: list[str], seeds: list[int]) -> str:
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for v in variants:
        runs[v] = {}
        for s in seeds:
            path = run_path(out, problem, v, s)
            if path.exists():
                runs[v][s] = json.loads(path.read_text())
    base = variants[0]
    lengths = [len(r["hv"]) for done in runs.values() for r in done.values()]
    if not lengths:
        return "no results"
    checkpoints = [c for c in CHECKPOINTS if c <= min(lengths)] or [min(lengths)]
    k = checkpoints[-1] - 1
    head = "| variant | seeds | " + " | ".join(f"HV@{c}" for c in checkpoints)
    head += (f" | better / worse than {base} at {checkpoints[-1]}"
             f" | difference at {checkpoints[-1]} (standard error) | proposal CPU at 20-29 trials (median) |")
    late = min(lengths) >= 50
    if late:
        head += " proposal CPU at 40-49 trials (median, p95) | wall-clock at 40-49 (median, p95) |"
    lines = [head, "|" + "---|" * (len(checkpoints) + 5 + 2 * late)]
    for v in variants:
        done = runs[v]
        if not done:
            continue
        means = [statistics.mean(r["hv"][c - 1] for r in done.values()) for c in checkpoints]
        cpu = [x for r in done.values() for x in r["gen_cpu_seconds"][19:29]]
        diffs = [done[s]["hv"][k] - runs[base][s]["hv"][k] for s in done if s in runs[base]]
        better = sum(d > 1e-12 for d in diffs)
        worse = sum(d < -1e-12 for d in diffs)
        versus = "" if v == base else f"{better} / {worse}"
        change = ""
        if v != base and diffs:
            change = f"{statistics.mean(diffs):+.4f}"
            if len(diffs) > 1:
                change += f" ({statistics.stdev(diffs) / math.sqrt(len(diffs)):.4f})"
        cost = f"{statistics.median(cpu):.2f} s" if cpu else "-"
        row = (f"| {v} | {len(done)} | " + " | ".join(f"{m:.3f}" for m in means)
               + f" | {versus} | {change} | {cost} |")
        if late:
            cpu40 = sorted(x for r in done.values() for x in r["gen_cpu_seconds"][39:49])
            p95 = cpu40[min(len(cpu40) - 1, int(0.95 * len(cpu40)))]
            row += f" {statistics.median(cpu40):.2f} s, {p95:.2f} s |"
            wall40 = sorted(x for r in done.values() for x in (r.get("gen_seconds") or [])[39:49])
            row += (f" {statistics.median(wall40):.2f} s, {wall40[min(len(wall40) - 1, int(0.95 * len(wall40)))]:.2f} s |"
                    if wall40 else " - |")
        lines.append(row)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", required=True, choices=PROBLEMS + EXTRA_PROBLEMS)
    ap.add_argument("--variants", type=variant_list, default=["default"],
                    help="comma-separated; the first is the baseline")
    ap.add_argument("--seeds", type=argtypes.seeds, default=argtypes.seeds("0-9"), help="e.g. 0-29 or 0,3,5")
    ap.add_argument("--budget", type=argtypes.positive_int, default=30)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--jobs", type=argtypes.positive_int, default=1, help="runs at a time (default 1)")
    ap.add_argument("--parallelism", type=argtypes.positive_int, default=1,
                    help="trials at once on the simulated clock (default 1: propose, evaluate, report, repeat)")
    ap.add_argument("--one", nargs=2, metavar=("VARIANT", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.parallelism > 1:
        args.out = args.out / f"k{args.parallelism}"
    if args.one:
        variant, seed = args.one[0], int(args.one[1])
        path = run_path(args.out, args.problem, variant, seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run_one(args.problem, variant, seed, args.budget, args.parallelism)))
        return 0
    variants, seeds = args.variants, args.seeds
    # seed by seed, so that an interrupted run leaves paired results behind
    pending = [(v, s) for s in seeds for v in variants
               if not run_path(args.out, args.problem, v, s).exists()]

    stop = threading.Event()  # after a failure, start nothing new

    def one(run: tuple[str, int]) -> bool:
        v, s = run
        if stop.is_set():
            return False
        # one process per run: a variant patches module state for the whole process
        cmd = [sys.executable, __file__, "--problem", args.problem, "--budget", str(args.budget),
               "--out", str(args.out.parent if args.parallelism > 1 else args.out), "--one", v, str(s),
               "--parallelism", str(args.parallelism)]
        ok = subprocess.run(cmd, check=False).returncode == 0
        print(f"{args.problem} {v} seed {s}: {'done' if ok else 'failed'}", file=sys.stderr, flush=True)
        if not ok:
            stop.set()
        return ok

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        if not all(list(pool.map(one, pending))):
            return 1
    print(report(args.out, args.problem, variants, seeds))
    # the summary of every run under --out, all problems and parallelisms (the file git keeps)
    root = args.out.parent if args.parallelism > 1 else args.out
    given = argv if argv is not None else sys.argv[1:]
    summary.write(root, (*CHECKPOINTS, 50), "python benchmarks/ablation.py " + " ".join(given))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
