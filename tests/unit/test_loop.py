"""Loop behaviour with a real local runner: trials are collected and dispatched while
the optimizer is still busy; every proposal is in the store before its job starts."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from nasctl.orchestration.generator import CandidateGenerator
from nasctl.orchestration.loop import Orchestrator
from nasctl.optimizer.ax_optimizer import Candidate
from nasctl.runners import get_runner
from nasctl.spec import parse_spec, spec_to_dict
from nasctl.store import Store
from nasctl.types import TrialStatus
from tests.helpers.loop import SCRIPT, SLEEPY_SCRIPT, GatedOptimizer, ListOptimizer


def test_collection_continues_while_generating(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text(SCRIPT)
    spec = parse_spec(
        f"""
name: gated
search_space: {{x: {{type: float, low: 0, high: 1}}}}
objectives: {{a: {{goal: maximize}}, b: {{goal: maximize}}}}
budget: {{max_trials: 2, parallelism: 1}}
trial: {{script: {script}}}
"""
    )
    store = Store(f"sqlite:///{tmp_path}/g.db", create=True)
    exp = store.create_experiment("gated", spec_to_dict(spec), str(tmp_path / "work"))
    gate, log = threading.Event(), []
    gen = CandidateGenerator(lambda: GatedOptimizer(gate, log))
    orch = Orchestrator(store, exp, spec, get_runner("local_cwd"), gen, poll_interval=0.05, metrics_interval=0.1)
    result: dict[str, Any] = {}
    t = threading.Thread(target=lambda: result.setdefault("summary", orch.run()))
    t.start()
    try:
        # Trial 0 runs and completes while the second proposal is still blocked.
        deadline = time.monotonic() + 60
        while True:
            trials = store.list_trials(exp.id)
            if trials and trials[0].status == TrialStatus.COMPLETED:
                break
            assert time.monotonic() < deadline, f"trial 0 not collected: {trials}"
            time.sleep(0.05)
        assert not gate.is_set()
        assert len(trials) == 1  # the blocked proposal has not produced a trial
        assert trials[0].values == {"a": 0.1, "b": 0.9} or abs(trials[0].values["a"] - 0.1) < 1e-6
    finally:
        gate.set()
        t.join(60)
    summary = result["summary"]
    assert summary.status.value == "COMPLETED" and summary.counts["COMPLETED"] == 2
    # the optimizer heard about trial 0 before it served the second request
    assert log.index("complete 0") < log.index("generate 1 after 1 proposals")
    events = [e.kind for e in store.events(exp.id) if e.trial_index == 1]
    assert events[:2] == ["candidate", "submitted"]  # write-ahead: recorded before submitted


def _run_sleepy(tmp_path: Path, parallelism: int, sleeps: list[float], delay: float = 0.0) -> tuple[Store, int]:
    script = tmp_path / "t.py"
    script.write_text(SLEEPY_SCRIPT)
    spec = parse_spec(
        f"""
name: ahead
search_space: {{x: {{type: float, low: 0, high: 1}}, s: {{type: float, low: 0, high: 10}}}}
objectives: {{a: {{goal: maximize}}, b: {{goal: maximize}}}}
budget: {{max_trials: {len(sleeps)}, parallelism: {parallelism}}}
trial: {{script: {script}}}
"""
    )
    store = Store(f"sqlite:///{tmp_path}/a.db", create=True)
    exp = store.create_experiment("ahead", spec_to_dict(spec), str(tmp_path / "work"))
    points = [{"x": 0.1 * (k + 1), "s": s} for k, s in enumerate(sleeps)]
    gen = CandidateGenerator(lambda: ListOptimizer(points, [], delay))
    orch = Orchestrator(store, exp, spec, get_runner("local_cwd"), gen, poll_interval=0.05, metrics_interval=0.1)
    summary = orch.run()
    assert summary.counts["COMPLETED"] == len(sleeps), summary
    # the generator thread has ended when run() returns: one still tearing its optimizer
    # down while the interpreter exits can abort the process (exit code 134)
    assert gen.join(0)
    return store, exp.id


def _event_id(store: Store, exp_id: int, kind: str, index: int) -> int:
    return next(e.id for e in store.events(exp_id) if e.kind == kind and e.trial_index == index)


def test_one_candidate_is_kept_ahead_while_proposals_are_long_next_to_trials(tmp_path: Path) -> None:
    # trial 1 sleeps while 0 and 2 end at once; a proposal takes 0.5 s, well over
    # IDLE_SHARE of a trial of a few seconds at most: once the first result is in,
    # the loop asks for one candidate more than the free slots, so trial 3 is
    # recorded before any slot is free for it and starts the moment one frees
    store, exp_id = _run_sleepy(tmp_path, 2, [0.0, 5.0, 0.0, 0.0], delay=0.5)
    assert _event_id(store, exp_id, "candidate", 3) < _event_id(store, exp_id, "finished", 2)
    # never more than the free slots before the first result
    assert _event_id(store, exp_id, "candidate", 2) > _event_id(store, exp_id, "finished", 0)


def test_no_candidate_ahead_while_proposals_are_short_next_to_trials(tmp_path: Path) -> None:
    # proposals of milliseconds against trials of a second and more: a freed slot
    # waits for a proposal made after its trial's result, so trial 3 is proposed
    # only once trial 2 has ended, and trial 2 only once trial 0 has
    store, exp_id = _run_sleepy(tmp_path, 2, [1.0, 5.0, 1.0, 0.0])
    assert _event_id(store, exp_id, "candidate", 2) > _event_id(store, exp_id, "finished", 0)
    assert _event_id(store, exp_id, "candidate", 3) > _event_id(store, exp_id, "finished", 2)


def test_the_lookahead_rule() -> None:
    from nasctl.orchestration.proposals import IDLE_SHARE, lookahead

    assert lookahead(4, 0, None, 30.0, []) == 0  # no result yet: nothing but quasi-random to propose
    assert lookahead(1, 5, None, 30.0, [60.0]) == 0  # one worker: sequential
    assert lookahead(4, 5, 2, 0.0, [60.0]) == 2  # fixed
    # proposals short next to trials: none ahead (a freed slot waits for a proposal
    # that has seen its result); longer: enough for the slots that free meanwhile
    assert lookahead(4, 5, None, 1.0, [60.0, 50.0, 70.0]) == 0
    assert lookahead(16, 5, None, 0.0, [60.0]) == 0
    assert lookahead(4, 5, None, IDLE_SHARE * 60.0, [60.0]) == 0
    assert lookahead(4, 5, None, 3.1, [60.0]) == 1  # just over IDLE_SHARE: at least one
    assert lookahead(4, 5, None, 1.0, []) == 1  # no trial has a duration yet: one, to be safe
    assert lookahead(2, 5, None, 1.5, [1.0]) == 2
    assert lookahead(4, 5, None, 9.0, [1.0]) == 4


def test_no_candidate_ahead_with_one_worker(tmp_path: Path) -> None:
    store, exp_id = _run_sleepy(tmp_path, 1, [0.0, 0.0, 0.0])
    for k in (1, 2):  # sequential: each proposal after the previous trial's result
        assert _event_id(store, exp_id, "candidate", k) > _event_id(store, exp_id, "finished", k - 1)


def test_polls_faster_only_near_a_trials_expected_end() -> None:
    """Between ticks the loop sleeps `poll_interval`, and FAST_POLL_SECONDS once a
    running trial has run DUE_FRACTION of the median trial; the plain interval
    while no trial has finished yet."""
    from nasctl.orchestration.running import FAST_POLL_SECONDS, sleep_seconds

    now = time.time()
    assert sleep_seconds(0.25, False, [], [now - 7.0], now) == 0.25  # no trial has finished: no expectation
    durations = [10.0, 10.0, 12.0]
    assert sleep_seconds(0.25, False, durations, [now - 7.0], now) == 0.25  # 7 s of an expected 10 s
    assert sleep_seconds(0.25, False, durations, [now - 7.0, now - 8.5], now) == FAST_POLL_SECONDS  # past 80%
    # the runner wakes the loop when a job ends: no fast polls
    assert sleep_seconds(0.25, True, durations, [now - 7.0, now - 8.5], now) == 0.25
    assert sleep_seconds(0.25, False, durations, [], now) == 0.25  # nothing runs
    assert sleep_seconds(0.01, False, durations, [now - 8.5], now) == 0.01  # never slower than asked


class ScaleOptimizer(ListOptimizer):
    """`ListOptimizer` whose model puts the objectives of `scales[k]` on the log scale
    at its k-th proposal (None: no model), counting trial indices from `first`."""

    def __init__(self, points: list[dict[str, float]], scales: list[tuple[str, ...] | None], first: int) -> None:
        super().__init__(points, [])
        self.scales, self.n = scales, first

    def generate(self, n: int) -> list[Candidate]:
        self.log_scale = self.scales.pop(0)
        return super().generate(n)


def test_changes_of_the_models_scale_are_told_once_and_survive_a_resume(tmp_path: Path) -> None:
    from nasctl.store import queries

    script = tmp_path / "t.py"
    script.write_text(SCRIPT)
    text = """
name: scale
search_space: {{x: {{type: float, low: 0, high: 1}}}}
objectives: {{a: {{goal: maximize}}, b: {{goal: maximize}}}}
budget: {{max_trials: {n}, parallelism: 1}}
trial: {{script: {script}}}
"""
    store = Store(f"sqlite:///{tmp_path}/s.db", create=True)
    spec = parse_spec(text.format(n=3, script=script))
    exp = store.create_experiment("scale", spec_to_dict(spec), str(tmp_path / "work"))
    points = [{"x": 0.1 * (k + 1)} for k in range(5)]

    def run(spec: Any, scales: list[tuple[str, ...] | None], first: int) -> list[str]:
        gen = CandidateGenerator(lambda: ScaleOptimizer(points, scales, first))
        orch = Orchestrator(store, exp, spec, get_runner("local_cwd"), gen, poll_interval=0.05, metrics_interval=0.1)
        assert orch.run().status.value == "COMPLETED"
        return [e.message for e in store.events(exp.id, kinds=[queries.LOG_SCALE])]

    told = run(spec, [None, ("a",), ("a",)], 0)
    assert told == ["optimizer: modelling a on the log scale (observed 0.1 to 0.1)"]
    assert queries.log_scale_metrics(store, exp.id) == ["a"]
    # resumed with a larger budget: the new orchestrator knows `a` is already on the log
    # scale, and tells only the change
    told = run(parse_spec(text.format(n=5, script=script)), [("a",), ("b",)], 3)
    assert told[1:] == ["optimizer: modelling b on the log scale (observed 0.6 to 0.9); a back on its own scale"]
    assert queries.log_scale_metrics(store, exp.id) == ["b"]
