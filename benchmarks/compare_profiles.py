"""Two sets of CPU profiles side by side: does one version of nasctl do more work than another?

    python benchmarks/compare_profiles.py BEFORE_DIR AFTER_DIR [--top 25] [--match boxdecomp,logei]

Reads every `*.prof` in each folder (as `replay_proposals.py --profile` writes
them), sums each function's calls and CPU over the folder's profiles, and
prints: the total CPU of each set, how many functions of Ax, BoTorch, GPyTorch,
linear_operator, torch and NumPy were called a different number of times (with
the largest differences), and the functions whose CPU (own time) differs most.
Functions are matched by file path below `site-packages/` or the checkout
(nasctl's modules moved from `nasctl/orchestration/` to `nasctl/optimizer/`:
both are shown as `nasctl/.../`), so two checkouts and two layouts compare.
Call counts do not depend on the machine's load; CPU times do, a little.
"""

from __future__ import annotations

import argparse
import pstats
import re
from pathlib import Path

LIBRARIES = ("ax/", "botorch/", "gpytorch/", "linear_operator/", "torch/", "numpy/", "~:<built-in method torch.",
             "~:<method '")


def _name(path: str, line: int, function: str) -> str:
    if "site-packages/" in path:
        path = path.split("site-packages/", 1)[1]
    else:
        path = re.sub(r"^.*?/nasctl/(optimizer|orchestration)/", "nasctl/.../", path)
    return f"{path}:{re.sub(r' at 0x[0-9a-f]+', '', function)}"


def load(folder: Path) -> tuple[dict[str, list[float]], float, int]:
    """Function -> [calls, own CPU, cumulative CPU] summed over the folder's profiles; total CPU; profiles."""
    files = sorted(folder.glob("*.prof"))
    out: dict[str, list[float]] = {}
    total = 0.0
    for f in files:
        stats = pstats.Stats(str(f))
        total += stats.total_tt  # type: ignore[attr-defined]
        for (path, line, function), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
            row = out.setdefault(_name(path, line, function), [0, 0.0, 0.0])
            row[0] += calls
            row[1] += own
            row[2] += cumulative
    return out, total, len(files)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--match", default="", help="also print every function whose name contains one of these")
    a = ap.parse_args(argv)
    for folder in (a.before, a.after):
        if not any(folder.glob("*.prof")):
            ap.error(f"{folder} holds no *.prof files; write them with replay_proposals.py --profile {folder}")
    (before, t_before, n_before), (after, t_after, n_after) = load(a.before), load(a.after)
    print(f"CPU: before {t_before:.2f} s ({n_before} profiles), after {t_after:.2f} s ({n_after} profiles)")
    empty = [0, 0.0, 0.0]
    names = sorted(set(before) | set(after))
    library = [n for n in names if n.startswith(LIBRARIES)]
    differ = [n for n in library if before.get(n, empty)[0] != after.get(n, empty)[0]]
    calls = sum(before.get(n, empty)[0] for n in library)
    print(f"library functions called a different number of times: {len(differ)} of {len(library)} "
          f"({int(calls)} library calls before)")
    print("\n| calls before | calls after | function |\n|---:|---:|---|")
    for n in sorted(differ, key=lambda n: -abs(before.get(n, empty)[0] - after.get(n, empty)[0]))[: a.top]:
        print(f"| {int(before.get(n, empty)[0])} | {int(after.get(n, empty)[0])} | {n} |")
    print("\n| own CPU before (s) | after (s) | calls before / after | function |\n|---:|---:|---|---|")
    for n in sorted(names, key=lambda n: -abs(before.get(n, empty)[1] - after.get(n, empty)[1]))[: a.top]:
        x, y = before.get(n, empty), after.get(n, empty)
        print(f"| {x[1]:.3f} | {y[1]:.3f} | {int(x[0])} / {int(y[0])} | {n} |")
    wanted = [w for w in a.match.split(",") if w]
    if wanted:
        print("\n| cumulative CPU before (s) | after (s) | calls before / after | function |\n|---:|---:|---|---|")
        for n in names:
            if any(w in n for w in wanted):
                x, y = before.get(n, empty), after.get(n, empty)
                print(f"| {x[2]:.3f} | {y[2]:.3f} | {int(x[0])} / {int(y[0])} | {n} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
