"""What scoring candidates costs with BoTorch's per-candidate posteriors and with
nasctl's joint posterior (`nasctl/optimizer/jointpost.py`), and whether the
values agree.

    PYTHONPATH=$PWD python benchmarks/joint_posterior.py \
        [--problems nb201_3obj,nb201_2obj] [--seeds 0,1,2] [--trials 44] [--sizes 24,128] [--repeats 10]

Replays stored runs of the sample-efficiency suite (as `acq_samples.py` does:
the optimizer is rebuilt from a run's first `--trials` trials and makes one
proposal) and scores random candidates of each `--size` (24: the neighbours
of one cell in a local-search step; 128: the raw samples) with both paths, on
the same acquisition function. Prints the CPU time per call (median of
`--repeats`), the largest difference between the two paths' values, and
whether they rank the same candidate first.

`--proposals` adds whole proposals: for each seed and each of `--proposal-trials`
the optimizer is restored from the stored run twice, once per path, and proposes
twice; the table gives the CPU time of the second proposal (the first one fits
the GP from scratch, as a resumed run does; the second starts from that fit,
as the loop's proposals do) and whether both paths proposed the same points.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.acq_samples import acquisition_at, pool, restored_optimizer  # noqa: E402
from benchmarks.sample_efficiency import DEFAULT_OUT  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", default="nb201_3obj,nb201_2obj")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--trials", type=int, default=44)
    ap.add_argument("--sizes", default="24,128")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--results", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--proposals", action="store_true", help="also time whole proposals from replayed states")
    ap.add_argument("--proposal-trials", default="40,45")
    a = ap.parse_args(argv)

    from nasctl.orchestration.control import prepare_orchestrator_process

    prepare_orchestrator_process()
    import torch

    def cpu_per_call(acqf: object, X: torch.Tensor) -> tuple[float, torch.Tensor]:
        with torch.no_grad():
            values = acqf(X)  # type: ignore[operator]
            times = []
            for _ in range(a.repeats):
                t0 = time.thread_time()
                acqf(X)  # type: ignore[operator]
                times.append(time.thread_time() - t0)
        return statistics.median(times), values

    print(f"{a.trials} trials observed, seeds {a.seeds}; CPU ms per call, median of {a.repeats}\n")
    print("| problem | seed | candidates | BoTorch (ms) | joint (ms) | speed-up | max abs. difference | same first |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for problem in a.problems.split(","):
        for seed in (int(s) for s in a.seeds.split(",")):
            use_joint(True)
            acquisition = acquisition_at(problem, seed, a.trials, a.results)
            acqf = acquisition.acqf
            for size in (int(s) for s in a.sizes.split(",")):
                X = pool(acquisition, size, seed)
                use_joint(False)
                own_t, own = cpu_per_call(acqf, X)
                use_joint(True)
                joint_t, joint = cpu_per_call(acqf, X)
                print(f"| {problem} | {seed} | {size} | {own_t * 1e3:.1f} | {joint_t * 1e3:.1f} | {own_t / joint_t:.2f}x "
                      f"| {float((own - joint).abs().max()):.1e} | {'yes' if int(own.argmax()) == int(joint.argmax()) else 'NO'} |",
                      flush=True)
    if a.proposals:
        proposal_table(a)
    return 0


def use_joint(on: bool) -> None:
    """Switch the joint posterior of nasctl's qLogNEHVI subclass on or off (read at every call)."""
    from nasctl.optimizer import acquisition

    others = acquisition.SPEEDUPS - {"joint-posterior"}
    acquisition.SPEEDUPS = others | {"joint-posterior"} if on else others


def proposal_table(a: argparse.Namespace) -> None:
    print(f"\nWhole proposals from replayed states (CPU s of the second of two proposals; seeds {a.seeds})\n")
    print("| problem | trials | BoTorch (s), median | joint (s), median | speed-up | same proposals |")
    print("|---|---:|---:|---:|---:|---|")
    for problem in a.problems.split(","):
        for trials in (int(k) for k in a.proposal_trials.split(",")):
            cpu: dict[bool, list[float]] = {False: [], True: []}
            same = 0
            seeds = [int(s) for s in a.seeds.split(",")]
            for seed in seeds:
                proposed = {}
                for joint in (False, True):
                    use_joint(joint)
                    opt = restored_optimizer(problem, seed, trials, a.results)
                    first = opt.generate(1)
                    t0 = time.thread_time()
                    second = opt.generate(1)
                    cpu[joint].append(time.thread_time() - t0)
                    proposed[joint] = [c.parameters for c in first + second]
                    use_joint(True)
                same += proposed[False] == proposed[True]
            own, joint_t = statistics.median(cpu[False]), statistics.median(cpu[True])
            print(f"| {problem} | {trials} | {own:.2f} | {joint_t:.2f} | {own / joint_t:.2f}x | {same} of {len(seeds)} |",
                  flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
