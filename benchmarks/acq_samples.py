"""How many quasi-MC samples does qLogNEHVI need to pick good candidates?

    PYTHONPATH=$PWD python benchmarks/acq_samples.py --problem nb201_3obj \
        [--seeds 0,1,2] [--trials 20,44] [--samples 8,16,32] [--pool 1000] [--reference 512] [--sampler-seeds 3]

Replays stored nasctl runs of the sample-efficiency suite
(benchmarks/results/sample_efficiency/<problem>/nasctl/seedNN.json): the
optimizer is rebuilt from a run's first `--trials` trials (nasctl's own
resume path) and makes one proposal, which builds the GP and the acquisition
function exactly as a run does. Then a pool of random candidates (uniform in
the model's input space; random choices for discrete inputs) is scored by
estimates with each `--samples` count (`--sampler-seeds` sampler seeds each)
and by a `--reference`-sample estimate. The table gives, for each count, the
hypervolume improvement (HVI) of the candidate that estimate ranks first,
as a share of the best HVI in the pool under the reference (1.0: it picked
the best), and the CPU time to score the pool. This measures the sample
count's effect on the acquisition function without the optimizer's noise
that a full sample-efficiency grid carries.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import args as argtypes  # noqa: E402
from benchmarks.problems import PROBLEMS, get_problem  # noqa: E402
from benchmarks.sample_efficiency import DEFAULT_OUT, nasctl_spec  # noqa: E402


def restored_optimizer(problem_name: str, seed: int, trials: int, results: Path) -> Any:
    """nasctl's optimizer restored (the resume path) from the first `trials` trials of a stored run."""
    from nasctl.optimizer.ax_optimizer import AxOptimizer, RestoredTrial

    run = json.loads((results / problem_name / "nasctl" / f"seed{seed:02d}.json").read_text())
    if len(run["values"]) < trials:
        raise SystemExit(f"{problem_name} seed {seed} has {len(run['values'])} trials, fewer than {trials}")
    opt = AxOptimizer(nasctl_spec(get_problem(problem_name), seed, run["budget"]))
    opt.restore([RestoredTrial(i, run["params"][i], "COMPLETED", run["methods"][i], run["values"][i])
                 for i in range(trials)])
    return opt


def acquisition_at(problem_name: str, seed: int, trials: int, results: Path) -> Any:
    """Ax's `Acquisition` after one proposal from the state of a stored run after `trials` trials."""
    opt = restored_optimizer(problem_name, seed, trials, results)
    opt.generate(1)
    return opt.client._generation_strategy.adapter.generator._acquisition  # noqa: SLF001 - no public accessor


def pool(acquisition: Any, size: int, seed: int) -> Any:
    import torch

    digest = acquisition.search_space_digest
    g = torch.Generator().manual_seed(seed)
    cols = []
    for i, (low, high) in enumerate(digest.bounds):
        if i in digest.discrete_choices:
            values = torch.tensor(digest.discrete_choices[i], dtype=torch.float64)
            cols.append(values[torch.randint(len(values), (size,), generator=g)])
        else:
            cols.append(low + (high - low) * torch.rand(size, generator=g, dtype=torch.float64))
    return torch.stack(cols, -1).unsqueeze(-2)


def score(acqf: Any, samples: int, seed: int, X: Any) -> Any:
    """`X` scored by a qLogNEHVI like `acqf` with `samples` quasi-MC samples."""
    import torch
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.sampling.normal import SobolQMCNormalSampler

    estimate = qLogNoisyExpectedHypervolumeImprovement(
        model=acqf.model, ref_point=acqf.ref_point, X_baseline=acqf.X_baseline, objective=acqf.objective,
        constraints=acqf.constraints, sampler=SobolQMCNormalSampler(torch.Size([samples]), seed=seed),
        prune_baseline=True, cache_root=False,
    )
    with torch.no_grad():
        return torch.cat([estimate(x) for x in X.split(500)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", required=True, choices=list(PROBLEMS))
    ap.add_argument("--seeds", type=argtypes.seeds, default=argtypes.seeds("0,1,2"))
    ap.add_argument("--trials", type=argtypes.positive_ints, default=[20, 44], help="replay states: trials observed")
    ap.add_argument("--samples", type=argtypes.positive_ints, default=[8, 16, 32])
    ap.add_argument("--pool", type=argtypes.positive_int, default=1000)
    ap.add_argument("--reference", type=argtypes.positive_int, default=512)
    ap.add_argument("--sampler-seeds", type=argtypes.positive_int, default=3)
    ap.add_argument("--results", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args(argv)

    from nasctl.orchestration.control import prepare_orchestrator_process

    prepare_orchestrator_process()
    import torch
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement

    counts = a.samples
    ratios: dict[int, list[float]] = {c: [] for c in counts}
    cpu: dict[int, list[float]] = {c: [] for c in counts}
    states = 0
    for seed in a.seeds:
        for trials in a.trials:
            acquisition = acquisition_at(a.problem, seed, trials, a.results)
            acqf = acquisition.acqf
            if not isinstance(acqf, qLogNoisyExpectedHypervolumeImprovement):
                print(f"seed {seed}, {trials} trials: {type(acqf).__name__} (nothing feasible yet), skipped",
                      file=sys.stderr)
                continue
            states += 1
            X = pool(acquisition, a.pool, 1000 + seed)
            reference = score(acqf, a.reference, 10_007, X)
            best = reference.max()
            for c in counts:
                for s in range(a.sampler_seeds):
                    t0 = time.thread_time()
                    values = score(acqf, c, s, X)
                    cpu[c].append(time.thread_time() - t0)
                    ratios[c].append(float(torch.exp(reference[values.argmax()] - best)))
            print(f"seed {seed}, {trials} trials: "
                  + ", ".join(f"{c}: {statistics.mean(ratios[c][-a.sampler_seeds:]):.3f}" for c in counts),
                  file=sys.stderr, flush=True)
    print(f"**{a.problem}**: {states} states (seeds {','.join(map(str, a.seeds))} x trials {','.join(map(str, a.trials))}) x {a.sampler_seeds} sampler seeds, "
          f"pool of {a.pool}, reference {a.reference} samples\n")
    print("| samples | HVI of pick / best, mean | min | pool scoring CPU (s), median |")
    print("|---:|---:|---:|---:|")
    for c in counts:
        if ratios[c]:
            print(f"| {c} | {statistics.mean(ratios[c]):.3f} | {min(ratios[c]):.3f} | {statistics.median(cpu[c]):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
