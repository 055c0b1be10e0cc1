"""Shared fixtures: real databases (SQLite file, the machine's PostgreSQL and MariaDB)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The test processes run as an orchestrator process does (before torch is
# imported): one intra-op thread, and BoTorch's fused kernel in the
# installation's TORCH_EXTENSIONS_DIR, so the optimizers built inside the tests
# and those of the orchestrators they start load one kernel, built once. On a
# busy 2-core machine a second torch thread per pytest worker only competes
# with the other worker and with the trial processes.
from nasctl.orchestration.control import prepare_orchestrator_process  # noqa: E402

prepare_orchestrator_process()
PG_ADMIN = os.environ.get("NASCTL_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
MYSQL_ADMIN = os.environ.get("NASCTL_TEST_MYSQL", "mysql+pymysql://root@127.0.0.1:3306/test")


def _server_db(admin_url: str, kind: str) -> Iterator[str]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"nasctl_t_{uuid.uuid4().hex[:10]}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as c:
            c.execute(text(f"CREATE DATABASE {name}"))
    except Exception as e:  # the server is part of the test environment: fail loudly
        pytest.fail(f"{kind} at {admin_url} is not usable: {e}")
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        engine.dispose()  # the server may have restarted meanwhile: use fresh connections
        with engine.connect() as c:
            if kind == "postgresql":
                c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            else:
                c.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of each kind nasctl supports."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'nasctl.db'}"
    elif request.param == "postgresql":
        yield from _server_db(PG_ADMIN, "postgresql")
    else:
        yield from _server_db(MYSQL_ADMIN, "mysql")


@pytest.fixture
def db_url_pg() -> Iterator[str]:
    """A fresh, empty database on the machine's PostgreSQL."""
    yield from _server_db(PG_ADMIN, "postgresql")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'nasctl.db'}"


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the real `nasctl` entry point in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("NASCTL_DB", None) if env is None or "NASCTL_DB" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "nasctl", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Parallel runs (`make test`, scripts/test-suite.sh: two pytest-xdist workers).
# Every test of the local Slurm cluster is marked `cluster`: its two nodes hold a
# few jobs at a time and some tests stop its daemons, so they run in one process
# of their own, in file order, beside the rest (no other test touches the
# cluster). Tests that restart PostgreSQL are marked `serial` in their files and
# run alone after the rest. (pytest-xdist's `--dist loadgroup` cannot keep a group
# in one worker under pytest 9: it renames node ids through an attribute pytest 9
# no longer reads.)
_CLUSTER = ("tests/e2e/test_slurm", "tests/unit/test_runner_contract.py")


def pytest_configure(config: pytest.Config) -> None:
    """The controlling process (not the xdist workers) starts the fused kernel's
    build in its detached builder at once, so the first multi-objective
    proposal of the session waits less (a no-op once it is built)."""
    if not hasattr(config, "workerinput"):
        from nasctl.optimizer.fused_kernel import prebuild_extension

        prebuild_extension()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from nasctl.optimizer.methods import saasbo_available

    no_saasbo = pytest.mark.skip(reason="needs the saasbo extra importable: PYTHONPATH=.venv/saasbo "
                                        "(scripts/test-suite.sh runs the tests marked saasbo so)")
    for item in items:
        if item.path.relative_to(ROOT).as_posix().startswith(_CLUSTER):
            item.add_marker(pytest.mark.cluster)
        if item.get_closest_marker("saasbo") and not saasbo_available():
            item.add_marker(no_saasbo)
