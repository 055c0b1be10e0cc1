"""A node set down under running trials, on the real local Slurm cluster, through the
fault harness (benchmarks/faults.py): every trial completes from its checkpoint, none
runs twice, no job is left behind and nobody has to resume anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_a_node_set_down_under_running_trials_costs_at_most_one_checkpoint_interval(tmp_path: Path) -> None:
    from benchmarks import faults

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
