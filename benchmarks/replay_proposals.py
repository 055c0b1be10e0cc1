"""CPU time of proposals replayed from a stored grid run, for comparing two versions of nasctl.

    PYTHONPATH=$PWD python benchmarks/replay_proposals.py RUN.json PROBLEM [--trials 42,44,46,48]
        [--checkout DIR] [--profile DIR]

RUN.json is a run stored by `sample_efficiency.py` (its parameters and values).
For each count n in --trials the optimizer is rebuilt from the run's first n
trials (the resume path), makes one proposal (a cold GP fit), is told its
value, and the CPU time (thread time) of the next proposal is taken: a
proposal at n + 1 trials as a running experiment makes it. Prints the times,
their median and the proposed points.

--checkout replays with the nasctl of another checkout (its `nasctl/` is
imported instead of this one's; the problems and specs stay this one's), also
one from before the optimizer became its own package (a worktree of 2d3445e,
where the adapter is `nasctl.orchestration.optimizer`). --profile writes a
cProfile of each timed proposal, timed by thread CPU, to DIR/replay-<n>.prof;
`compare_profiles.py` sets two such folders side by side (call counts do not
depend on the machine's load, so they show whether two versions do the same
work).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import args as argtypes  # noqa: E402


def _adapter_module() -> ModuleType:
    """The module holding `AxOptimizer`, after the orchestrator process is prepared."""
    try:
        from nasctl.orchestration.control import prepare_orchestrator_process

        from nasctl.optimizer import ax_optimizer as module
    except ImportError:  # the layout before nasctl/optimizer/ existed
        from nasctl.orchestration.service import prepare_orchestrator_process  # type: ignore[no-redef]

        from nasctl.orchestration import optimizer as module  # type: ignore[no-redef]
    prepare_orchestrator_process()
    return module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("problem")
    ap.add_argument("--trials", type=argtypes.positive_ints, default=[42, 44, 46, 48])
    ap.add_argument("--checkout", type=Path, default=None,
                    help="a nasctl checkout to replay with instead of this one")
    ap.add_argument("--profile", type=Path, default=None, help="write a CPU profile of each timed proposal here")
    a = ap.parse_args(argv)
    if a.checkout is not None:
        if not (a.checkout / "nasctl" / "__init__.py").is_file():
            ap.error(f"--checkout {a.checkout} holds no nasctl/ package; give the root of a nasctl checkout")
        sys.path.insert(0, str(a.checkout.resolve()))

    ax_optimizer = _adapter_module()
    warnings.simplefilter("ignore")
    from benchmarks.problems import get_problem
    from benchmarks.sample_efficiency import nasctl_spec

    ax_optimizer.build_extension()
    run = json.loads(a.run.read_text())
    problem = get_problem(a.problem)
    if a.profile is not None:
        a.profile.mkdir(parents=True, exist_ok=True)
    cpu = []
    for n in a.trials:
        opt = ax_optimizer.AxOptimizer(nasctl_spec(problem, int(run.get("seed", 0)), 50))
        opt.restore([ax_optimizer.RestoredTrial(i, run["params"][i], "COMPLETED", run["methods"][i], run["values"][i])
                     for i in range(n)])
        (c,) = opt.generate(1)
        opt.complete(c.index, problem.evaluate(c.parameters))
        profiler = cProfile.Profile(time.thread_time) if a.profile is not None else None
        t0 = time.thread_time()
        if profiler is not None:
            profiler.enable()
        (proposed,) = opt.generate(1)
        if profiler is not None:
            profiler.disable()
        cpu.append(time.thread_time() - t0)
        if profiler is not None:
            profiler.dump_stats(str(a.profile / f"replay-{n}.prof"))
        print(f"after {n} (+1) trials: {json.dumps(proposed.parameters, sort_keys=True)}")
    print(f"{a.problem}: CPU s of the proposal after {','.join(map(str, a.trials))} (+1) trials: "
          + " ".join(f"{x:.2f}" for x in cpu) + f"; median {statistics.median(cpu):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
