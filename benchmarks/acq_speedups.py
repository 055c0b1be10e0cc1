"""CPU cost of nasctl's qLogNEHVI subclass, one speed-up at a time, against BoTorch's class.

    PYTHONPATH=$PWD python benchmarks/acq_speedups.py [--trials 30,46] [--objectives 2,3] [--repeats 7]

For each number of trials and objectives: a GP fitted to that many random
points (3 inputs; outputs are smooth functions of them), then BoTorch's
`qLogNoisyExpectedHypervolumeImprovement` and nasctl's `HypervolumeImprovement`
with each entry of `acquisition.SPEEDUPS` alone (batched-boxes with
numpy-boxes, which it builds on) and with all of them are
built as a proposal builds them (baseline pruning, 32 quasi-MC samples with 3
objectives, 128 with 2) and evaluated 20 times forwards and backwards on 64
single candidates, as the optimizer's gradient ascent does. The table gives
the median CPU time (thread time) of building and of the 20 evaluations over
`--repeats` repetitions, and checks that every variant gives BoTorch's values.
The joint posterior applies to the categorical GP only, so it is not timed
here: `ablation.py --problem nb201_3obj --variants default,no-joint-posterior`
measures it in whole proposals.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

VARIANTS = ("single-candidate", "numpy-boxes", "numpy-boxes+batched-boxes", "pairwise-pruning")
"""Speed-ups timed alone (a+b: the two together; batched-boxes needs numpy-boxes)."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", default="30,46")
    ap.add_argument("--objectives", default="2,3")
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args(argv)

    from nasctl.orchestration.control import prepare_orchestrator_process

    prepare_orchestrator_process()
    import torch
    from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from botorch.sampling.normal import SobolQMCNormalSampler
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from nasctl.optimizer import acquisition
    from nasctl.optimizer.ax_optimizer import use_prebuilt_extension

    torch.set_num_threads(1)
    assert use_prebuilt_extension(), "BoTorch's fused kernel is needed (TORCH_EXTENSIONS_DIR, a compiler)"
    all_speedups = acquisition.SPEEDUPS

    def measure(cls: type, speedups: frozenset[str], model: Any, x: Any, m: int, X: Any) -> tuple[float, float, Any]:
        acquisition.SPEEDUPS = speedups
        build, evaluate, value = [], [], None
        for _ in range(a.repeats):
            torch.manual_seed(0)  # the pruning's posterior samples
            t0 = time.thread_time()
            acqf = cls(model=model, ref_point=[-2.0] * m, X_baseline=x, prune_baseline=True,
                       sampler=SobolQMCNormalSampler(torch.Size([32 if m >= 3 else 128]), seed=0))
            t1 = time.thread_time()
            for _ in range(20):
                Xg = X.clone().requires_grad_(True)
                value = acqf(Xg)
                value.sum().backward()
            evaluate.append(time.thread_time() - t1)
            build.append(t1 - t0)
        acquisition.SPEEDUPS = all_speedups
        return statistics.median(build), statistics.median(evaluate), value.detach()  # type: ignore[union-attr]

    print(f"CPU seconds, median of {a.repeats}: build (prune + box decompositions) | 20 evaluations of 64 candidates\n")
    print("| trials | objectives | variant | build (s) | 20 evaluations (s) | same values as BoTorch |")
    print("|---:|---:|---|---:|---:|---|")
    for n in (int(t) for t in a.trials.split(",")):
        for m in (int(o) for o in a.objectives.split(",")):
            g = torch.Generator().manual_seed(n * 10 + m)
            x = torch.rand(n, 3, generator=g, dtype=torch.float64)
            y = torch.stack([torch.sin(3 * x[:, 0] + k) + x[:, 1] * (k + 1) - x[:, 2] ** 2 for k in range(m)], -1)
            model = SingleTaskGP(x, -y, outcome_transform=Standardize(m=m))
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
            X = torch.rand(64, 1, 3, generator=g, dtype=torch.float64)
            rows: list[tuple[str, type, frozenset[str]]] = [("BoTorch", qLogNoisyExpectedHypervolumeImprovement, frozenset())]
            rows += [(v, acquisition.HypervolumeImprovement, frozenset(v.split("+"))) for v in VARIANTS]
            rows.append(("all", acquisition.HypervolumeImprovement, all_speedups))
            reference = None
            for name, cls, speedups in rows:
                build, evaluate, value = measure(cls, speedups, model, x, m, X)
                reference = value if reference is None else reference
                same = "yes" if torch.equal(value, reference) else f"max diff {float((value - reference).abs().max()):.1e}"
                print(f"| {n} | {m} | {name} | {build:.3f} | {evaluate:.3f} | {same} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
