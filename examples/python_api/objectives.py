"""BraninCurrin, a standard two-objective test problem (both minimized), as a
`trial.function`: the trial's parameters in, its metrics out."""

from __future__ import annotations

import math


def branin_currin(params: dict[str, float]) -> dict[str, float]:
    x0, x1 = params["x0"], params["x1"]
    u, v = 15 * x0 - 5, 15 * x1
    branin = (v - 5.1 / (4 * math.pi**2) * u**2 + 5 / math.pi * u - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(u) + 10
    x1 = max(x1, 1e-9)  # Currin's first factor divides by x1
    currin = (1 - math.exp(-1 / (2 * x1))) * (2300 * x0**3 + 1900 * x0**2 + 2092 * x0 + 60) / (
        100 * x0**3 + 500 * x0**2 + 4 * x0 + 20)
    return {"branin": branin, "currin": currin}
