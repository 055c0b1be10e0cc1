"""benchmarks/time_to_front.py: GPU-hours counted from the cluster's jobs, hypervolume
traces cut at the budget, the per-seed ratio, and the peers' loop on the same simulated
cluster as nasctl's runner (devices, preemptions that start over, the budget)."""

from __future__ import annotations

import argparse
import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("moocore")

from benchmarks import ratio_null  # noqa: E402
from benchmarks.problems import Problem  # noqa: E402
from benchmarks.time_to_front import (REQUEUE_DELAY, Setup, hours_to, main, seed_ratio, simulate_peer,  # noqa: E402
                                      trajectory)

TOY = Problem("toy", "toy", {"x": {"type": "choice", "values": [0.0, 0.5, 1.0]}}, ("a", "b"), (2.0, 2.0), 4.0,
              lambda p: {"a": p["x"], "b": 1 - p["x"]}, "unused:fn")


def _job(start: float, end: float, values: dict[str, float] | None, last: int = 3, kind: str = "completed"
         ) -> dict[str, Any]:
    return {"running_since": start, "ended": end, "gpus": 1, "end": kind, "last_epoch": last, "values": values}


def test_the_trajectory_counts_every_jobs_device_time_up_to_each_result() -> None:
    jobs = [_job(0.0, 3600.0, {"a": 1.0, "b": 1.0}),
            _job(0.0, 1800.0, None, kind="preempted"),  # its half hour is spent, and shows no result
            _job(0.0, 5400.0, {"a": 0.0, "b": 0.0}),
            _job(0.0, 900.0, {"a": 0.5, "b": 0.5}, last=1)]  # a lower rung: spent, not on the front
    traj = trajectory(jobs, TOY, 3, budget_seconds=1e9)
    assert [round(h, 6) for h, _ in traj] == [0.25 + 0.5 + 1 + 1, 0.25 + 0.5 + 1 + 1.5]
    assert [hv for _, hv in traj] == [pytest.approx(1 / 4), pytest.approx(1.0)]
    cut = trajectory(jobs, TOY, 3, budget_seconds=3 * 3600.0)  # the second result came past the budget
    assert len(cut) == 1


def test_the_ratio_is_the_peers_hours_to_its_final_hypervolume_over_nasctls() -> None:
    peer = [(1.0, 0.2), (4.0, 0.6)]
    assert seed_ratio([(0.5, 0.3), (2.0, 0.7)], peer) == pytest.approx(2.0)
    assert seed_ratio([(0.5, 0.3)], peer) == 0.0  # nasctl never reached the peer's 0.6
    assert hours_to(peer, 0.5) == 4.0 and hours_to(peer, 0.9) is None
    assert math.isinf(seed_ratio([(0.0, 0.9)], peer))


def test_a_method_against_itself_counts_every_ordered_pair_of_two_seeds() -> None:
    runs = {"m": {0: [(1.0, 0.5)], 1: [(2.0, 0.5)], 2: [(1.0, 0.4)]},
            "p": {0: [(2.0, 0.5)], 2: [(1.0, 0.5)], 3: [(1.0, 0.1)]}}
    # seed i in A's place, seed j as the peer: 0 vs 1 reaches 0.5 at 1 h (2/1), 1 vs 0 and 1 vs 2 at 2 h
    # (1/2 each), 0 vs 2 reaches 0.4 at 1 h (1/1), seed 2 never reaches 0.5
    assert sorted(ratio_null.ratios(runs, "m", "m")) == [0.0, 0.0, 0.5, 0.5, 1.0, 2.0]
    assert ratio_null.ratios(runs, "m", "p") == [2.0, 0.0]  # seeds 0 and 2, the ones both ran
    assert ratio_null.pair_list("a:b, c:c") == [("a", "b"), ("c", "c")]
    with pytest.raises(argparse.ArgumentTypeError, match="write A:B"):
        ratio_null.pair_list("a")


def test_the_peers_run_on_the_same_cluster_within_the_budget() -> None:
    setup = Setup("mlp_digits", seed=1, gpus=2, preempt_share=0.5, budget=6.0)
    space = setup.problem_obj().search_space
    asked: list[int] = []
    counter = iter(range(10**6))

    def ask(n: int) -> list[tuple[Any, dict[str, Any]]]:
        asked.append(n)
        return [(next(counter), {k: p["values"][(len(asked) + i) % len(p["values"])] for k, p in space.items()})
                for i in range(n)]

    told: list[Any] = []
    res = simulate_peer(setup, ask, lambda token, values: told.append(token), lambda token: True)
    jobs = res["jobs"]
    assert asked[0] == 2 and told
    spans = [(j["running_since"], j["ended"]) for j in jobs if j["running_since"] is not None]
    for s, _ in spans:
        assert sum(1 for s2, e2 in spans if s2 <= s < e2) <= 2  # two devices
    restarts = [j for j in jobs if j["attempt"] > 1]
    assert restarts and all(j["first_epoch"] == 0 for j in restarts)  # a peer starts over
    assert all(j["running_since"] == pytest.approx(j["submitted"] + REQUEUE_DELAY) for j in restarts)
    spent = sum(j["gpu_seconds"] for j in jobs)
    # nothing starts once the budget is spent: what ran then was cancelled at that instant
    assert spent <= setup.budget_seconds() + max(j["gpu_seconds"] for j in jobs)
    assert any(j["end"] == "cancelled" for j in jobs)


def test_a_retry_the_optimizer_requeues_itself_is_the_next_attempt() -> None:
    """Optuna's retry callback requeues a preempted trial as a new trial: asked again, it
    must run as attempt 2 (its own preemption draw, after the requeue delay), not as a
    second attempt 1 that meets the same preemption again and again."""
    from benchmarks.time_to_front import ATTEMPT

    setup = Setup("mlp_digits", seed=2, gpus=2, preempt_share=0.6, budget=8.0)
    space = setup.problem_obj().search_space
    grid = [dict(zip(space, values)) for values in itertools.product(*(p["values"] for p in space.values()))]
    requeued: list[dict[str, Any]] = []
    attempts: dict[int, int] = {}
    counter = iter(range(10**6))

    def ask(n: int) -> list[tuple[Any, dict[str, Any]]]:
        out = []
        for _ in range(n):
            token = next(counter)
            if requeued:
                params = requeued.pop(0)
            else:
                params = {**grid[token], ATTEMPT: 1}  # a new configuration each time
            attempts[token] = params[ATTEMPT]
            out.append((token, dict(params)))
        return out

    params_of: dict[int, dict[str, Any]] = {}

    def on_preempt(token: Any) -> bool:
        params = params_of.get(token)
        if params is not None:
            requeued.append({**params, ATTEMPT: attempts[token] + 1})
        return False

    def ask_tracking(n: int) -> list[tuple[Any, dict[str, Any]]]:
        got = ask(n)
        for token, params in got:
            params_of[token] = {k: v for k, v in params.items() if k != ATTEMPT}
        return got

    res = simulate_peer(setup, ask_tracking, lambda token, values: None, on_preempt)
    jobs = res["jobs"]
    retried = [j for j in jobs if j["attempt"] > 1]
    assert retried and all(j["running_since"] == pytest.approx(j["submitted"] + REQUEUE_DELAY) for j in retried)
    seen = [(tuple(sorted(j["parameters"].items())), j["attempt"]) for j in jobs if j["end"] == "preempted"]
    assert len(seen) == len(set(seen))  # no attempt of a configuration is preempted twice


def _run(problem: str, method: str, seed: int, traj: list[list[float]]) -> dict[str, Any]:
    return {"problem": problem, "method": method, "seed": seed, "gpus": 8, "preempt_share": 0.1, "budget": 64.0,
            "full_hours": 1.0, "budget_gpu_hours": 64.0, "attempts": 70, "preempted_attempts": 7,
            "trajectory": traj, "jobs": [{"end": "completed"}] * 70}


def test_kept_trajectories_stand_in_for_runs_not_made_again(tmp_path: Path) -> None:
    """`trajectories.json` keeps every run's trajectory; a run made again (its own file)
    is summarised against the peers' kept runs, and the kept ones are not run again."""
    for method, traj in (("nasctl", [[1.0, 0.5], [2.0, 0.9]]), ("ax", [[2.0, 0.4], [6.0, 0.8]])):
        path = tmp_path / "mlp_digits" / method / "seed00.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(_run("mlp_digits", method, 0, traj)))
    assert main(["--report", "--out", str(tmp_path)]) == 0
    kept = json.loads((tmp_path / "trajectories.json").read_text())
    assert sorted((r["method"], r["trajectory"]) for r in kept) == [
        ("ax", [[2.0, 0.4], [6.0, 0.8]]), ("nasctl", [[1.0, 0.5], [2.0, 0.9]])]
    assert all("jobs" not in r for r in kept)
    # the runs' own files gone (as in the repository), nasctl run again with another trajectory
    for path in tmp_path.glob("*/*/seed*.json"):
        path.unlink()
    again = tmp_path / "mlp_digits" / "nasctl" / "seed00.json"
    again.parent.mkdir(parents=True, exist_ok=True)
    again.write_text(json.dumps(_run("mlp_digits", "nasctl", 0, [[4.0, 0.85]])))
    # nothing listed is run again: ax seed 0 is kept, nasctl seed 0 has its file
    assert main(["--problems", "mlp_digits", "--seeds", "0", "--methods", "nasctl,ax", "--out", str(tmp_path)]) == 0
    rows = {r["peer"]: r for r in json.loads((tmp_path / "summary.json").read_text())}
    assert rows["ax"]["per_seed"] == [pytest.approx(6.0 / 4.0)]  # the new nasctl run against the kept ax run
    kept = {r["method"]: r for r in json.loads((tmp_path / "trajectories.json").read_text())}
    assert kept["nasctl"]["trajectory"] == [[4.0, 0.85]] and kept["ax"]["trajectory"] == [[2.0, 0.4], [6.0, 0.8]]


def test_a_report_on_a_folder_without_runs_leaves_its_summary_alone(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "summary.json").write_text('[{"problem": "p"}]')
    assert main(["--report", "--out", str(tmp_path)]) == 2
    assert "holds no runs" in capsys.readouterr().err
    assert (tmp_path / "summary.json").read_text() == '[{"problem": "p"}]'
    assert not (tmp_path / "trajectories.json").exists()
