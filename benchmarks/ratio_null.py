"""What the time-to-front ratio says between two methods whose difference is known.

    PYTHONPATH=$PWD python benchmarks/time_to_front.py --problems mlp_digits,cnn_mnist1d,nb201 \\
        --seeds 0-29 --methods random,tpe --budget 64 --out /tmp/ttf-null
    PYTHONPATH=$PWD python benchmarks/ratio_null.py --out /tmp/ttf-null --pairs tpe:tpe,random:random,tpe:random

For each problem of a `benchmarks/time_to_front.py` output folder and each pair
`A:B` of `--pairs`, the per-seed ratio of `time_to_front.seed_ratio` with A in
nasctl's place and B as the peer: B's GPU-hours to its own final hypervolume
over A's to the same (0 where A never reached it). For `A:A` every ordered pair
of two different seeds counts (a method against an independent run of itself:
how the ratio is distributed when nothing differs); otherwise seed s of A
against seed s of B, as the summary pairs nasctl with each peer. Prints a
markdown table: the pairs' count, the mean ratio, the share of pairs at 1.5 or
more (the target's per-seed test) and at 0, and both methods' mean final
hypervolume.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.time_to_front import load, seed_ratio


def pair_list(text: str) -> list[tuple[str, str]]:
    """`--pairs`: comma-separated `A:B`, each naming two methods of the folder."""
    pairs = []
    for item in text.split(","):
        a, sep, b = item.strip().partition(":")
        if not sep or not a or not b:
            raise argparse.ArgumentTypeError(f"{item.strip()!r} is not a pair; write A:B, as in tpe:random")
        pairs.append((a, b))
    return pairs


def ratios(runs: Mapping[str, Mapping[int, Sequence[tuple[float, float]]]], a: str, b: str) -> list[float]:
    """The per-seed ratios of A against peer B (`runs[method][seed]` = trajectory)."""
    if a == b:
        seeds = sorted(runs[a])
        return [seed_ratio(runs[a][i], runs[a][j]) for j in seeds for i in seeds if i != j]
    return [seed_ratio(runs[a][s], runs[b][s]) for s in sorted(set(runs[a]) & set(runs[b]))]


def table(results: Sequence[Mapping[str, Any]], pairs: Sequence[tuple[str, str]]) -> str:
    lines = ["| problem | A | peer B | pairs | mean ratio | ratio >= 1.5 | ratio 0 | final HV A / B |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for problem in sorted({r["problem"] for r in results}):
        runs: dict[str, dict[int, Sequence[tuple[float, float]]]] = {}
        for r in results:
            if r["problem"] == problem:
                runs.setdefault(r["method"], {})[r["seed"]] = [tuple(p) for p in r["trajectory"]]
        for a, b in pairs:
            if a not in runs or b not in runs:
                continue
            rs = ratios(runs, a, b)
            if not rs:
                continue
            final = {m: statistics.fmean(t[-1][1] if t else 0.0 for t in runs[m].values()) for m in (a, b)}
            lines.append(f"| {problem} | {a} | {b} | {len(rs)} | {statistics.fmean(rs):.2f} | "
                         f"{sum(x >= 1.5 for x in rs) / len(rs):.0%} | {sum(x == 0 for x in rs) / len(rs):.0%} | "
                         f"{final[a]:.3f} / {final[b]:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="a benchmarks/time_to_front.py output folder")
    parser.add_argument("--pairs", type=pair_list, required=True, help="A:B,... (A:A: a method against itself)")
    args = parser.parse_args(argv)
    results = load(args.out)
    if not results:
        parser.error(f"no runs in {args.out}; give the --out folder of a benchmarks/time_to_front.py run")
    print(table(results, args.pairs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
