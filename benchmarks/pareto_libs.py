"""nasctl's former NumPy Pareto code against moocore, at nasctl's sizes.

    PYTHONPATH=$PWD python benchmarks/pareto_libs.py OLD_NASCTL_ROOT

OLD_NASCTL_ROOT is a checkout whose `nasctl/pareto.py` still has the NumPy
sweeps (commit 2d3445e or earlier). Random points with ties (values rounded
to 1/50), 2 and 3 objectives, 50 to 20,000 points: milliseconds per call of
the non-dominated mask and of the hypervolume of all points (the NumPy code
masks first, moocore takes them as they are), and whether both agree.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np


def per_call_ms(f: Any, repeats: int) -> tuple[float, Any]:
    t0 = time.perf_counter()
    for _ in range(repeats):
        out = f()
    return (time.perf_counter() - t0) / repeats * 1e3, out


def main() -> int:
    t0 = time.perf_counter()
    import moocore

    print(f"import moocore: {time.perf_counter() - t0:.3f} s\n")
    sys.path.insert(0, sys.argv[1])
    from nasctl import pareto as old

    rng = np.random.default_rng(0)
    print("| objectives | points | mask: NumPy / moocore (ms) | hypervolume: NumPy / moocore (ms) | same |")
    print("|---:|---:|---|---|---|")
    for m in (2, 3):
        for n in (50, 1000, 20000):
            Y = np.round(rng.random((n, m)) * 50) / 50
            ref = np.zeros(m)
            repeats = 200 if n <= 1000 else 5
            a, mask_a = per_call_ms(lambda: old.nondominated_mask(Y), repeats)
            b, mask_b = per_call_ms(lambda: moocore.is_nondominated(Y, maximise=True, keep_weakly=True), repeats)
            beyond = Y[(Y > ref).all(axis=1)]
            c, hv_a = per_call_ms(lambda: old.hypervolume(Y, ref), repeats)
            d, hv_b = per_call_ms(lambda: moocore.hypervolume(beyond, ref=ref, maximise=True), repeats)
            same = bool((mask_a == mask_b).all()) and abs(hv_a - hv_b) <= 1e-12 * max(1.0, hv_a)
            print(f"| {m} | {n:,} | {a:.3f} / {b:.3f} | {c:.3f} / {d:.3f} | {'yes' if same else 'NO'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
