"""Active and standby services on a real database, in one process (no loops started):
each decision of the role and of the takeover, with a case where the answer must be
yes and one where it must be no. The other service is a lease row written here, its
owner on this host (dead or alive) or on another host (`host-a`), its heartbeat as old
as the case needs. tests/e2e/test_standby.py runs the same with real processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from nasctl.errors import LeaseError
from nasctl.leases import LEASE_STALE_SECONDS, SERVICE_STALE_SECONDS, owner_alive, utcnow
from nasctl.server import Supervisor, create_service_app
from nasctl.server.supervisor import ACTIVE, STANDBY
from nasctl.store import Store
from nasctl.types import ExperimentRecord, ExperimentStatus
from tests.helpers.leases import dead_owner

OTHER = "host-a:4242:1000.000"
OTHER_URL = "http://host-a:8080/"


def set_service_lease(store: Store, owner: str | None, age: float = 0.0, url: str | None = OTHER_URL) -> None:
    """The service lease as another service left it: `owner` beat `age` seconds ago (None: no lease)."""
    with store.engine.begin() as c:
        c.execute(text("DELETE FROM service_leases"))
        if owner is not None:
            c.execute(text("INSERT INTO service_leases (name, owner, heartbeat, url) VALUES ('service', :o, :t, :u)"),
                      {"o": owner, "t": utcnow() - timedelta(seconds=age), "u": url})


def set_experiment_lease(store: Store, exp: ExperimentRecord, owner: str | None, age: float) -> None:
    with store.engine.begin() as c:
        c.execute(text("UPDATE experiments SET lease_owner = :o, lease_heartbeat = :t WHERE id = :i"),
                  {"o": owner, "t": utcnow() - timedelta(seconds=age) if owner else None, "i": exp.id})


@pytest.fixture
def supervisor(db_url: str, tmp_path: Path) -> Iterator[Supervisor]:
    """A supervisor whose thread never ticks by itself (the tests call `tick_once`)."""
    sup = Supervisor(db_url, str(tmp_path / "runs"), tick=3600)
    yield sup
    sup.close(join_seconds=1)
    sup.store.close()


@pytest.fixture
def live_owner() -> Iterator[str]:
    """The owner text of a process of this host that runs (a sleeping child)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    import socket

    yield f"{socket.gethostname()}:{proc.pid}:{psutil.Process(proc.pid).create_time():.3f}"
    proc.kill()
    proc.wait()


# --- the service lease: who is active ---------------------------------------------------------
def test_standby_while_an_active_elsewhere_beats(supervisor: Supervisor) -> None:
    set_service_lease(supervisor.store, OTHER, age=SERVICE_STALE_SECONDS - 2)
    supervisor.start()
    assert supervisor.role == STANDBY
    supervisor.tick_once()
    assert supervisor.role == STANDBY and supervisor.store.service_lease().owner == OTHER  # type: ignore[union-attr]
    assert supervisor.active_lease is not None and supervisor.active_lease.url == OTHER_URL


def test_standby_while_a_live_active_of_this_host_beats(supervisor: Supervisor, live_owner: str) -> None:
    set_service_lease(supervisor.store, live_owner)
    supervisor.start()
    supervisor.tick_once()
    assert supervisor.role == STANDBY and supervisor.store.service_lease().owner == live_owner  # type: ignore[union-attr]


def test_active_at_once_when_the_active_of_this_host_died(supervisor: Supervisor) -> None:
    gone = dead_owner()
    set_service_lease(supervisor.store, gone)  # a fresh heartbeat: only its pid says it is gone
    supervisor.start()
    assert supervisor.role == ACTIVE and supervisor.replaced == {gone}
    assert supervisor.store.service_lease().owner == supervisor.owner  # type: ignore[union-attr]


def test_active_once_the_heartbeat_elsewhere_is_stale(supervisor: Supervisor) -> None:
    set_service_lease(supervisor.store, OTHER, age=SERVICE_STALE_SECONDS - 2)
    supervisor.start()
    assert supervisor.role == STANDBY
    set_service_lease(supervisor.store, OTHER, age=SERVICE_STALE_SECONDS + 0.5)
    supervisor.tick_once()
    assert supervisor.role == ACTIVE and supervisor.replaced == {OTHER}
    lease = supervisor.store.service_lease()
    assert lease is not None and lease.owner == supervisor.owner and lease.url == supervisor.url


def test_active_at_the_next_tick_after_the_active_released_the_lease(supervisor: Supervisor) -> None:
    set_service_lease(supervisor.store, OTHER)
    supervisor.start()
    assert supervisor.role == STANDBY
    set_service_lease(supervisor.store, None)  # SIGTERM: released
    supervisor.tick_once()
    assert supervisor.role == ACTIVE
    assert supervisor.replaced == {OTHER}  # its loops' leases, if any were left, go stale with it


def test_an_active_that_lost_its_lease_waits_as_standby_and_can_take_it_again(supervisor: Supervisor) -> None:
    supervisor.start()
    assert supervisor.role == ACTIVE
    supervisor.tick_once()
    assert supervisor.role == ACTIVE  # its own heartbeat renews it
    set_service_lease(supervisor.store, OTHER)  # taken while this one stalled
    supervisor.tick_once()
    assert supervisor.role == STANDBY and supervisor.healthy
    assert supervisor.active_lease is not None and supervisor.active_lease.owner == OTHER
    set_service_lease(supervisor.store, OTHER, age=SERVICE_STALE_SECONDS + 1)
    supervisor.tick_once()
    assert supervisor.role == ACTIVE


def test_store_says_whose_stale_lease_it_took(db_url: str) -> None:
    store = Store(db_url, create=True)
    assert store.acquire_service_lease("b:1:0", None, SERVICE_STALE_SECONDS, owner_alive) is None  # free
    assert store.acquire_service_lease("b:1:0", None, SERVICE_STALE_SECONDS, owner_alive) is None  # its own
    set_service_lease(store, OTHER, age=SERVICE_STALE_SECONDS + 1)
    assert store.acquire_service_lease("b:1:0", "u", SERVICE_STALE_SECONDS, owner_alive) == OTHER
    set_service_lease(store, OTHER, age=1)
    with pytest.raises(LeaseError, match="host-a"):
        store.acquire_service_lease("b:1:0", None, SERVICE_STALE_SECONDS, owner_alive)
    store.close()


def test_restore_running_only_from_stopped(db_url: str) -> None:
    store = Store(db_url, create=True)
    exp = store.create_experiment("e", {"name": "e"}, "/tmp/e")
    store.set_experiment_status(exp.id, ExperimentStatus.STOPPED, "handed over")
    assert store.restore_running(exp.id, "handed over")
    assert store.get_experiment("e").status == ExperimentStatus.RUNNING
    store.set_experiment_status(exp.id, ExperimentStatus.COMPLETED)
    assert not store.restore_running(exp.id, "handed over")
    assert store.get_experiment("e").status == ExperimentStatus.COMPLETED
    store.close()


# --- the experiments: which may the new active take over? ---------------------------------
def test_which_experiments_a_new_active_takes_over(supervisor: Supervisor, monkeypatch: pytest.MonkeyPatch,
                                                   live_owner: str) -> None:
    store = supervisor.store
    cases = {  # name: (lease owner, heartbeat age, taken over?)
        "replaced-silent": (OTHER, SERVICE_STALE_SECONDS + 1, True),  # the dead service's loop
        "replaced-beating": (OTHER, SERVICE_STALE_SECONDS - 5, False),  # its loop still beats
        "other-silent-15s": ("host-b:7:0", SERVICE_STALE_SECONDS + 1, False),  # a `nasctl run` elsewhere
        "other-silent-30s": ("host-b:7:0", LEASE_STALE_SECONDS + 1, True),
        "dead-here": (dead_owner(), 0.0, True),
        "alive-here": (live_owner, 0.0, False),
        "handed-back": (None, 0.0, True),  # RUNNING without an orchestrator
    }
    for name, (owner, age, _) in cases.items():
        exp = store.create_experiment(name, {"name": name}, f"/tmp/{name}")
        store.set_experiment_status(exp.id, ExperimentStatus.RUNNING)
        set_experiment_lease(store, exp, owner, age)
    set_service_lease(store, OTHER, age=SERVICE_STALE_SECONDS + 1)
    started: list[str] = []
    monkeypatch.setattr(supervisor, "_start", lambda exp, note: started.append(exp.name))
    supervisor.start()
    assert supervisor.role == ACTIVE
    assert sorted(started) == sorted(n for n, (_, _, taken) in cases.items() if taken)
    for name, (owner, _, taken) in cases.items():
        assert store.get_experiment(name).lease_owner == (supervisor.owner if taken else owner), name


def test_a_standby_takes_over_no_experiment(supervisor: Supervisor, monkeypatch: pytest.MonkeyPatch) -> None:
    store = supervisor.store
    exp = store.create_experiment("orphan", {"name": "orphan"}, "/tmp/orphan")
    store.set_experiment_status(exp.id, ExperimentStatus.RUNNING)  # no orchestrator at all
    set_service_lease(store, OTHER)
    started: list[str] = []
    monkeypatch.setattr(supervisor, "_start", lambda exp, note: started.append(exp.name))
    supervisor.start()
    supervisor.tick_once()
    assert supervisor.role == STANDBY and started == []  # the active service's to take


# --- what a standby's API answers -----------------------------------------------------------
WRITES = [
    ("post", "/api/experiments", {"json": {"spec": "name: x"}}),
    ("post", "/api/experiments/e/resume", {}),
    ("post", "/api/experiments/e/stop", {}),
    ("post", "/api/experiments/e/trials/0/cancel", {}),
    ("put", "/api/experiments/e/note", {"json": {"text": "hi"}}),
    ("put", "/api/experiments/e/trials/0/note", {"json": {"text": "hi"}}),
    ("post", "/api/experiments/e/rename", {"json": {"name": "f"}}),
    ("delete", "/api/experiments/e", {}),
]


def test_a_standby_refuses_every_write_naming_the_active(supervisor: Supervisor) -> None:
    store = supervisor.store
    store.create_experiment("e", {"name": "e"}, "/tmp/e")
    set_service_lease(store, OTHER)
    supervisor.start()
    client = TestClient(create_service_app(supervisor, token="t"))
    auth = {"Authorization": "Bearer t"}
    for method, path, kw in WRITES:
        r = getattr(client, method)(path, headers=auth, **kw)
        assert r.status_code == 503 and OTHER_URL in r.json()["error"] and "pid 4242 on host-a" in r.json()["error"], \
            (method, path, r.text)
    assert client.get("/api/experiments/e/note").status_code == 200  # reads are served
    health = client.get("/healthz")
    assert health.status_code == 200 and health.json()["role"] == "standby" and health.json()["active"] == OTHER_URL
    assert "nasctl_service_active 0" in client.get("/metrics").text
    assert client.get("/api/service").json()["active_service"]["url"] == OTHER_URL
    assert store.get_experiment("e").lease_owner is None  # nothing written


def test_the_active_accepts_writes(supervisor: Supervisor) -> None:
    store = supervisor.store
    exp = store.create_experiment("e", {"name": "e"}, "/tmp/e")
    store.set_experiment_status(exp.id, ExperimentStatus.STOPPED, "nothing to drive")
    supervisor.start()
    client = TestClient(create_service_app(supervisor, token="t"))
    auth = {"Authorization": "Bearer t"}
    r = client.put("/api/experiments/e/note", headers=auth, json={"text": "hi"})
    assert r.status_code == 200, r.text
    assert client.post("/api/experiments/e/rename", headers=auth, json={"name": "f"}).status_code == 200
    health = client.get("/healthz").json()
    assert health["role"] == "active" and health["active"] == supervisor.url
    assert "nasctl_service_active 1" in client.get("/metrics").text


def test_the_url_in_the_lease_names_this_machine_for_a_wildcard_bind() -> None:
    import socket

    from nasctl.cli.cmd_serve import service_url

    assert service_url("0.0.0.0", 8080) == f"http://{socket.gethostname()}:8080/"
    assert service_url("::", 8080) == f"http://{socket.gethostname()}:8080/"
    assert service_url("127.0.0.1", 8081) == "http://127.0.0.1:8081/"  # a bound address is kept
    assert service_url("::1", 8081) == "http://[::1]:8081/"
