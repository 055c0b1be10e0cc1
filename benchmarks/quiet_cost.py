"""CPU per `library_calls()` block (nasctl/optimizer/quiet.py) in a process that has
built an optimizer, so every logger of Ax, BoTorch, GPyTorch and torch exists.

    PYTHONPATH=$PWD python benchmarks/quiet_cost.py [--blocks 200] [--rounds 3]

Run it on two commits to compare them; it prints the number of loggers and, per
round, the thread CPU time of one block in milliseconds.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import args as argtypes  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=argtypes.positive_int, default=200)
    ap.add_argument("--rounds", type=argtypes.positive_int, default=3)
    a = ap.parse_args(argv)
    from benchmarks.problems import get_problem
    from benchmarks.sample_efficiency import nasctl_spec
    from nasctl.optimizer import quiet
    from nasctl.optimizer.ax_optimizer import AxOptimizer

    AxOptimizer(nasctl_spec(get_problem("branin_currin"), 0, 10)).generate(1)
    library = [n for n in logging.root.manager.loggerDict if n.startswith(quiet.LIBRARIES)]
    print(f"loggers in the process: {len(logging.root.manager.loggerDict)}, of the libraries: {len(library)}")
    for r in range(a.rounds):
        c0 = time.thread_time()
        for _ in range(a.blocks):
            with quiet.library_calls():
                pass
        print(f"round {r}: {(time.thread_time() - c0) / a.blocks * 1e3:.2f} ms CPU per block")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
