"""Two real `nasctl serve` processes on one database: the second waits as a read-only
standby and takes over the service lease and every experiment when the active one
dies (kill -9), is stopped (SIGTERM) or stalls (SIGSTOP: it steps down when it
wakes). "Another host" is played on this machine with NASCTL_HOSTNAME: a standby
cannot check a process of another host, so only the heartbeat can free its lease.

After each takeover: every experiment COMPLETED with exactly its budget, each trial
ran once (the trial script appends its index to a per-experiment file), no
configuration proposed twice, nothing FAILED, no manual resume."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from nasctl.leases import SERVICE_STALE_SECONDS, utcnow
from nasctl.store import Store
from nasctl.types import ExperimentStatus, TrialStatus
from tests.helpers.resume import check_results, write_spec
from tests.helpers.service import TOKEN, Service

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_leftover_service_trials")]
TAKEOVER_LIMIT = 30.0
"""Seconds from the active service's death to the standby driving every experiment (the target)."""


def database(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return f"sqlite:///{tmp_path / 's.db'}" if kind == "sqlite" else str(request.getfixturevalue("db_url_pg"))


def health(svc: Service) -> dict[str, Any]:
    r = httpx.get(svc.url + "/healthz", timeout=5)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def until(what: Callable[[], Any], timeout: float, message: str | Callable[[], str]) -> Any:
    """Poll `what` until it is true; fail with `message` (called then, if callable) after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        assert time.monotonic() < deadline, message() if callable(message) else message
        time.sleep(0.2)


def experiments(db: str) -> dict[str, tuple[ExperimentStatus, str | None, dict[str, int]]]:
    """name -> (status, lease owner, trial counts), read from the store."""
    store = Store(db)
    try:
        return {e.name: (e.status, e.lease_owner, counts) for e, counts in store.list_experiments()}
    finally:
        store.close()


def owner_of(svc: Service) -> str:
    return str(httpx.get(svc.url + "/api/service", timeout=5).json()["owner"])


def pair(db: str, tmp_path: Path, env: dict[str, str], services: list[Service],
         hosts: tuple[str, str] | None = None) -> tuple[Service, Service]:
    """An active service and a standby on `db` (on two played hosts when `hosts` is given)."""
    made = []
    for k in range(2):
        host = {"NASCTL_HOSTNAME": hosts[k]} if hosts else {}
        svc = Service(db, tmp_path, {**env, **host}, "--max-experiments", "3")
        services.append(svc)
        svc.start()
        made.append(svc)
    active, standby = made
    assert health(active)["role"] == "active"
    h = health(standby)
    assert h["role"] == "standby" and h["active"] == active.url + "/", h
    return active, standby


def submit_all(svc: Service, tmp_path: Path, budgets: dict[str, int]) -> None:
    for name, n in budgets.items():
        out = svc.submit(write_spec(tmp_path, name, max_trials=n, parallelism=2, method="sobol", initial=n))
        assert out.returncode == 0, out.stderr


def mid_run(db: str, names: list[str]) -> bool:
    """Every experiment driven, with trials running and at least one completed somewhere."""
    exps = experiments(db)
    return (all(n in exps and exps[n][0] == ExperimentStatus.RUNNING and exps[n][2].get("RUNNING", 0) > 0
                for n in names)
            and sum(exps[n][2].get("COMPLETED", 0) for n in names) >= 1)


def driven_by(db: str, names: list[str], owner: str) -> bool:
    """Every experiment either COMPLETED or driven by `owner` (its loop holds the lease)."""
    exps = experiments(db)
    return all(exps[n][0] == ExperimentStatus.COMPLETED or (exps[n][0] == ExperimentStatus.RUNNING
                                                              and exps[n][1] == owner) for n in names)


def two_running_only(db: str, name: str) -> bool:
    """Two trials running and no other recorded: both slots busy, nothing proposed ahead."""
    exps = experiments(db)
    counts = exps[name][2] if name in exps else {}
    return counts.get("RUNNING", 0) == 2 == sum(counts.values())


def finish_and_check(db: str, tmp_path: Path, budgets: dict[str, int], timeout: float = 300) -> None:
    until(lambda: all(s == ExperimentStatus.COMPLETED for s, _, _ in experiments(db).values()), timeout,
          lambda: f"not all COMPLETED: {experiments(db)}")
    for name, n in budgets.items():
        trials = check_results(db, name, tmp_path / f"runs-{name}.log", n)
        assert all(t["status"] == TrialStatus.COMPLETED.value for t in trials)


def refuses_writes(standby: Service, active: Service, tmp_path: Path) -> None:
    """Writes to the standby are refused with the active service's URL; reads are served."""
    spec = write_spec(tmp_path, "refused", max_trials=2)
    out = standby.submit(spec)
    assert out.returncode == 1 and f"the active service of this database is {active.url}/" in out.stderr, out.stderr
    auth = {"Authorization": f"Bearer {TOKEN}"}
    r = httpx.post(f"{standby.url}/api/experiments/alpha/stop", headers=auth)
    assert r.status_code == 503 and active.url in r.json()["error"], r.text
    r = httpx.put(f"{standby.url}/api/experiments/alpha/note", headers=auth, json={"text": "x"})
    assert r.status_code == 503 and active.url in r.json()["error"], r.text
    assert httpx.get(f"{standby.url}/api/experiments/alpha").status_code == 200
    assert "nasctl_service_active 0" in httpx.get(standby.url + "/metrics").text
    assert "nasctl_service_active 1" in httpx.get(active.url + "/metrics").text


@pytest.mark.parametrize("db_kind", ["sqlite", "postgresql"])
def test_kill_nine_the_active_the_standby_takes_over(tmp_path: Path, db_kind: str, request: pytest.FixtureRequest,
                                                     services: list[Service]) -> None:
    """Same host: the standby sees the active's process gone and takes over at its next tick."""
    db = database(db_kind, tmp_path, request)
    env = {"NASCTL_TEST_RUNS": str(tmp_path / "runs-{experiment}.log"), "NASCTL_TEST_SLEEP": "1.0"}
    active, standby = pair(db, tmp_path, env, services)
    budgets = {"alpha": 6, "beta": 5, "gamma": 5}
    submit_all(active, tmp_path, budgets)
    refuses_writes(standby, active, tmp_path)
    until(lambda: mid_run(db, list(budgets)), 120, lambda: f"never mid-run: {experiments(db)}")
    killed = time.monotonic()
    active.kill()
    until(lambda: health(standby)["role"] == "active", TAKEOVER_LIMIT, "the standby did not take over")
    new = owner_of(standby)
    until(lambda: driven_by(db, list(budgets), new), TAKEOVER_LIMIT - (time.monotonic() - killed),
          lambda: f"not every experiment taken over within {TAKEOVER_LIMIT:.0f} s: {experiments(db)}")
    assert time.monotonic() - killed < 10  # same host: the dead pid is seen at once, not after a timeout
    assert health(standby)["active"] == standby.url + "/"
    finish_and_check(db, tmp_path, budgets)
    assert "nasctl_service_active 1" in httpx.get(standby.url + "/metrics").text
    standby.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    out, _ = standby.proc.communicate(timeout=60)  # type: ignore[union-attr]
    assert f"standby: the service of this database is {active.url}/" in out, out


def test_another_host_is_taken_over_only_once_its_heartbeat_is_stale(tmp_path: Path, db_url_pg: str,
                                                                    services: list[Service]) -> None:
    """Two played hosts on PostgreSQL: after a kill -9 the standby must wait while the
    dead active's heartbeat is fresh (it cannot check a process of another host), and
    must then take the lease and every experiment within 30 s of the death."""
    db = db_url_pg
    env = {"NASCTL_TEST_RUNS": str(tmp_path / "runs-{experiment}.log"), "NASCTL_TEST_SLEEP": "1.0"}
    active, standby = pair(db, tmp_path, env, services, hosts=("host-a", "host-b"))
    old = owner_of(active)
    assert old.startswith("host-a:") and owner_of(standby).startswith("host-b:")
    budgets = {"alpha": 6, "beta": 5, "gamma": 5}
    submit_all(active, tmp_path, budgets)
    until(lambda: mid_run(db, list(budgets)), 120, lambda: f"never mid-run: {experiments(db)}")
    active.kill()
    killed = time.monotonic()
    store = Store(db)
    lease = store.service_lease()
    store.close()
    assert lease is not None and lease.owner == old
    # until its heartbeat is SERVICE_STALE_SECONDS old, the lease is the dead active's (1 s margin)
    fresh_for = SERVICE_STALE_SECONDS - (utcnow() - lease.heartbeat) / timedelta(seconds=1) - 1.0
    assert fresh_for > 5, fresh_for  # the active beat within the last few seconds
    checks = 0
    while time.monotonic() - killed < fresh_for:
        assert health(standby)["role"] == "standby", "took the lease of a fresh heartbeat"
        exps = experiments(db)
        assert all(exps[n][1] in (old, None) for n in budgets if exps[n][0] == ExperimentStatus.RUNNING), exps
        checks += 1
        time.sleep(0.5)
    assert checks >= 5
    until(lambda: health(standby)["role"] == "active", TAKEOVER_LIMIT - (time.monotonic() - killed),
          "the standby did not take over once the heartbeat was stale")
    new = owner_of(standby)
    until(lambda: driven_by(db, list(budgets), new), TAKEOVER_LIMIT - (time.monotonic() - killed),
          lambda: f"not every experiment taken over within {TAKEOVER_LIMIT:.0f} s: {experiments(db)}")
    finish_and_check(db, tmp_path, budgets)


def test_sigterm_hands_over_at_once(tmp_path: Path, services: list[Service]) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    hold = tmp_path / "hold"
    hold.touch()
    env = {"NASCTL_TEST_RUNS": str(tmp_path / "runs-{experiment}.log"), "NASCTL_TEST_HOLD": str(hold)}
    active, standby = pair(db, tmp_path, env, services)
    budgets = {"held": 4}
    submit_all(active, tmp_path, budgets)
    until(lambda: experiments(db).get("held", (None, None, {}))[2].get("RUNNING", 0) == 2, 120, "never ran 2 trials")
    assert active.proc is not None
    t0 = time.monotonic()
    active.proc.send_signal(signal.SIGTERM)
    active.proc.communicate(timeout=60)
    assert active.proc.returncode == 0
    until(lambda: health(standby)["role"] == "active", 5, "no handover within 5 s of the active's exit")
    new = owner_of(standby)
    until(lambda: driven_by(db, list(budgets), new), 10, lambda: f"not taken over: {experiments(db)}")
    assert time.monotonic() - t0 < 15
    assert experiments(db)["held"][2]["RUNNING"] == 2  # re-attached, not relaunched
    hold.unlink()
    finish_and_check(db, tmp_path, budgets)


def test_a_stalled_active_steps_down_when_it_wakes(tmp_path: Path, db_url_pg: str, services: list[Service]) -> None:
    """SIGSTOP the active for longer than SERVICE_STALE_SECONDS (a frozen VM, a long
    pause): the standby takes over; when the old one wakes, its lease heartbeat
    answers False, and it stops its loops and waits as a standby instead of exiting."""
    db = db_url_pg
    hold = tmp_path / "hold"
    hold.touch()  # trials stay running, so the woken loops have nothing to launch before they notice
    env = {"NASCTL_TEST_RUNS": str(tmp_path / "runs-{experiment}.log"), "NASCTL_TEST_HOLD": str(hold)}
    active, standby = pair(db, tmp_path, env, services, hosts=("host-a", "host-b"))
    budgets = {"paused": 4}
    submit_all(active, tmp_path, budgets)
    # both slots busy: the loop proposes nothing more until one frees
    until(lambda: two_running_only(db, "paused"), 120, lambda: f"never 2 running: {experiments(db)}")
    assert active.proc is not None
    active.proc.send_signal(signal.SIGSTOP)
    stopped = time.monotonic()
    until(lambda: health(standby)["role"] == "active", TAKEOVER_LIMIT, "the standby did not take over")
    new = owner_of(standby)
    until(lambda: driven_by(db, list(budgets), new), TAKEOVER_LIMIT - (time.monotonic() - stopped),
          lambda: f"not taken over: {experiments(db)}")
    active.proc.send_signal(signal.SIGCONT)
    until(lambda: health(active)["role"] == "standby", 20, "the woken active did not step down")
    h = health(active)
    assert h["active"] == standby.url + "/" and h["driven"] == 0 and active.proc.poll() is None
    assert experiments(db)["paused"][:2] == (ExperimentStatus.RUNNING, new)
    hold.unlink()
    finish_and_check(db, tmp_path, budgets)
    r = httpx.post(f"{active.url}/api/experiments/paused/resume", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 503 and standby.url in r.json()["error"]
