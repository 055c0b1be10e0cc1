"""The parallel sample-efficiency benchmark's event loop and the runs it derives.

`simulate` drives an ask/tell optimizer at K trials at once on the simulated
clock; a shorter run is derived from a longer one (`first_proposed`) and a
K = 1 run from the sequential grid (`from_sequential`). Each derived run must be
the run it stands for: checked here against real runs of a seeded random
optimizer on a benchmark problem.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest

from benchmarks import parallel
from benchmarks.problems import get_problem


def _random_run(seed: int, budget: int, k: int, stale: bool = False) -> dict[str, Any]:
    """A random optimizer whose proposals depend on every result told (so a proposal
    that saw a result more or less would differ)."""
    problem = get_problem("branin_currin")
    rng = random.Random(seed)
    seen: list[float] = []
    index = 0

    def ask(n: int) -> list[tuple[Any, dict[str, Any]]]:
        nonlocal index
        out = []
        for _ in range(n):
            shift = sum(seen) % 0.1
            out.append((index, {"x0": (rng.random() + shift) % 1.0, "x1": rng.random()}))
            index += 1
        return out

    def tell(token: Any, values: Mapping[str, float]) -> None:
        seen.append(values["f0"])

    res = parallel.simulate(problem, ask, tell, seed, budget, k)
    res.update(seed=seed, method="random-dependent", budget=budget)
    return res


@pytest.mark.parametrize("k", [1, 4])
def test_the_first_proposals_of_a_longer_run_are_the_shorter_run(k: int) -> None:
    problem = get_problem("branin_currin")
    short, long = _random_run(3, 12, k), _random_run(3, 20, k)
    derived = parallel.first_proposed(problem, long, 12)
    for key in ("params", "values", "start", "end", "order", "hv"):
        assert derived[key] == short[key], key
    with pytest.raises(ValueError, match="has 12 of the first 13"):
        parallel.first_proposed(problem, short, 13)


def test_at_parallelism_one_the_simulated_run_is_the_sequential_one() -> None:
    problem = get_problem("branin_currin")
    simulated = _random_run(5, 10, 1)
    sequential = {"params": simulated["params"], "values": simulated["values"], "seed": 5,
                  "method": "random-dependent"}
    derived = parallel.from_sequential(problem, sequential, 10)
    assert derived["params"] == simulated["params"] and derived["values"] == simulated["values"]
    for key in ("start", "end", "hv"):
        assert derived[key] == pytest.approx(simulated[key]), key


def test_slots_are_refilled_at_once_and_never_overfilled() -> None:
    res = _random_run(7, 30, 4)
    events = sorted([(s, 1) for s in res["start"]] + [(e, -1) for e in res["end"]])
    running = peak = 0
    for _, step in events:  # ends before starts at the same instant
        running += step
        peak = max(peak, running)
    assert peak == 4
    # every start but the first K is at another trial's end
    ends = set(res["end"])
    assert sorted(res["start"])[:4] == [0.0] * 4
    assert all(s in ends for s in sorted(res["start"])[4:])


def test_time_to_reach_a_hypervolume() -> None:
    res = {"hv": [0.0, 0.2, 0.2, 0.5], "end": [10.0, 20.0, 30.0, 40.0]}
    assert parallel.time_to_reach(res, 0.2) == 20.0
    assert parallel.time_to_reach(res, 0.5) == 40.0
    assert parallel.time_to_reach(res, 0.6) is None


def test_paired_compares_seed_by_seed_on_the_seeds_both_have() -> None:
    def run(method: str, seed: int, hv: list[float]) -> dict[str, Any]:
        return {"problem": "dtlz2", "parallelism": 4, "method": method, "seed": seed, "hv": hv}

    results = [run("a", 0, [0.1, 0.5]), run("a", 1, [0.2, 0.4]), run("a", 2, [0.9, 0.9]),
               run("b", 0, [0.1, 0.7]), run("b", 1, [0.3, 0.3])]  # b has no seed 2: left out
    rows = parallel.paired(results, ["dtlz2"], "a", "b", (1, 2)).splitlines()
    assert rows[2] == "| dtlz2 | 4, HV@1 | 2 | 0.150 | 0.200 | 1 / 0 | +0.0500 (0.0500) |"
    # differences +0.2 and -0.1: mean +0.05, standard error sd / sqrt(2) = 0.2121 / 1.414
    assert rows[3] == "| dtlz2 | 4, HV@2 | 2 | 0.450 | 0.500 | 1 / 1 | +0.0500 (0.1500) |"
    assert len(rows) == 4


def test_the_targets_table_gives_the_gap_to_the_best_peer_and_its_standard_error() -> None:
    def run(method: str, k: int, hv30: float) -> dict[str, Any]:
        return {"problem": "dtlz2", "parallelism": k, "method": method, "hv": [0.0] * 29 + [hv30]}

    results = [run("nasctl", 1, 0.5), run("nasctl", 1, 0.7),
               run("nasctl", 4, 0.5), run("nasctl", 4, 0.6), run("ax", 4, 0.8), run("ax", 4, 0.9),
               run("tpe", 4, 0.1), run("tpe", 4, 0.2)]
    lines = parallel.targets(results, ["dtlz2"]).splitlines()
    # K = 1: no peer ran; K = 4: ax is the best peer, 0.85 against nasctl's 0.55,
    # standard error sqrt(0.005 / 2 + 0.005 / 2) = 0.0707: behind by more than two
    assert lines[2] == "| dtlz2 | 4 | 0.550 (2) | 91.7% (< 97%) | ax 0.850 ± 0.071 | -0.300 (0.071) | BEHIND |"
    assert lines[-1] == ("- K = 4: nasctl best on 0 of 1 problems, best or within one sd of the best peer on 0, "
                         "no peer ahead by more than two standard errors on 0; HV@30 at least 97% of K = 1 on 0.")
    # ahead of the best peer by less than its spread: best, and clear
    results[2:4] = [run("nasctl", 4, 0.95), run("nasctl", 4, 0.85)]
    lines = parallel.targets(results, ["dtlz2"]).splitlines()
    assert lines[2].endswith("| ax 0.850 ± 0.071 | +0.050 (0.071) | best |")
    assert "no peer ahead by more than two standard errors on 1" in lines[-1]
    assert parallel.difference([0.5], [0.2, 0.4]) == (pytest.approx(0.2), None)
