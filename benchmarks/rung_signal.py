"""What a low rung says about the top rung, measured on real learning curves.

`collect` trains N quasi-random configurations of a benchmarks/multifidelity.py
problem to the maximum epochs through `nasctl run` (Sobol, the same N
configurations for every training seed), once per training seed, and keeps
each trial's val_acc after every epoch from its TensorBoard file. The trainer
uses a constant learning rate, so the value after epoch k is what a k-epoch
trial reports.

`report` prints, per problem:

- how well each rung ranks the configurations' top-rung accuracy (Spearman),
  and how much retraining the same configuration with another seed moves its
  top-rung accuracy, next to the spread between configurations;
- a simulation of the issue's target on these curves: configurations arrive
  in a random order (as quasi-random proposals do), `full` trains the first
  `budget/max` of them to the top, and successive halving (nasctl's own
  `choose_promotion`, one trial at a time) ranks rungs by the measured values
  (`strict`, `eager`); by the same values as if the objectives had no
  thresholds (`, range`: the reference point of the ranking is then 0.1
  beyond the rung's worst values); or by the top-rung value each
  configuration will reach (`oracle`: perfect foresight for the same rule).
  The table gives the mean hypervolume after 40% of the budget's epochs and
  how often each has reached `full`'s final hypervolume by then.

    python benchmarks/rung_signal.py collect --problems digits,mnist1d --configs 48 --train-seeds 0-2 \\
        --out benchmarks/results/rung_signal.json
    python benchmarks/rung_signal.py report benchmarks/results/rung_signal.json --draws 2000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.multifidelity import PROBLEMS, TRIAL_ARGS, make_spec  # noqa: E402
from benchmarks.multifidelity_designs import hv_at  # noqa: E402


# --- collect ---------------------------------------------------------------------------------------
def collect(problem: str, configs: int, train_seed: int, max_epochs: int, parallelism: int,
            work: str) -> list[dict[str, Any]]:
    """One Sobol run of `configs` trials at `max_epochs`, trained with `train_seed`."""
    from nasctl.metrics.tensorboard import read_scalars

    spec = make_spec(problem, "random", 0, max_epochs, 3, configs * max_epochs, parallelism)
    spec["name"] = f"signal-{problem}-{train_seed}"
    spec["trial"]["args"] = {**TRIAL_ARGS, "seed": train_seed}
    path = os.path.join(work, spec["name"] + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(spec, f)
    db = f"sqlite:///{os.path.join(work, spec['name'] + '.db')}"
    wd = os.path.join(work, spec["name"])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "nasctl"]
    r = subprocess.run([*cli, "run", path, "--db", db, "--workdir", wd], env=env, capture_output=True, text=True,
                       check=False)
    if r.returncode != 0:
        raise RuntimeError(f"nasctl run failed: {r.stderr[-2000:]}")
    trials = json.loads(subprocess.run([*cli, "trials", spec["name"], "--db", db, "--json"], env=env,
                                       capture_output=True, text=True, check=True).stdout)
    out = []
    for t in sorted(trials, key=lambda t: t["index"]):
        if t["status"] != "COMPLETED":
            continue
        obs = [o for o in read_scalars(os.path.join(t["log_dir"], "tb")) if o.metric == "val_acc"]
        # one value per epoch (Lightning, in step order), then the trainer's final value at the last step
        per_epoch = [o.value for o in sorted(obs, key=lambda o: o.step)][:max_epochs]
        if len(per_epoch) != max_epochs:
            raise RuntimeError(f"trial {t['index']}: {len(per_epoch)} val_acc values, expected {max_epochs}")
        out.append({"index": t["index"], "parameters": t["parameters"],
                    "num_params": t["values"]["num_params"], "final": t["values"]["val_acc"],
                    "val_acc": per_epoch})
    return out


# --- report ----------------------------------------------------------------------------------------
def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation (ties share their mean rank); nan when either side is constant."""
    import warnings

    from scipy.stats import spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy warns on constant input, and answers nan
        return float(spearmanr(xs, ys).statistic)


def hypervolume(points: Sequence[tuple[float, float]], problem: str) -> float:
    from nasctl.pareto import compute_front
    from nasctl.spec import Objective

    objectives = {k: Objective(**o) for k, o in PROBLEMS[problem]["objectives"].items()}
    done = [(i, {"val_acc": a, "num_params": p}) for i, (a, p) in enumerate(points)]
    return compute_front(done, objectives).hypervolume if done else 0.0


class Pool:
    """Configurations with a learning curve per training seed: `acc(c, s, epochs)`."""

    def __init__(self, by_seed: dict[str, list[dict[str, Any]]]) -> None:
        seeds = sorted(by_seed)
        common = set.intersection(*({c["index"] for c in by_seed[s]} for s in seeds))
        self.configs = sorted(common)
        self.seeds = seeds
        self.curve = {(c["index"], s): c["val_acc"] for s in seeds for c in by_seed[s] if c["index"] in common}
        self.params = {c["index"]: c["num_params"] for c in by_seed[seeds[0]] if c["index"] in common}

    def acc(self, config: int, seed: str, epochs: int) -> float:
        return float(self.curve[(config, seed)][epochs - 1])


def simulate_asha(pool: Pool, order: Sequence[tuple[int, str]], rungs: Sequence[int], eta: int, eager: bool,
                  budget: float, problem: str, oracle: bool, thresholds: bool = True) -> list[tuple[float, float]]:
    """(epochs spent, top-rung hypervolume) after each result of successive halving run one trial at a
    time on the pool's curves: nasctl's promotion rule, new configurations in `order`. With
    `oracle`, every rung is ranked by the top-rung value its configurations will reach. Without
    `thresholds` the rule ranks as if the objectives had none (the reference point is then 0.1
    beyond the rung's worst values, the rule before thresholds set it); the hypervolume is always
    measured against them."""
    from nasctl.optimizer.promotion import RungResult, choose_promotion
    from nasctl.spec import Objective

    objectives = {k: Objective(**{**o, **({} if thresholds else {"threshold": None})})
                  for k, o in PROBLEMS[problem]["objectives"].items()}
    results: list[RungResult] = []
    promoted: set[int] = set()
    trial_config: list[tuple[int, str]] = []
    spent, top, trace, hv = 0.0, [], [], 0.0
    nxt = 0
    while spent < budget:
        pick = choose_promotion(results, promoted, len(rungs), eta, objectives, eager=eager)
        if pick is not None:
            promoted.add(pick.index)
            config, rung = trial_config[pick.index], pick.rung + 1
            cost = rungs[rung] - rungs[pick.rung]
        else:
            if nxt >= len(order):
                break
            config, rung, nxt = order[nxt], 0, nxt + 1
            cost = rungs[0]
        if spent + cost > budget:
            break
        spent += cost
        trial_config.append(config)
        acc = pool.acc(config[0], config[1], rungs[rung])
        ranked = pool.acc(config[0], config[1], rungs[-1]) if oracle else acc
        results.append(RungResult(index=len(trial_config) - 1, rung=rung,
                                  values={"val_acc": ranked, "num_params": pool.params[config[0]]}))
        if rung == len(rungs) - 1:  # the front changes only with a top-rung result
            top.append((acc, pool.params[config[0]]))
            hv = hypervolume(top, problem)
        trace.append((spent, hv))
    return trace


def report(data: dict[str, Any], draws: int, budget_trainings: int, share: float, seed: int, min_epochs: int,
           eta: int) -> None:
    from nasctl.spec import FidelitySpec

    max_epochs = data["meta"]["max_epochs"]
    rungs = [int(r) for r in FidelitySpec(parameter="epochs", min=min_epochs, max=max_epochs, eta=eta).rungs]
    for problem, by_seed in data["runs"].items():
        pool = Pool(by_seed)
        print(f"\n{problem}: {len(pool.configs)} configurations x {len(pool.seeds)} training seeds, "
              f"{max_epochs} epochs, rungs {rungs}")
        tops = {c: statistics.fmean(pool.acc(c, s, max_epochs) for s in pool.seeds) for c in pool.configs}
        for r in rungs[:-1]:
            rho = statistics.fmean(spearman([pool.acc(c, s, r) for c in pool.configs],
                                            [pool.acc(c, s, max_epochs) for c in pool.configs]) for s in pool.seeds)
            print(f"  Spearman(val_acc after {r:>2} epochs, after {max_epochs}): {rho:.2f} (mean over seeds)")
        good = sorted(tops.values(), reverse=True)
        q = max(1, len(good) // 4)
        print(f"  top-rung val_acc (mean over seeds): best {good[0]:.3f}, best - {q}th best "
              f"{good[0] - good[q - 1]:.3f}, sd over configurations {statistics.stdev(good):.3f}")
        if len(pool.seeds) > 1:
            retrain = [statistics.stdev([pool.acc(c, s, max_epochs) for s in pool.seeds]) for c in pool.configs]
            print(f"  retraining a configuration with another seed moves its top-rung val_acc by a median sd of "
                  f"{statistics.median(retrain):.4f}")
        budget = budget_trainings * max_epochs
        at = share * budget
        rng = random.Random(seed)
        variants = {"strict": (False, False, True), "eager": (True, False, True),
                    "strict, range": (False, False, False), "eager, range": (True, False, False),
                    "strict oracle": (False, True, True), "eager oracle": (True, True, True)}
        rows: dict[str, list[float]] = {k: [] for k in ("full", "full_at", *variants)}
        reached = {k: 0 for k in rows if k != "full_at"}
        short = {k: 0 for k in variants}
        for _ in range(draws):
            order = [(c, rng.choice(pool.seeds)) for c in rng.sample(pool.configs, len(pool.configs))]
            pts = [(pool.acc(c, s, max_epochs), pool.params[c]) for c, s in order[:budget_trainings]]
            final = hypervolume(pts, problem)
            early = hypervolume(pts[:int(at // max_epochs)], problem)
            rows["full"].append(final)
            rows["full_at"].append(early)
            reached["full"] += early >= final - 1e-12
            for name, (eager, oracle, thresholds) in variants.items():
                trace = simulate_asha(pool, order, rungs, eta, eager, at, problem, oracle, thresholds)
                hv = hv_at(trace, at)
                rows[name].append(hv)
                reached[name] += hv >= final - 1e-12
                short[name] += trace[-1][0] < at - rungs[-1]
        print(f"  {draws} draws, budget {budget} epochs ({budget_trainings} full trainings); "
              f"after {share:.0%} of it = {at:.0f} epochs:")
        print(f"    {'method':14} {'mean HV':>9} {'reached full final':>19}")
        print(f"    {'full (final)':14} {statistics.fmean(rows['full']):>9.0f} {'':>19}")
        print(f"    {'full':14} {statistics.fmean(rows['full_at']):>9.0f} {reached['full'] / draws:>18.0%}")
        for name in variants:
            print(f"    {name:14} {statistics.fmean(rows[name]):>9.0f} {reached[name] / draws:>18.0%}")
        if any(short.values()):
            print(f"    (the pool ran out of configurations in {max(short.values())} draws: collect more)")


def main() -> int:
    from benchmarks.args import positive_int, seeds

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--problems", default="digits,mnist1d")
    c.add_argument("--configs", type=positive_int, default=48)
    c.add_argument("--train-seeds", type=seeds, default=[0, 1, 2])
    c.add_argument("--max-epochs", type=positive_int, default=27)
    c.add_argument("--parallelism", type=positive_int, default=2)
    c.add_argument("--out", default="benchmarks/results/rung_signal.json")
    r = sub.add_parser("report")
    r.add_argument("results")
    r.add_argument("--draws", type=positive_int, default=2000)
    r.add_argument("--budget-trainings", type=positive_int, default=8)
    r.add_argument("--share", type=float, default=0.4)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--min-epochs", type=positive_int, default=1, help="the lowest rung of the simulated ladder")
    r.add_argument("--eta", type=positive_int, default=3, help="the simulated ladder's reduction factor")
    args = ap.parse_args()
    if args.cmd == "report":
        report(json.load(open(args.results)), args.draws, args.budget_trainings, args.share, args.seed,
               args.min_epochs, args.eta)
        return 0
    problems = [p for p in args.problems.split(",") if p]
    for p in problems:
        if p not in PROBLEMS:
            ap.error(f"--problems: unknown problem {p!r}; use some of {', '.join(PROBLEMS)}")
    data: dict[str, Any] = {"meta": {"configs": args.configs, "max_epochs": args.max_epochs}, "runs": {}}
    if os.path.exists(args.out):  # go on where an interrupted run stopped
        data["runs"] = json.load(open(args.out)).get("runs", {})
    with tempfile.TemporaryDirectory(prefix="nasctl-signal-") as work:
        for problem in problems:
            for s in args.train_seeds:
                if str(s) in data["runs"].get(problem, {}):
                    continue
                t0 = time.monotonic()
                data["runs"].setdefault(problem, {})[str(s)] = collect(problem, args.configs, s, args.max_epochs,
                                                                       args.parallelism, work)
                with open(args.out + ".tmp", "w") as f:
                    json.dump(data, f)
                os.replace(args.out + ".tmp", args.out)
                print(f"{problem} training seed {s}: {time.monotonic() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
