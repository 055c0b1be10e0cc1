"""What a new user tripped on in the CLI (issue 41): each case is the command as
they ran it and what it must say."""

from __future__ import annotations

import json
from pathlib import Path

from nasctl.store import Store
from nasctl.types import TrialStatus
from tests.conftest import run_cli
from tests.web.conftest import add_synthetic


def test_pareto_says_how_many_met_the_thresholds_and_what_left_the_others_out(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/p.db"
    store = Store(url, create=True)
    exp = add_synthetic(store, "thr", 6)  # acc > 0.05 (threshold), lat <= 8 (constraint)
    # the most accurate trial, which misses the constraint; and one below the acc threshold
    for i, values in ((6, {"acc": 0.999, "size": 50.0, "lat": 9.5}), (7, {"acc": 0.01, "size": 10.0, "lat": 1.0})):
        t = store.add_trial(exp.id, i, {"x": 0.5, "act": "relu"}, "Sobol", f"thr-{i}", "")
        store.finish_trial(t.id, TrialStatus.COMPLETED, values)
    proc = run_cli("pareto", "thr", "--db", url)
    assert proc.returncode == 0, proc.stderr
    view = json.loads(run_cli("pareto", "thr", "--db", url, "--json").stdout)
    assert view["excluded"]["lat <= 8"][-1] == 6 and view["excluded"]["acc > 0.05"] == [7]
    assert view["feasible"] == view["completed"] - sum(len(v) for v in view["excluded"].values())
    out = " ".join(proc.stdout.split())
    assert f"{view['feasible']} of {view['completed']} completed trials met every threshold and constraint" in out
    assert "failed acc > 0.05 (#7)" in out and "#6)" in out.split("failed lat <= 8")[1]
