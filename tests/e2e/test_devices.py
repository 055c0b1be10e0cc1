"""GPU placement without GPUs: a fake inventory (NASCTL_DEVICES / runner.cfg.devices)
is handed out as CUDA_VISIBLE_DEVICES exactly as real devices would be. Trials
record the devices they were given with start and end times, and no device is
held by two trials at once: across two experiments driven by two `nasctl run`
processes, across a kill -9 and resume, with sharing, and under torchrun."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from csv import DictReader
from io import StringIO
from pathlib import Path

import pytest

from nasctl.store import Store
from tests.conftest import run_cli
from tests.helpers.cli import start as start_cli
from tests.helpers.resume import write_spec as resume_spec

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).parent / "scripts" / "device_trial.py"


def write_spec(tmp_path: Path, name: str, *, gpu: int, max_trials: int, parallelism: int,
               cfg: str = "{}", preload: str = "null") -> Path:
    return resume_spec(tmp_path, name, max_trials=max_trials, parallelism=parallelism, initial=max_trials,
                       script=SCRIPT, trial=f"resources: {{gpu: {gpu}}}, preload: {preload}", runner=cfg)


def start(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return start_cli([*args, "--json"], cwd, env)


def records(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines()]


def overlaps(recs: list[dict], per_device: int = 1) -> list[str]:  # type: ignore[type-arg]
    """Moments when a device was held by more than `per_device` trials (one record per trial)."""
    points = []
    for r in recs:
        for d in r["visible"].split(","):
            points += [(r["start"], 1, d, r["experiment"], r["trial"]), (r["end"], -1, d, r["experiment"], r["trial"])]
    held: Counter[str] = Counter()
    bad = []
    for t, delta, d, exp, trial in sorted(points, key=lambda p: (p[0], p[1])):  # ends before starts at a tie
        held[d] += delta
        if held[d] > per_device:
            bad.append(f"device {d} held by {held[d]} trials at {t} ({exp} trial {trial})")
    return bad


def stored(db: str, name: str) -> dict[int, dict]:  # type: ignore[type-arg]
    out = run_cli("trials", name, "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    return {t["index"]: t for t in json.loads(out.stdout)}


@pytest.mark.parametrize("db_kind", ["sqlite", "postgresql"])
def test_two_experiments_never_share_a_device(tmp_path: Path, db_kind: str, request: pytest.FixtureRequest) -> None:
    db = f"sqlite:///{tmp_path / 'n.db'}" if db_kind == "sqlite" else request.getfixturevalue("db_url_pg")
    log = tmp_path / "devices.jsonl"
    env = {"NASCTL_DEVICES": "0,1,2,3", "NASCTL_TEST_DEVICES": str(log)}
    a = write_spec(tmp_path, "one-gpu", gpu=1, max_trials=8, parallelism=3)
    b = write_spec(tmp_path, "two-gpus", gpu=2, max_trials=5, parallelism=2)
    pa = start(["run", str(a), "--db", db], tmp_path, env)
    time.sleep(1.0)  # the first creates the database; then both run at once
    pb = start(["run", str(b), "--db", db], tmp_path, env)
    for p in (pa, pb):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert json.loads(out)["summary"]["status"] == "COMPLETED"
    recs = records(log)
    assert Counter(r["experiment"] for r in recs) == {"one-gpu": 8, "two-gpus": 5}
    assert overlaps(recs) == []
    for name, want in (("one-gpu", 1), ("two-gpus", 2)):
        trials = stored(db, name)
        by_trial = {r["trial"]: r for r in recs if r["experiment"] == name}
        for i, t in trials.items():
            assert len(t["devices"]) == want and ",".join(t["devices"]) == by_trial[i]["visible"]
            assert set(t["devices"]) <= {"0", "1", "2", "3"} and not t["waiting_for_devices"]
    store = Store(db)
    assert store.device_leases() == []  # every lease went with its trial
    store.close()


def test_a_trial_without_free_devices_waits_and_shows_it(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'n.db'}"
    log = tmp_path / "devices.jsonl"
    spec = write_spec(tmp_path, "waits", gpu=2, max_trials=2, parallelism=2, cfg="{devices: [0, 1]}")
    hold = tmp_path / "hold"
    hold.touch()
    proc = start(["run", str(spec), "--db", db], tmp_path, {"NASCTL_TEST_DEVICES": str(log), "NASCTL_TEST_HOLD": str(hold)})
    deadline = time.monotonic() + 120
    status: dict = {}  # type: ignore[type-arg]
    while time.monotonic() < deadline and proc.poll() is None:
        st = run_cli("status", "waits", "--db", db, "--json")
        if st.returncode == 0:
            status = json.loads(st.stdout)
            if status["trials"]["RUNNING"] == 1:
                break
        time.sleep(0.2)
    assert status["trials"]["RUNNING"] == 1 and status["waiting_for_devices"] == 1, status
    assert list(status["devices"].values()) == [["0", "1"]]
    rows = stored(db, "waits")
    assert sorted(r["waiting_for_devices"] for r in rows.values()) == [False, True]
    text = run_cli("status", "waits", "--db", db)
    assert "1 waiting for devices" in text.stdout and "0,1" in text.stdout
    hold.unlink()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert [r["visible"] for r in records(log)] == ["0,1", "0,1"]
    assert overlaps(records(log)) == []
    assert not any(r["waiting_for_devices"] for r in stored(db, "waits").values())


def test_kill_nine_and_resume_keep_devices_exclusive(tmp_path: Path) -> None:
    """One experiment's orchestrator dies right after submitting a trial (its lease
    written, RUNNING not yet recorded) while another experiment keeps placing
    trials; the resumed one re-attaches the trial with its devices, launches
    nothing twice, and no device is ever held twice."""
    db = f"sqlite:///{tmp_path / 'n.db'}"
    log = tmp_path / "devices.jsonl"
    env = {"NASCTL_DEVICES": "0,1,2", "NASCTL_TEST_DEVICES": str(log), "NASCTL_TEST_SLEEP": "0.8"}
    a = write_spec(tmp_path, "crashing", gpu=1, max_trials=6, parallelism=2)
    b = write_spec(tmp_path, "steady", gpu=1, max_trials=8, parallelism=2)
    pa = start(["run", str(a), "--db", db], tmp_path, {**env, "NASCTL_FAILPOINTS": "after_submit:3"})
    time.sleep(1.0)
    pb = start(["run", str(b), "--db", db], tmp_path, env)
    pa.communicate(timeout=300)
    assert pa.returncode == -9  # killed at the failpoint
    time.sleep(1.5)  # the steady experiment places trials while the crashed one's lease is orphaned
    pr = start(["resume", "crashing", "--db", db], tmp_path, env)
    for p in (pb, pr):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert json.loads(out)["summary"]["status"] == "COMPLETED"
    recs = records(log)
    assert Counter(r["experiment"] for r in recs) == {"crashing": 6, "steady": 8}  # nothing ran twice
    assert overlaps(recs) == []
    trials = stored(db, "crashing")
    by_trial = {r["trial"]: r for r in recs if r["experiment"] == "crashing"}
    assert all(",".join(t["devices"]) == by_trial[i]["visible"] for i, t in trials.items())


def test_shared_devices_hold_at_most_trials_per_device(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'n.db'}"
    log = tmp_path / "devices.jsonl"
    # forked from a warm server (trial.preload): the fork takes the trial's own CUDA_VISIBLE_DEVICES
    spec = write_spec(tmp_path, "shared", gpu=1, max_trials=8, parallelism=4,
                      cfg="{devices: [6, 7], trials_per_device: 2}", preload="[json]")
    res = run_cli("run", str(spec), "--db", db, "--json", cwd=tmp_path,
                  env={"NASCTL_TEST_DEVICES": str(log), "NASCTL_TEST_SLEEP": "0.6"})
    assert res.returncode == 0, res.stderr
    recs = records(log)
    assert len(recs) == 8 and {r["visible"] for r in recs} == {"6", "7"}
    assert overlaps(recs, per_device=2) == []
    assert overlaps(recs, per_device=1) != []  # and they did share
    launches = [json.loads(p.read_text()) for p in (tmp_path / "nasctl_runs" / "shared").glob("trials/*/job/launch.json")]
    assert len(launches) == 8 and sum(1 for x in launches if x.get("warm")) >= 4
    assert {x["devices"] for x in launches} == {"6", "7"}
    exported = run_cli("export", "shared", "--db", db, "--format", "csv").stdout
    assert {row["devices"] for row in DictReader(StringIO(exported))} == {"6", "7"}


def test_multiprocess_trial_maps_local_rank_to_its_own_devices(tmp_path: Path) -> None:
    """torchrun's processes all see the trial's devices; LOCAL_RANK r is device r of them."""
    db = f"sqlite:///{tmp_path / 'n.db'}"
    log = tmp_path / "devices.jsonl"
    spec = write_spec(tmp_path, "ddp", gpu=2, max_trials=3, parallelism=2,
                      cfg="{devices: [4, 5, 6, 7], nproc_per_node: 2}")
    res = run_cli("run", str(spec), "--db", db, "--json", cwd=tmp_path, env={"NASCTL_TEST_DEVICES": str(log)})
    assert res.returncode == 0, res.stderr
    recs = records(log)
    trials = stored(db, "ddp")
    for i, t in trials.items():
        ranks = [r for r in recs if r["trial"] == i]
        assert sorted(r["local_rank"] for r in ranks) == ["0", "1"]
        assert {r["visible"] for r in ranks} == {",".join(t["devices"])}
        mine = [r["visible"].split(",")[int(r["local_rank"])] for r in ranks]
        assert sorted(mine) == sorted(t["devices"])  # each rank its own device of the trial's two
    assert overlaps([r for r in recs if r["local_rank"] == "0"]) == []
