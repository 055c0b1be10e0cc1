"""A node set down under running trials, on the real local Slurm cluster, through the
fault harness (benchmarks/faults.py): every trial completes from its checkpoint, none
runs twice, no job is left behind and nobody has to resume anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cluster import require_slurm

pytestmark = pytest.mark.e2e


def test_a_node_set_down_under_running_trials_costs_at_most_one_checkpoint_interval(tmp_path: Path) -> None:
    from benchmarks import faults

    require_slurm()
    assert faults.main(["--faults", "node-down", "--repeats", "1", "--epochs", "4", "--epoch-seconds", "2",
                        "--run-timeout", "300", "--out", str(tmp_path)]) == 0
    (run,) = json.loads((tmp_path / "faults.json").read_text())["runs"]
    assert run["errors"] == [], run["errors"]
    s = run["summary"]
    assert s["hits"] >= 1, run  # the fault happened to a running trial
    assert s["completed"] == faults.BUDGET and s["manual"] == 0
    assert s["duplicates"] == 0 and s["overlapping"] == 0 and s["orphans"] == 0
    assert s["repeated_s"] is not None and s["repeated_s"] <= 2.0  # at most one checkpoint interval per hit
    assert faults.verdict(faults.FAULTS["node-down"], [s], [faults.Run(**{k: v for k, v in run.items()
                                                                         if k != "summary"})], 2.0) == "met"


def test_a_trial_past_its_time_limit_is_warned_and_resumes_in_a_new_attempt(tmp_path: Path) -> None:
    """Time limit 1 min with `signal: USR1@30` and `retry_on: [infrastructure, timeout]`:
    each allocation warns the trial once, Slurm's SIGTERM ends the attempt (timeout)
    after a checkpoint, and the next attempt finishes from it."""
    from benchmarks import faults

    require_slurm()
    assert faults.main(["--faults", "time-limit", "--repeats", "1", "--epoch-seconds", "2",
                        "--time-limit-seconds", "92", "--run-timeout", "400", "--out", str(tmp_path)]) == 0
    (run,) = json.loads((tmp_path / "faults.json").read_text())["runs"]
    assert run["errors"] == [], run["errors"]
    s = run["summary"]
    assert s["completed"] == faults.BUDGET and s["manual"] == 0 and s["orphans"] == 0 and s["duplicates"] == 0
    for t in run["trials"]:
        assert [a["failure_class"] for a in t["attempts"]][:-1] == ["timeout"] * (len(t["attempts"]) - 1), t
        assert len(t["attempts"]) >= 2 and t["status"] == "COMPLETED", t
    assert s["repeated_s"] is not None and s["repeated_s"] <= 2.0
