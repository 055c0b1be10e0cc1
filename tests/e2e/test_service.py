"""`nasctl serve` as a real process: submission, queueing, one active service per
database (a second one is a standby: tests/e2e/test_standby.py), takeover after
kill -9, graceful SIGTERM, health and metrics."""

from __future__ import annotations

import json
import random
import signal
import socket
import time
from pathlib import Path

import httpx
import psutil
import pytest

from nasctl.store import Store
from nasctl.types import ExperimentStatus
from tests.conftest import free_port, run_cli
from tests.helpers.cli import one_line_error
from tests.helpers.resume import check_results, write_spec
from tests.helpers.service import TOKEN, Service

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_leftover_service_trials")]


def status(db: str, name: str) -> dict:  # type: ignore[type-arg]
    out = run_cli("status", name, "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def recorded_states(db: str) -> dict[str, str]:
    """Each experiment's recorded status, read from the store (polling the CLI's
    `status --json` costs a process start each time; check_results reads that)."""
    store = Store(db)
    try:
        return {e.name: e.status.value for e, _ in store.list_experiments()}
    finally:
        store.close()


def wait_for_states(db: str, names: list[str], states: set[str], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not all(recorded_states(db).get(n) in states for n in names):
        assert time.monotonic() < deadline, recorded_states(db)
        time.sleep(0.5)


def test_submit_queue_run_and_refusals(tmp_path: Path, services: list[Service]) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    runs = tmp_path / "runs-{experiment}.log"
    hold = tmp_path / "hold"  # trials wait while it exists
    hold.touch()
    svc = Service(db, tmp_path, {"NASCTL_TEST_RUNS": str(runs), "NASCTL_TEST_HOLD": str(hold)}, "--max-experiments", "1")
    services.append(svc)
    svc.start()
    spec = write_spec(tmp_path, "first", max_trials=4, parallelism=2)
    assert svc.submit(spec).stdout.strip() == "first"
    assert svc.submit(spec, "--name", "second").stdout.strip() == "second"
    # one slot: the second waits, QUEUED, shown as such everywhere
    assert status(db, "second")["status"] == "QUEUED"
    assert "QUEUED" in run_cli("ls", "--db", db).stdout
    assert httpx.get(f"{svc.url}/api/experiments/second").json()["status"] == "QUEUED"
    # what `nasctl run` refuses, submit refuses with the same line (exit 2)
    bad = tmp_path / "bad.yaml"
    bad.write_text(spec.read_text().replace("low: 0.0, high: 1.0}, y", "low: 1.0, high: 0.0}, y"))
    by_run = one_line_error(run_cli("run", str(bad), "--db", f"sqlite:///{tmp_path / 'other.db'}", cwd=tmp_path))
    assert one_line_error(svc.submit(bad)) == by_run
    assert "already exists" in one_line_error(svc.submit(spec, "--name", "second"))
    assert "missing or wrong token" in one_line_error(svc.submit(spec, "--name", "third", token=None))
    assert httpx.post(f"{svc.url}/api/experiments", json={"spec": spec.read_text()}).status_code == 401
    # a second service on the same database waits as a read-only standby that names the first
    second = Service(db, tmp_path, {})
    services.append(second)
    second.start()
    seen = httpx.get(second.url + "/healthz").json()
    assert seen["role"] == "standby" and seen["active"] == svc.url + "/", seen
    refused = second.submit(spec, "--name", "third")
    assert refused.returncode == 1 and "standby" in refused.stderr, refused.stderr
    assert f"{svc.url}/ (pid {svc.proc.pid} on {socket.gethostname()})" in refused.stderr  # type: ignore[union-attr]
    second.kill()
    # `nasctl run`/`resume` of a driven experiment are refused
    wait_for_states(db, ["first"], {"RUNNING"})
    assert "already being driven" in one_line_error(run_cli("resume", "first", "--db", db, cwd=tmp_path))
    assert "already exists" in one_line_error(run_cli("run", str(spec), "--db", db, cwd=tmp_path))
    hold.unlink()
    wait_for_states(db, ["first", "second"], {"COMPLETED"})
    for name in ("first", "second"):
        check_results(db, name, Path(str(runs).replace("{experiment}", name)), 4)
    health = httpx.get(svc.url + "/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok" and health.json()["role"] == "active"
    metrics = httpx.get(svc.url + "/metrics").text
    assert 'nasctl_experiments{state="COMPLETED"} 2' in metrics and 'nasctl_trials{state="COMPLETED"} 8' in metrics
    assert "nasctl_proposal_seconds_count" in metrics and "nasctl_driven_experiments 0" in metrics
    assert "nasctl_service_active 1" in metrics
    info = httpx.get(svc.url + "/api/service").json()
    assert info["pid"] == svc.proc.pid and info["max_experiments"] == 1  # type: ignore[union-attr]


def test_a_broken_experiment_fails_alone(tmp_path: Path, services: list[Service]) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    runs = tmp_path / "runs-{experiment}.log"
    svc = Service(db, tmp_path, {"NASCTL_TEST_RUNS": str(runs)}, "--max-experiments", "3")
    services.append(svc)
    spec = write_spec(tmp_path, "healthy", max_trials=4, parallelism=2)
    svc.start()
    assert svc.submit(spec).returncode == 0
    store = Store(db)  # an experiment whose stored spec is damaged: its loop cannot even start
    exp = store.create_experiment("broken", {"name": "broken", "not": "a spec"}, str(tmp_path / "runs" / "broken"))
    store.set_experiment_status(exp.id, ExperimentStatus.QUEUED, "test")
    store.close()
    deadline = time.monotonic() + 240
    while True:
        states = {e["name"]: e["status"] for e in json.loads(run_cli("ls", "--db", db, "--json").stdout)}
        if states == {"healthy": "COMPLETED", "broken": "FAILED"} or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert states == {"healthy": "COMPLETED", "broken": "FAILED"}
    assert svc.proc is not None and svc.proc.poll() is None
    assert httpx.get(svc.url + "/healthz").status_code == 200


def test_sigterm_leaves_trials_running_and_a_restart_reattaches(tmp_path: Path, services: list[Service]) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    runs = tmp_path / "runs-{experiment}.log"
    hold = tmp_path / "hold"
    hold.touch()
    env = {"NASCTL_TEST_RUNS": str(runs), "NASCTL_TEST_HOLD": str(hold)}
    svc = Service(db, tmp_path, env)
    services.append(svc)
    svc.start()
    assert svc.submit(write_spec(tmp_path, "held", max_trials=4, parallelism=2)).returncode == 0
    deadline = time.monotonic() + 120
    while status(db, "held")["trials"]["RUNNING"] < 2:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    t0 = time.monotonic()
    assert svc.proc is not None
    svc.proc.send_signal(signal.SIGTERM)
    out, err = svc.proc.communicate(timeout=60)
    assert svc.proc.returncode == 0 and time.monotonic() - t0 < 10, (out, err)
    st = status(db, "held")  # handed back: RUNNING without an orchestrator, its trials still running
    # recorded RUNNING, and said plainly that nobody drives it
    assert st["status"] == "NOT_RUNNING" and st["recorded_status"] == "RUNNING" and not st["orchestrator_alive"]
    assert st["trials"]["RUNNING"] == 2
    # the next start takes it over and re-attaches the two trials
    svc2 = Service(db, tmp_path, env)
    services.append(svc2)
    svc2.start()
    deadline = time.monotonic() + 60
    while not status(db, "held")["orchestrator_alive"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    # stop from the API (trials keep running), then resume from the API
    assert httpx.post(f"{svc2.url}/api/experiments/held/stop", headers=auth).status_code == 200
    wait_for_states(db, ["held"], {"STOPPED"})
    assert status(db, "held")["trials"]["RUNNING"] == 2
    assert httpx.post(f"{svc2.url}/api/experiments/held/resume").status_code == 401
    r = httpx.post(f"{svc2.url}/api/experiments/held/resume", headers=auth)
    assert r.status_code == 200 and r.json()["status"] == "QUEUED", r.text
    assert httpx.post(f"{svc2.url}/api/experiments/held/resume", headers=auth).status_code in (200, 409)
    hold.unlink()
    wait_for_states(db, ["held"], {"COMPLETED"})
    check_results(db, "held", Path(str(runs).replace("{experiment}", "held")), 4)


def test_non_loopback_bind_needs_a_token(tmp_path: Path) -> None:
    err = one_line_error(run_cli("serve", "--db", f"sqlite:///{tmp_path / 's.db'}", "--host", "0.0.0.0",
                                 "--port", str(free_port()), cwd=tmp_path))
    assert "--token" in err and not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("db_kind", ["sqlite", "postgresql"])
def test_kill_nine_the_service_ten_times(tmp_path: Path, db_kind: str, request: pytest.FixtureRequest,
                                         services: list[Service]) -> None:
    """3 experiments; the service is SIGKILLed 10 times at random instants and restarted:
    every experiment ends at exactly its budget, each trial ran once, nothing was lost."""
    db = f"sqlite:///{tmp_path / 's.db'}" if db_kind == "sqlite" else request.getfixturevalue("db_url_pg")
    runs = tmp_path / "runs-{experiment}.log"
    env = {"NASCTL_TEST_RUNS": str(runs), "NASCTL_TEST_SLEEP": "0.5"}
    names = ["alpha", "beta", "gamma"]
    budgets = {"alpha": 6, "beta": 5, "gamma": 5}
    methods = {"alpha": "auto", "beta": "sobol", "gamma": "sobol"}  # alpha's model-based proposals can be cut
    rng = random.Random(20261125)
    svc = Service(db, tmp_path, env, "--max-experiments", "3")
    services.append(svc)
    svc.start()
    for n in names:
        spec = write_spec(tmp_path, n, max_trials=budgets[n], parallelism=2, method=methods[n], initial=3)
        assert svc.submit(spec).returncode == 0
    kills = 0
    while kills < 10:
        time.sleep(rng.uniform(0.3, 3.0))
        if all(recorded_states(db).get(n) == "COMPLETED" for n in names):
            break
        svc.kill()
        kills += 1
        svc.start()
    wait_for_states(db, names, {"COMPLETED"}, timeout=600)
    assert kills >= 5, f"only {kills} kills before everything completed"
    time.sleep(0.5)
    for n in names:
        check_results(db, n, Path(str(runs).replace("{experiment}", n)), budgets[n])
    svc.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    svc.proc.communicate(timeout=60)  # type: ignore[union-attr]
    strays = [p for p in psutil.process_iter() if _mine(p, tmp_path)]
    assert strays == []


def _mine(p: psutil.Process, tmp_path: Path) -> bool:
    try:
        return str(tmp_path) in p.environ().get("NASCTL_LOG_DIR", "") and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
