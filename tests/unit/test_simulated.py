"""The `simulated` runner and its clock: the runner contract (as for `inprocess`, with
function trials), durations fixed by the parameters and the seed, and the real loop
running against virtual time, with the same trials whatever real time the proposals take."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from nasctl.errors import SpecError
from nasctl.metrics.tensorboard import read_scalars
from nasctl.optimizer.base import Candidate
from nasctl.orchestration.generator import CandidateGenerator
from nasctl.orchestration.loop import Orchestrator
from nasctl.orchestration.proposals import lookahead
from nasctl.runners import JobState, SubmittedJob, get_runner
from nasctl.runners.clock import REAL_CLOCK
from nasctl.runners.simulated import SimulatedRunner, VirtualClock, trial_seconds
from nasctl.spec import parse_spec, spec_to_dict
from nasctl.store import Store
from nasctl.types import FailureClass, TrialStatus
from tests.helpers.runners import function_request

FUNCS = '''
def square(p):
    return {"y": (p["x"] - 0.25) ** 2, "z": 1 - p["x"], "cost": 100 * p["x"]}

def broken(p):
    raise ValueError("bad point " + str(p["x"]))
'''


def test_durations_are_fixed_by_the_parameters_and_the_seed() -> None:
    a = trial_seconds({"x": 0.5, "c": "relu"}, 0, 60.0, 0.5)
    assert a == trial_seconds({"c": "relu", "x": 0.5}, 0, 60.0, 0.5)  # key order does not matter
    assert a != trial_seconds({"x": 0.5, "c": "relu"}, 1, 60.0, 0.5)
    assert a != trial_seconds({"x": 0.51, "c": "relu"}, 0, 60.0, 0.5)
    assert trial_seconds({"x": 0.5}, 3, 60.0, 0.0) == 60.0  # sigma 0: every trial takes the median
    draws = [trial_seconds({"x": i}, 0, 60.0, 0.5) for i in range(400)]
    assert 50 < sorted(draws)[200] < 72  # the median of a log-normal around 60 s


def test_contract_jobs_end_at_their_simulated_end_in_order(tmp_path: Path, funcs: str) -> None:
    runner = get_runner("simulated", {"median_seconds": 10, "sigma": 0.5, "seed": 2})
    assert isinstance(runner, SimulatedRunner)
    woken: list[int] = []
    assert runner.notify_on_end(lambda: woken.append(1))
    clock = runner.clock()
    reqs = [function_request(tmp_path, f"t{i}", f"{funcs}:square", {"x": x}) for i, x in enumerate((0.1, 0.6, 0.9))]
    assert "simulated:" in runner.dryrun(reqs[0]) and not os.path.exists(reqs[0].trial_dir)
    jobs = [runner.submit(r) for r in reqs]
    json.dumps([j.metadata for j in jobs])  # plain JSON
    ends = [j.metadata["simulated_end"] for j in jobs]
    assert all(j.metadata["simulated_start"] == 0.0 for j in jobs)
    assert ends == [trial_seconds({"x": x}, 2, 10.0, 0.5) for x in (0.1, 0.6, 0.9)]
    assert runner.submit(reqs[0]).handle == jobs[0].handle  # never twice
    states = runner.status(jobs)
    assert all(states[j.handle].state == JobState.RUNNING for j in jobs)
    assert read_scalars(reqs[0].env["NASCTL_LOG_DIR"]) == []  # nothing readable before its end
    order = sorted(range(3), key=lambda i: ends[i])
    for n, i in enumerate(order):
        assert runner.advance()
        assert clock.elapsed == ends[i] and len(woken) == n + 1
        st = runner.status(jobs)
        assert st[jobs[i].handle].state == JobState.SUCCEEDED
        assert [st[jobs[k].handle].state for k in order[n + 1:]] == [JobState.RUNNING] * (2 - n)
    assert not runner.advance()  # nothing left to move to
    (y,) = [o.value for o in read_scalars(reqs[1].env["NASCTL_LOG_DIR"]) if o.metric == "y"]
    assert y == pytest.approx(0.35 ** 2)
    # a fresh process: ended jobs from their outcome files, the rest lost with their orchestrator
    fresh = get_runner("simulated")
    assert fresh.status([jobs[0]])[jobs[0].handle].state == JobState.SUCCEEDED
    lost = function_request(tmp_path, "lost", f"{funcs}:square", {"x": 0.2})
    job = runner.submit(lost)
    gone = fresh.status([job])[job.handle]
    assert gone.state == JobState.FAILED and gone.failure_class == FailureClass.INFRASTRUCTURE
    assert fresh.status([SubmittedJob("simulated://never", {})])["simulated://never"].state == JobState.UNKNOWN
    assert fresh.find(reqs[0]) is not None and fresh.find(lost) is None


def test_failures_cancels_and_the_cost_column(tmp_path: Path, funcs: str) -> None:
    runner = get_runner("simulated", {"duration_metric": "cost"})
    assert isinstance(runner, SimulatedRunner)
    bad = runner.submit(function_request(tmp_path, "bad", f"{funcs}:broken", {"x": 0.3}))
    gone = runner.submit(function_request(tmp_path, "gone", f"{funcs}:square", {"x": 0.5}))
    # the cost column gives the duration; a call that raises takes none (its end reports it)
    assert bad.metadata["simulated_end"] == 0.0 and gone.metadata["simulated_end"] == 50.0
    runner.cancel(gone)
    runner.cancel(gone)  # idempotent
    assert runner.advance() and runner.clock().elapsed == 0.0
    st = runner.status([bad, gone])
    assert st[bad.handle].state == JobState.FAILED and st[bad.handle].failure_class == FailureClass.USER
    assert "bad point 0.3" in runner.log_tail(bad)
    assert st[gone.handle].state == JobState.CANCELLED
    assert not runner.advance()  # a cancelled job never ends


def test_bad_cfg_is_refused_with_the_fix() -> None:
    for cfg, msg in (({"workers": 2}, "does not take"), ({"median_seconds": 0}, "positive number"),
                     ({"sigma": -1}, "non-negative"), ({"seed": "a"}, "integer"), ({"duration_metric": 3}, "metric name")):
        with pytest.raises(SpecError, match=msg):
            get_runner("simulated", cfg)


def test_the_virtual_clock_moves_only_when_the_loop_has_nothing_to_do() -> None:
    moves: list[float] = []

    def advance() -> bool:
        moves.append(clock.elapsed)
        return True

    clock = VirtualClock(advance)
    wake = threading.Event()
    wake.set()
    clock.wait(wake, 0.0, busy=False)  # something to act on: no move
    wake.clear()
    clock.wait(wake, 0.01, busy=True)  # a proposal is being computed: no move, a real pause
    assert moves == []
    clock.wait(wake, 5.0, busy=False)
    assert moves == [0.0]
    assert clock.cost(3.0) == 0.0 and REAL_CLOCK.cost(3.0) == 3.0
    # the look-ahead on this clock: a proposal takes no time, so none ahead
    assert lookahead(4, 3, None, clock.cost(9.0), [1.0]) == 0 and lookahead(4, 3, None, 9.0, [1.0]) == 4


class ResultDrivenOptimizer:
    """Proposes points that depend on every result it has been told (so a proposal that
    saw one result more or less would differ), after a real delay drawn from `delays`."""

    log_scale: tuple[str, ...] | None = None

    def __init__(self, delays: random.Random, log: list[str]) -> None:
        self.delays, self.log, self.n, self.seen = delays, log, 0, 0.0

    def complete(self, index: int, values: Mapping[str, float], cost: float | None = None) -> None:
        self.seen += values["y"]
        self.log.append(f"complete {index}")

    def fail(self, index: int, reason: str | None = None) -> None:
        self.log.append(f"fail {index}")

    def abandon(self, index: int) -> None:
        self.log.append(f"abandon {index}")

    def early_stop(self, index: int, values: Mapping[str, float] | None) -> None:
        self.log.append(f"early_stop {index}")

    def attach(self, parameters: Mapping[str, Any]) -> int:
        raise NotImplementedError

    def generate(self, n: int) -> list[Candidate]:
        time.sleep(self.delays.uniform(0.0, 0.08))
        self.log.append(f"generate {n}")
        out = []
        for k in range(n):
            x = round((0.37 * (self.n + k + 1) + 7.0 * self.seen) % 1.0, 9)
            out.append(Candidate(self.n + k, {"x": x}, "driven"))
        self.n += n
        return out


def _simulated_run(tmp_path: Path, funcs: str, name: str, delay_seed: int, trials: int = 14,
                   optimizer: type[ResultDrivenOptimizer] = ResultDrivenOptimizer,
                   ) -> tuple[list[Any], list[str], float]:
    """`trials` trials, 4 at once, of `optimizer` (its proposals delayed by real times
    drawn with `delay_seed`) through the loop on the simulated clock; every trial
    must complete. Returns (index, parameters, simulated start, simulated end) of
    each trial, the optimizer's log and the run's elapsed (virtual) time."""
    spec = parse_spec(f"""
name: {name}
search_space: {{x: {{type: float, low: 0, high: 1}}}}
objectives: {{y: {{goal: minimize}}, z: {{goal: minimize}}}}
budget: {{max_trials: {trials}, parallelism: 4}}
trial: {{function: "{funcs}:square"}}
runner: {{scheduler: simulated, cfg: {{seed: 5, median_seconds: 30}}}}
""")
    store = Store(f"sqlite:///{tmp_path}/{name}.db", create=True)
    exp = store.create_experiment(name, spec_to_dict(spec), str(tmp_path / name))
    log: list[str] = []
    gen = CandidateGenerator(lambda: optimizer(random.Random(delay_seed), log))
    summary = Orchestrator(store, exp, spec, get_runner("simulated", spec.runner.cfg), gen).run()
    assert summary.status.value == "COMPLETED", summary.reason
    done = store.list_trials(exp.id)
    assert len(done) == trials and all(t.status == TrialStatus.COMPLETED for t in done)
    return ([(t.index, t.parameters, t.runner_metadata["simulated_start"], t.runner_metadata["simulated_end"])
             for t in done], log, summary.elapsed)


def test_the_loop_on_the_simulated_clock_repeats_its_trials_whatever_the_proposals_take(
        tmp_path: Path, funcs: str) -> None:
    """Proposals delayed by different real times give the same trials, at the same
    virtual times, told the same results in the same order: virtual time stands
    still while a proposal is computed. And the schedule is the one K = 4 slots make."""
    a, log_a, elapsed_a = _simulated_run(tmp_path, funcs, "a", delay_seed=1)
    b, log_b, elapsed_b = _simulated_run(tmp_path, funcs, "b", delay_seed=2)
    assert a == b and log_a == log_b and elapsed_a == elapsed_b
    assert len(a) == 14 and len({json.dumps(p) for _, p, _, _ in a}) > 10
    ends = sorted(e for _, _, _, e in a)
    assert elapsed_a == pytest.approx(ends[-1], abs=1e-6)  # the run took the last end in virtual time
    for _, params, start, end in a:
        assert end - start == pytest.approx(trial_seconds(params, 5, 30.0, 0.5))
        assert start == 0.0 or start in ends  # a trial starts when another ends (a slot frees)
        assert sum(1 for _, _, s, e in a if s <= start < e) <= 4  # never more than 4 at once


class RecordsCosts(ResultDrivenOptimizer):
    """Keeps the cost the loop tells with each result."""

    costs: dict[int, float | None] = {}

    def complete(self, index: int, values: Mapping[str, float], cost: float | None = None) -> None:
        super().complete(index, values, cost)
        RecordsCosts.costs[index] = cost


def test_the_loop_tells_the_optimizer_what_each_trial_cost_on_the_simulated_clock(
        tmp_path: Path, funcs: str) -> None:
    """The cost told with a result is the device time the simulated cluster accounted for
    the trial (one device a trial: its simulated duration), not the real seconds the
    loop's polls saw (a fraction of one here)."""
    RecordsCosts.costs = {}
    trials, _, _ = _simulated_run(tmp_path, funcs, "costs", delay_seed=0, trials=6, optimizer=RecordsCosts)
    assert sorted(RecordsCosts.costs) == sorted(t[0] for t in trials)
    for index, _, start, end in trials:
        assert end - start > 5.0
        assert RecordsCosts.costs[index] == pytest.approx(end - start, rel=1e-6)


class WaitsForResults(ResultDrivenOptimizer):
    """Two points first, then nothing until both results are in, as Ax's model step
    waits for results of its quasi-random start (`strategies.MIN_OBSERVED_RESULTS`)."""

    def __init__(self, delays: random.Random, log: list[str]) -> None:
        super().__init__(delays, log)
        self.results = 0

    def complete(self, index: int, values: Mapping[str, float], cost: float | None = None) -> None:
        super().complete(index, values, cost)
        self.results += 1

    def generate(self, n: int) -> list[Candidate]:
        if self.n >= 2 and self.results < 2:
            self.log.append(f"generate {n}: none")
            return []
        return super().generate(2 if self.n == 0 else n)


@pytest.mark.timeout(120)
def test_an_optimizer_with_nothing_to_propose_is_asked_again_when_a_trial_ends(
        tmp_path: Path, funcs: str) -> None:
    """An empty proposal while trials run leaves the free slots idle, and the loop
    asks again only once another trial has ended (not every tick: on the simulated
    clock that would keep virtual time from moving at all)."""
    trials, log, _ = _simulated_run(tmp_path, funcs, "waits", delay_seed=0, trials=8, optimizer=WaitsForResults)
    empty = [i for i, line in enumerate(log) if line.endswith(": none")]
    assert empty  # the loop did meet an optimizer with nothing to propose
    for a, b in zip(empty, empty[1:]):  # one empty answer per trial that ended, at most
        assert any(line.startswith("complete") for line in log[a:b]), log
    starts = sorted(start for _, _, start, _ in trials)
    ends = sorted(end for _, _, _, end in trials)
    assert starts[:2] == [0.0, 0.0] and starts[2] == ends[1]  # the other slots waited for the 2nd result


def test_the_peers_event_loop_keeps_k_trials_running_and_tells_results_in_end_order() -> None:
    """benchmarks/parallel.py's `simulate` follows the simulated runner's rules: a free slot
    is refilled at once, results arrive in the order trials end, durations are the runner's."""
    pytest.importorskip("moocore")
    from benchmarks.parallel import duration, simulate
    from benchmarks.problems import Problem

    problem = Problem("toy", "toy", {"x": {"type": "float", "low": 0, "high": 1}}, ("a", "b"), (2.0, 2.0), 1.0,
                      lambda p: {"a": p["x"], "b": 1 - p["x"]}, "unused:fn")
    asked: list[int] = []
    told: list[float] = []

    def ask(n: int) -> list[tuple[Any, dict[str, Any]]]:
        asked.append(n)
        return [(len(told), {"x": round(0.123 * (sum(asked) - k) % 1.0, 6)}) for k in range(n)]

    res = simulate(problem, ask, lambda token, values: told.append(values["a"]), seed=4, budget=9, parallelism=3)
    assert asked[0] == 3 and sum(asked) == 9 and len(res["values"]) == 9
    assert res["end"] == sorted(res["end"]) and told == [v["a"] for v in res["values"]]
    for p, s, e in zip(res["params"], res["start"], res["end"]):
        assert e - s == pytest.approx(duration(p, 4))
        assert s == 0.0 or s in res["end"]
        assert sum(1 for s2, e2 in zip(res["start"], res["end"]) if s2 <= s < e2) <= 3
