"""Two sets of stored runs side by side: the same seeds, run by two versions of nasctl.

    python benchmarks/compare_runs.py BEFORE_DIR AFTER_DIR [--checkpoints 20,30] [--cpu-from 40]

Reads every `<problem>/<method or variant>/seedNN.json` under both directories
(the layout of `sample_efficiency.py --out` and `ablation.py --out`) and, for
each (problem, method) found in both, prints the mean hypervolume / max
hypervolume at each checkpoint over the seeds both hold, on how many seeds the
two proposed exactly the same trials, and the median CPU time of a proposal
made with at least `--cpu-from` trials observed (when the runs are that long).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def load(root: Path) -> dict[tuple[str, str], dict[int, dict[str, Any]]]:
    runs: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for path in sorted(root.glob("*/*/seed*.json")):
        run = json.loads(path.read_text())
        runs.setdefault((path.parent.parent.name, path.parent.name), {})[int(path.stem[4:])] = run
    return runs


def trials(run: dict[str, Any]) -> list[Any]:
    """What a run proposed (grid runs store parameters, ablation runs values)."""
    return list(run.get("params") or run["values"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--checkpoints", default="20,30")
    ap.add_argument("--cpu-from", type=int, default=40)
    a = ap.parse_args(argv)
    checkpoints = [int(c) for c in a.checkpoints.split(",")]
    before, after = load(a.before), load(a.after)
    head = "| problem | method | seeds | " + " | ".join(f"HV@{c} before / after" for c in checkpoints)
    print(head + " | same trials | proposal CPU (median) before / after |")
    print("|---|---|---:|" + "---|" * (len(checkpoints) + 2))
    for key in sorted(set(before) & set(after)):
        seeds = sorted(set(before[key]) & set(after[key]))
        if not seeds:
            continue
        cells = []
        for c in checkpoints:
            if all(len(r[key][s]["hv"]) >= c for r in (before, after) for s in seeds):
                means = [statistics.mean(r[key][s]["hv"][c - 1] for s in seeds) for r in (before, after)]
                cells.append(f"{means[0]:.3f} / {means[1]:.3f}")
            else:
                cells.append("-")
        same = sum(trials(before[key][s]) == trials(after[key][s]) for s in seeds)
        cpu = []
        for r in (before, after):
            xs = [x for s in seeds for x in r[key][s]["gen_cpu_seconds"][a.cpu_from:]]
            cpu.append(f"{statistics.median(xs):.2f} s" if xs else "-")
        print(f"| {key[0]} | {key[1]} | {len(seeds)} | " + " | ".join(cells) + f" | {same} of {len(seeds)} | "
              f"{cpu[0]} / {cpu[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
