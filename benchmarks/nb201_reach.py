"""How close do a method's NAS-Bench-201 trials come to the table's best cells?

    PYTHONPATH=$PWD python benchmarks/nb201_reach.py --out /tmp/ttf --methods nasctl,tpe

Reads the runs `benchmarks/time_to_front.py --problems nb201` wrote under
`--out` and prints, per method and seed, the completed trials within one and
within two changed operations (Hamming distance over the six edges) of any of
the `--top` cells of lowest validation error in the whole table, the best
validation error found and the hypervolume at the end of the budget. It
answers whether a seed that ends with a poor front never came near the best
cells, or came near and did not take the last steps.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import args as bargs
from benchmarks.problems import get_problem, nb201_2obj
from benchmarks.time_to_front import hv_at

OPS = [f"Op{i}" for i in range(6)]


def best_cells(top: int) -> list[tuple[str, ...]]:
    """The `top` cells of lowest validation error in the table."""
    values = get_problem("nb201_2obj").search_space[OPS[0]]["values"]
    scored = sorted((nb201_2obj(dict(zip(OPS, cell)))["val_error"], cell)
                    for cell in itertools.product(values, repeat=len(OPS)))
    return [cell for _, cell in scored[:top]]


def distance(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    return sum(x != y for x, y in zip(a, b))


def reach(run: dict, best: list[tuple[str, ...]]) -> dict[str, float]:
    done = [j for j in run["jobs"] if j["end"] == "completed" and j["values"]]
    near = [min(distance(tuple(j["parameters"][o] for o in OPS), b) for b in best) for j in done]
    return {"trials": len(done), "within_1": sum(d <= 1 for d in near), "within_2": sum(d <= 2 for d in near),
            "best_error": min(j["values"]["val_error"] for j in done),
            "hv": hv_at(run["trajectory"], run["budget"])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="the --out of a time_to_front.py run on nb201")
    p.add_argument("--methods", type=lambda s: s.split(","), default=["nasctl", "tpe"])
    p.add_argument("--top", type=bargs.positive_int, default=30, help="how many of the best cells to measure from")
    a = p.parse_args(argv)
    found = {m: sorted((a.out / "nb201" / m).glob("seed*.json")) for m in a.methods}
    missing = [m for m, files in found.items() if not files]
    if missing:
        p.error(f"no runs of {', '.join(missing)} under {a.out / 'nb201'}: run benchmarks/time_to_front.py "
                f"--problems nb201 --methods {','.join(missing)} --out {a.out} first")
    best = best_cells(a.top)
    print(f"| method | seed | trials | within 1 of the {a.top} best cells | within 2 | best val_error | HV at the end |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for method, files in found.items():
        rows = []
        for f in files:
            run = json.loads(f.read_text())
            r = reach(run, best)
            rows.append(r)
            print(f"| {method} | {run['seed']} | {r['trials']} | {r['within_1']} | {r['within_2']} | "
                  f"{100 * r['best_error']:.2f}% | {r['hv']:.3f} |")
        print(f"| {method} | mean | {statistics.mean(r['trials'] for r in rows):.1f} | "
              f"{statistics.mean(r['within_1'] for r in rows):.1f} | {statistics.mean(r['within_2'] for r in rows):.1f} | "
              f"{100 * statistics.mean(r['best_error'] for r in rows):.2f}% | {statistics.mean(r['hv'] for r in rows):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
