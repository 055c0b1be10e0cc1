"""Multi-fidelity search end to end: real trials through TorchX (local_cwd), promotions
that continue from checkpoints, the records, and kill -9 + resume mid-rung."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nasctl.errors import StorageError
from nasctl.spec import FidelitySpec
from nasctl.store import Store
from tests.conftest import run_cli

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).parent / "scripts" / "fidelity_trial.py"


def write_spec(tmp_path: Path, name: str, max_trials: int, method: str = "sobol", budget: str = "") -> Path:
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(
        f"name: {name}\n"
        "search_space: {x: {type: float, low: 0.0, high: 1.0}, y: {type: float, low: 0.0, high: 1.0}}\n"
        "objectives: {f1: {goal: minimize, threshold: 2.1}, f2: {goal: minimize, threshold: 3.1}}\n"
        f"budget: {{max_trials: {max_trials}, parallelism: 2, max_failures: 0{budget}}}\n"
        f"trial: {{script: {SCRIPT}}}\n"
        "runner: {scheduler: local_cwd, cfg: {}}\n"
        f"optimizer: {{method: {method}, initial_trials: 4, seed: 3,"
        " fidelity: {parameter: epochs, min: 1, max: 9, eta: 3}}\n"
    )
    return spec


def launch(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nasctl", *args, "--json"], cwd=cwd, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=600)


# Where successive orchestrators die: right after a promotion is recorded (before
# its job starts), with a promotion's job started but its handle not recorded,
# after a result is stored but before the optimizer (which decides promotions) hears of it.
KILLS = ["after_record_promotion:1", "after_submit:4", "after_record_promotion:2", "after_finish_trial:3"]


def test_kill_nine_mid_rung_then_resume_promotes_nothing_twice(tmp_path: Path, sqlite_url: str) -> None:
    """On SQLite only: the write-ahead order is the loop's, the same on every database
    (tests/e2e/test_crash_resume.py runs it on all three); the unique constraint that
    backs it is checked on all three in tests/integration/test_migration_multifidelity.py."""
    db_url = sqlite_url
    name, max_trials = "mf-crashy", 15
    spec = write_spec(tmp_path, name, max_trials)
    runs = tmp_path / "runs.log"
    env = {"NASCTL_TEST_RUNS": str(runs), "NASCTL_TEST_SLEEP": "0.3"}
    kills = 0
    for attempt in range(len(KILLS) + 3):
        step_env = dict(env)
        if attempt < len(KILLS):
            step_env["NASCTL_FAILPOINTS"] = KILLS[attempt]
        args = ["run", str(spec), "--db", db_url] if attempt == 0 else ["resume", name, "--db", db_url]
        proc = launch(args, tmp_path, step_env)
        if proc.returncode == -signal.SIGKILL:
            kills += 1
            continue
        assert proc.returncode == 0, proc.stderr
        break
    assert kills == len(KILLS), f"{kills} kills: a failpoint was never reached"

    trials = json.loads(run_cli("trials", name, "--db", db_url, "--json").stdout)
    assert len(trials) == max_trials and all(t["status"] == "COMPLETED" for t in trials)
    by_index = {t["index"]: t for t in trials}
    sources = [t["promoted_from"] for t in trials if t["promoted_from"] is not None]
    assert len(sources) >= 3, "too few promotions to test anything"
    assert len(sources) == len(set(sources)), "a trial was promoted twice"
    launches = [line.split() for line in runs.read_text().splitlines()]
    assert sorted(int(i) for i, _ in launches) == list(range(max_trials)), "a trial ran twice or never"
    resumed = dict(launches)
    rungs = FidelitySpec(min=1, max=9, eta=3).rungs
    for t in trials:
        x, y, e = t["parameters"]["x"], t["parameters"]["y"], t["parameters"]["epochs"]
        assert t["fidelity"] == e
        assert t["values"]["f1"] == pytest.approx(x + 1 / e, rel=1e-5)
        assert t["values"]["f2"] == pytest.approx(1 - math.sqrt(x) + y + 1 / e, rel=1e-5)
        src = t["promoted_from"]
        if src is None:
            assert e == rungs[0] and resumed[str(t["index"])] == "-"
            continue
        s = by_index[src]
        assert (s["parameters"]["x"], s["parameters"]["y"]) == (x, y)
        assert rungs.index(e) == rungs.index(s["fidelity"]) + 1
        # it continued from the checkpoint its source left, and trained only the epochs in between
        assert resumed[str(t["index"])] == os.path.join(s["log_dir"], "checkpoints", "last.ckpt")
        detail = json.loads(run_cli("trials", name, "--db", db_url, "--trial", str(t["index"]), "--json").stdout)
        assert [step for step, _ in detail["curves"]["loss"]] == list(range(int(s["fidelity"]) + 1, int(e) + 1))
    # the front and hypervolume use top-rung results only
    pareto = json.loads(run_cli("pareto", name, "--db", db_url, "--json").stdout)
    assert all(row["fidelity"] == 9 for row in pareto["front"])
    assert pareto["completed"] == sum(1 for t in trials if t["fidelity"] == 9)


def test_a_fidelity_budget_ends_the_run_and_holds_across_a_crash(tmp_path: Path, sqlite_url: str) -> None:
    """budget.max_fidelity: the run ends when the next trial would not fit; a promotion
    costs the epochs it adds; an orchestrator killed mid-run and resumed counts what
    was spent before the crash."""
    name, budget = "mf-budget", 20
    spec = write_spec(tmp_path, name, 100, budget=f", max_fidelity: {budget}")
    env = {"NASCTL_TEST_RUNS": str(tmp_path / "runs.log"), "NASCTL_TEST_SLEEP": "0.2"}
    proc = launch(["run", str(spec), "--db", sqlite_url], tmp_path, {**env, "NASCTL_FAILPOINTS": "after_finish_trial:6"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    proc = launch(["resume", name, "--db", sqlite_url], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    trials = json.loads(run_cli("trials", name, "--db", sqlite_url, "--json").stdout)
    by_index = {t["index"]: t for t in trials}
    cost = sum(t["fidelity"] - (by_index[t["promoted_from"]]["fidelity"] if t["promoted_from"] is not None else 0)
               for t in trials)
    assert all(t["status"] == "COMPLETED" for t in trials) and len(trials) < 100
    assert any(t["promoted_from"] is not None for t in trials)
    # within the budget, and ended only because the next trial (a new one costs 1 epoch,
    # a promotion 2 or 6 more) did not fit
    assert budget - 6 < cost <= budget
    store = Store(sqlite_url)
    events = store.events(store.get_experiment(name).id, kinds=["budget"])
    store.close()
    assert len(events) == 1 and f"{cost:g} spent" in events[0].message


def test_the_database_refuses_a_second_promotion_of_a_trial(sqlite_url: str, tmp_path: Path) -> None:
    from nasctl.spec import load_spec, spec_to_dict

    spec = load_spec(write_spec(tmp_path, "dup", 4))
    store = Store(sqlite_url, create=True)
    exp = store.create_experiment("dup", spec_to_dict(spec), str(tmp_path / "w"))
    store.add_trial(exp.id, 0, {"x": 0.1, "y": 0.2, "epochs": 1}, "Sobol", "dup-0", "t0", fidelity=1)
    store.add_trial(exp.id, 1, {"x": 0.3, "y": 0.2, "epochs": 1}, "Sobol", "dup-1", "t1", fidelity=1)
    store.add_trial(exp.id, 2, {"x": 0.1, "y": 0.2, "epochs": 3}, "promotion", "dup-2", "t2", fidelity=3,
                    promoted_from=0)
    with pytest.raises(StorageError, match="promoted_from"):
        store.add_trial(exp.id, 3, {"x": 0.1, "y": 0.2, "epochs": 3}, "promotion", "dup-3", "t3", fidelity=3,
                        promoted_from=0)
    rec = store.get_trial(exp.id, 2)
    assert (rec.fidelity, rec.promoted_from) == (3.0, 0)
    assert store.get_trial(exp.id, 1).promoted_from is None


DIGITS = """
name: mf-digits
search_space:
  hidden_size_1: {type: int, low: 16, high: 64, log: true}
  hidden_size_2: {type: int, low: 16, high: 64, log: true}
  learning_rate: {type: float, low: 1.0e-3, high: 1.0e-2, log: true}
objectives:
  val_acc:    {goal: maximize, threshold: 0.5}
  num_params: {goal: minimize, threshold: 80000}
budget: {max_trials: 6, parallelism: 2, trial_timeout: 600, max_failures: 0}
trial:
  search_space: mlp_digits
  args: {batch_size: 256, latency_repeats: 3, latency_warmup: 0, latency_min_seconds: 0.0}
runner: {scheduler: local_cwd, cfg: {}}
optimizer: {initial_trials: 3, seed: 0, fidelity: {parameter: epochs, min: 1, max: 3, eta: 3}}
"""


def test_lightning_promotions_continue_from_checkpoints(tmp_path: Path) -> None:
    """The built-in trainer: a promoted trial loads the Lightning checkpoint its
    source saved and trains only the remaining epochs (its global step goes on
    from the source's); the records carry fidelity and promoted_from everywhere."""
    spec = tmp_path / "mf.yaml"
    spec.write_text(DIGITS)
    db = f"sqlite:///{tmp_path / 'mf.db'}"
    r = run_cli("run", str(spec), "--db", db, "--workdir", str(tmp_path / "runs"), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trials = json.loads(run_cli("trials", "mf-digits", "--db", db, "--json").stdout)
    assert all(t["status"] == "COMPLETED" for t in trials)
    by_index = {t["index"]: t for t in trials}
    promoted = [t for t in trials if t["promoted_from"] is not None]
    assert promoted, "no trial was promoted"
    for t in trials:
        ckpt = os.path.join(t["log_dir"], "checkpoints", "last.ckpt")
        assert os.path.isfile(ckpt), f"trial {t['index']} saved no checkpoint"
        assert t["fidelity"] == t["parameters"]["epochs"]
    for t in promoted:
        s = by_index[t["promoted_from"]]
        assert t["fidelity"] == 3 and s["fidelity"] == 1
        assert t["info"]["resumed_from"] == os.path.join(s["log_dir"], "checkpoints", "last.ckpt")
        # one epoch is N optimizer steps; the promoted trial ends at 3 N, having trained 2 N
        assert t["info"]["final_step"] == 3 * s["info"]["final_step"]
        detail = json.loads(run_cli("trials", "mf-digits", "--db", db, "--trial", str(t["index"]), "--json").stdout)
        steps = [step for step, _ in detail["curves"]["train_loss"]]
        assert min(steps) > s["info"]["final_step"], "the promoted trial trained from scratch"
    # the table marks each promotion with the trial it continued
    table = run_cli("trials", "mf-digits", "--db", db).stdout
    header = next(line for line in table.splitlines() if " status " in line)
    assert " from " in header, header
    for t in promoted:
        row = next(line for line in table.splitlines() if line.strip("│ ").startswith(f"{t['index']} "))
        assert f"#{t['promoted_from']}" in row, row
    exported = json.loads(run_cli("export", "mf-digits", "--db", db, "--format", "json").stdout)
    assert {(t["index"], t["fidelity"], t["promoted_from"]) for t in exported["trials"]} == {
        (t["index"], t["fidelity"], t["promoted_from"]) for t in trials}
    csv_text = run_cli("export", "mf-digits", "--db", db, "--format", "csv").stdout
    assert csv_text.splitlines()[0].endswith("fidelity,promoted_from")

    from nasctl.spec import spec_from_dict
    from nasctl.web.serializers import trial_summary

    store = Store(db)
    exp = store.get_experiment("mf-digits")
    rows = [trial_summary(t, spec_from_dict(exp.spec)) for t in store.list_trials(exp.id)]
    assert {(r["index"], r["fidelity"], r["promoted_from"]) for r in rows} == {
        (t["index"], t["fidelity"], t["promoted_from"]) for t in trials}
    # the dashboard's front and hypervolume use top-rung results, as `nasctl pareto` does
    from nasctl.web.analysis import analyze

    front = analyze(store, exp, 0).front.indices
    pareto = json.loads(run_cli("pareto", "mf-digits", "--db", db, "--json").stdout)
    assert sorted(front) == sorted(r["index"] for r in pareto["front"])
    assert front and all(by_index[i]["fidelity"] == 3 for i in front)
    # the Python API carries the same records, and its Pareto flag follows the top-rung rule
    import nasctl

    frame = nasctl.load("mf-digits", db=db).trials_dataframe()
    assert {(int(i), float(r["fidelity"]), None if r["promoted_from"] != r["promoted_from"] else int(r["promoted_from"]))
            for i, r in frame.iterrows()} == {(t["index"], float(t["fidelity"]), t["promoted_from"]) for t in trials}
    assert sorted(int(i) for i in frame.index[frame["pareto"]]) == sorted(front)
    assert "fidelity,promoted_from" in csv_text.splitlines()[0] and "pareto" in csv_text.splitlines()[0]
