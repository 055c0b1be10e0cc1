"""Repeatability of the trainer's `latency_ms`: the same architectures measured
in separate processes, as trials measure them.

    python benchmarks/latency_repeatability.py [--pairs 10] [--precision fp32] [--min-seconds 0.25]

Each process builds the architectures below with a fixed seed and measures them
exactly as the built-in trainer does (nasctl.search_spaces.trainer.measure_costs:
batch 1, 1 thread, 10 warm-up runs, median of at least 50 runs over at
least --min-seconds). Processes 2k and 2k+1 form a
pair; for each architecture the table gives the relative difference
|a - b| / mean(a, b) over the pairs (median and max) of latency_ms (the median
of the timed runs) and, for comparison, of the fastest timed run, plus the load average,
since other work on the machine widens the spread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ARCHS = {
    "mlp_digits (64-64)": ("nasctl.search_spaces.mlp", [], "digits"),
    "cnn 2 blocks, mnist1d": ("nasctl.search_spaces.cnn", ["--num_blocks", "2"], "mnist1d"),
    "cnn 3 blocks, digits": ("nasctl.search_spaces.cnn", ["--num_blocks", "3"], "digits"),
}

_CHILD = """
import importlib, json, sys, torch
from nasctl.search_spaces.data import load_dataset
from nasctl.search_spaces.trainer import measure_costs
archs, precision = json.loads(sys.argv[1]), sys.argv[2]  # argv[3]: latency_min_seconds
out = {}
for name, (module, argv, dataset) in archs.items():
    mod = importlib.import_module(module)
    args = mod.parse_args(argv + ["--dataset", dataset, "--precision", precision,
                                  "--latency_min_seconds", sys.argv[3]])
    torch.manual_seed(0)
    data = load_dataset(dataset)
    net = mod.build_model(args, *((data.shape, data.num_classes) if "cnn" in module else
                                  (int(torch.tensor(data.shape).prod()), data.num_classes)))
    costs, lat = measure_costs(net, data, args, "cpu")
    out[name] = [costs["latency_ms"], lat["min_ms"]]
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--min-seconds", default="0.25", help="the trainer's --latency_min_seconds")
    a = ap.parse_args()
    load_before = os.getloadavg()
    runs = []
    for _ in range(2 * a.pairs):
        proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(ARCHS), a.precision, a.min_seconds],
                              capture_output=True, text=True, check=True)
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"{a.pairs} pairs of processes, precision {a.precision}, min seconds {a.min_seconds}, load average before "
          f"{load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}\n")
    print("| architecture | latency_ms (median of runs) | pair difference: median | max "
          "| fastest run instead: median | max |")
    print("|---|---|---|---|---|---|")
    for name in ARCHS:
        row = [name]
        for k in (0, 1):
            vals = [r[name][k] for r in runs]
            diffs = [abs(x - y) / statistics.mean((x, y)) for x, y in zip(vals[0::2], vals[1::2])]
            row += ([f"{statistics.median(vals):.4f}"] if k == 0 else []) + [
                f"{statistics.median(diffs):.1%}", f"{max(diffs):.1%}"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
