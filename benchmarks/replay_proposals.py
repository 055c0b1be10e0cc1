"""CPU time of proposals replayed from a stored grid run, for comparing two versions of nasctl.

    PYTHONPATH=$PWD python benchmarks/replay_proposals.py RUN.json PROBLEM [--trials 42,44,46,48]

RUN.json is a run stored by `sample_efficiency.py` (its parameters and values).
For each count n in --trials the optimizer is rebuilt from the run's first n
trials (the resume path), makes one proposal (a cold GP fit), is told its
value, and the CPU time (thread time) of the next proposal is taken: a
proposal at n + 1 trials as a running experiment makes it. Prints the times
and their median. Run it from two checkouts, one after the other, to compare
them on the same states.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("problem")
    ap.add_argument("--trials", default="42,44,46,48")
    a = ap.parse_args(argv)

    from nasctl.orchestration.control import prepare_orchestrator_process

    prepare_orchestrator_process()
    warnings.simplefilter("ignore")
    from benchmarks.problems import get_problem
    from benchmarks.sample_efficiency import nasctl_spec
    from nasctl.optimizer import ax_optimizer

    ax_optimizer.build_extension()
    run = json.loads(a.run.read_text())
    problem = get_problem(a.problem)
    cpu = []
    for n in (int(k) for k in a.trials.split(",")):
        opt = ax_optimizer.AxOptimizer(nasctl_spec(problem, int(run.get("seed", 0)), 50))
        opt.restore([ax_optimizer.RestoredTrial(i, run["params"][i], "COMPLETED", run["methods"][i], run["values"][i])
                     for i in range(n)])
        (c,) = opt.generate(1)
        opt.complete(c.index, problem.evaluate(c.parameters))
        t0 = time.thread_time()
        opt.generate(1)
        cpu.append(time.thread_time() - t0)
    print(f"{a.problem}: CPU s of the proposal after {a.trials} (+1) trials: "
          + " ".join(f"{x:.2f}" for x in cpu) + f"; median {statistics.median(cpu):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
