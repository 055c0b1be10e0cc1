"""The quasi-random fast path (`nasctl.optimizer.quasirandom`): the same points
and the same model phase as Ax's own strategy, deterministic per seed, and a
resume in the middle of it draws what the uninterrupted run would have."""

from __future__ import annotations

import random
from typing import Any

import pytest

from nasctl.optimizer.ax_optimizer import AxOptimizer, RestoredTrial
from nasctl.spec import ExperimentSpec, spec_from_dict

SPACES: dict[str, dict[str, Any]] = {
    "floats": {"x": {"type": "float", "low": 0.0, "high": 1.0}, "y": {"type": "float", "low": -2.0, "high": 5.0}},
    "mixed": {
        "width": {"type": "int", "low": 16, "high": 128, "log": True},
        "lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
        "batch": {"type": "choice", "values": [32, 64, 128, 256], "ordered": True},
        "act": {"type": "choice", "values": ["relu", "gelu", "tanh"]},
        "epochs": {"type": "fixed", "value": 2},
    },
    # 6 points: the Sobol sequence repeats them, so deduplication decides what is drawn
    "tiny": {"a": {"type": "int", "low": 0, "high": 2}, "b": {"type": "choice", "values": ["u", "v"]}},
}


def make_spec(space: str, method: str, seed: int | None = 3, initial: int = 5) -> ExperimentSpec:
    return spec_from_dict({
        "name": "qr", "search_space": SPACES[space],
        "objectives": {"f1": {"goal": "minimize"}, "f2": {"goal": "minimize"}},
        "budget": {"max_trials": 60}, "trial": {"script": "/bin/true"},
        "optimizer": {"method": method, "seed": seed, "initial_trials": initial},
    })


def drive(opt: AxOptimizer, rounds: int, batch: int = 2, outcome_seed: int = 0) -> list[tuple[int, dict[str, Any], str]]:
    """Propose in batches and report outcomes as a loop would (some trials fail)."""
    rng = random.Random(outcome_seed)
    got: list[tuple[int, dict[str, Any], str]] = []
    for _ in range(rounds):
        for c in opt.generate(batch):
            got.append((c.index, c.parameters, c.method))
            if rng.random() < 0.2:
                opt.fail(c.index, "crashed")
            else:
                opt.complete(c.index, {"f1": rng.random(), "f2": rng.random()})
    return got


def ax_state(opt: AxOptimizer) -> tuple[list[tuple[int, str, dict[str, Any]]], list[tuple[int, str, float]]]:
    experiment = opt.client._experiment  # noqa: SLF001 - what Ax's model is fitted to
    trials = [(t.index, t.status.name, dict(t.arms[0].parameters)) for t in experiment.trials.values()]
    df = experiment.lookup_data().df
    data = sorted((int(r.trial_index), str(r.metric_name), float(r["mean"])) for _, r in df.iterrows())
    return trials, data


@pytest.mark.parametrize("space", ["floats", "mixed", "tiny"])
def test_sobol_method_draws_what_ax_draws(space: str) -> None:
    rounds = 2 if space == "tiny" else 7
    fast = AxOptimizer(make_spec(space, "sobol"))
    slow = AxOptimizer(make_spec(space, "sobol"), fast_start=False)
    got = drive(fast, rounds, batch=3)  # the first batch: the center and two Sobol points, as Ax gives them
    assert got == drive(slow, rounds, batch=3)
    assert [m for _, _, m in got[:3]] == ["CenterOfSearchSpace", "Sobol", "Sobol"]
    assert {m for _, _, m in got[1:]} == {"Sobol"}
    assert len({tuple(sorted(p.items())) for _, p, _ in got}) == len(got)  # no repeats, also in the tiny space
    assert ax_state(fast) == ax_state(slow)  # Ax learns every outcome once asked


@pytest.mark.parametrize("space", ["floats", "mixed"])
def test_model_phase_starts_from_the_same_experiment(space: str) -> None:
    """The first model-based proposals see the same trials and data, and are the same."""
    spec = make_spec(space, "botorch", initial=5)
    fast, slow = AxOptimizer(spec), AxOptimizer(spec, fast_start=False)
    got_fast, got_slow = drive(fast, 5), drive(slow, 5)
    assert got_fast == got_slow
    assert any(m not in ("Sobol", "CenterOfSearchSpace") for _, _, m in got_fast)  # the model took over
    assert ax_state(fast) == ax_state(slow)


def test_outcomes_reach_ax_only_when_needed() -> None:
    """While the start is quasi-random nothing is fitted to data, so Ax is told
    the outcomes later; any use of its client tells it first."""
    opt = AxOptimizer(make_spec("floats", "sobol"))
    drive(opt, 4)
    experiment = opt._client._experiment  # noqa: SLF001 - the raw engine, before it is told
    assert experiment.lookup_data().df.empty
    statuses = {t.status.name for t in opt.client._experiment.trials.values()}  # noqa: SLF001
    assert statuses <= {"COMPLETED", "FAILED"} and "COMPLETED" in statuses
    assert not opt.client._experiment.lookup_data().df.empty  # noqa: SLF001


def test_deterministic_for_a_seed() -> None:
    a = drive(AxOptimizer(make_spec("mixed", "sobol", seed=11)), 6)
    b = drive(AxOptimizer(make_spec("mixed", "sobol", seed=11)), 6)
    c = drive(AxOptimizer(make_spec("mixed", "sobol", seed=12)), 6)
    assert a == b
    assert [p for _, p, _ in a] != [p for _, p, _ in c]


@pytest.mark.parametrize(("space", "method", "crash_at"), [("floats", "sobol", 9), ("mixed", "botorch", 3),
                                                            ("tiny", "sobol", 3)])
def test_resume_in_the_quasi_random_phase(space: str, method: str, crash_at: int) -> None:
    """A run restored from the store after `crash_at` trials (some still running,
    as after a crash) proposes what the uninterrupted run proposes next."""
    spec = make_spec(space, method, initial=8)
    total = 6 if space == "tiny" else 12
    whole = AxOptimizer(spec)
    first = whole.generate(crash_at)
    while len(first) < crash_at:
        first += whole.generate(crash_at - len(first))
    rng = random.Random(5)
    outcomes: dict[int, dict[str, float] | None] = {}
    for c in first:
        done = c.index < crash_at - 2  # the last two were still running at the crash
        outcomes[c.index] = {"f1": rng.random(), "f2": rng.random()} if done else None
        if done:
            whole.complete(c.index, outcomes[c.index])  # type: ignore[arg-type]
    resumed = AxOptimizer(spec)
    resumed.restore([RestoredTrial(c.index, c.parameters, "COMPLETED" if outcomes[c.index] else "RUNNING", c.method,
                                   outcomes[c.index] or {}) for c in first])
    rest_whole = [(c.index, c.parameters, c.method) for c in whole.generate(total - crash_at)]
    rest_resumed = [(c.index, c.parameters, c.method) for c in resumed.generate(total - crash_at)]
    assert rest_resumed == rest_whole
    everything = [c.parameters for c in first] + [p for _, p, _ in rest_resumed]
    assert len({tuple(sorted(p.items())) for p in everything}) == len(everything)  # nothing proposed twice
    assert [i for i, _, _ in rest_resumed] == list(range(crash_at, crash_at + len(rest_resumed)))


@pytest.mark.parametrize("within", [True, False])
def test_a_first_request_for_more_slots_than_the_start(monkeypatch: pytest.MonkeyPatch, within: bool) -> None:
    """A first request for more candidates than `initial_trials`: Ax's strategy
    fills every slot with quasi-random points (the default); with
    `START_WITHIN_REQUEST` off it gets the start alone, and the model takes the
    free slots once results are in."""
    from nasctl.optimizer import strategies

    monkeypatch.setattr(strategies, "START_WITHIN_REQUEST", within)
    opt = AxOptimizer(make_spec("floats", "botorch", initial=4))
    first = opt.generate(9)
    assert [c.method for c in first[:2]] == ["CenterOfSearchSpace", "Sobol"]
    assert {c.method for c in first[1:]} == {"Sobol"}
    assert len(first) == (9 if within else 4)
    rng = random.Random(0)
    for c in first[:3]:
        opt.complete(c.index, {"f1": rng.random(), "f2": rng.random()})
    later = opt.generate(3)
    assert len(later) == 3 and {c.method for c in later} == {"MBM"}
