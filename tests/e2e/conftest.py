"""Fixtures several end-to-end modules share: `nasctl serve` processes, and the trials they left behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.helpers.service import Service


@pytest.fixture
def services() -> Iterator[list[Service]]:
    """The services a test appends here are killed at its end."""
    made: list[Service] = []
    yield made
    for s in made:
        s.kill()


@pytest.fixture
def no_leftover_service_trials(tmp_path: Path) -> Iterator[None]:
    """Kill the trial processes of this test's services left behind (by NASCTL_LOG_DIR or
    NASCTL_TEST_RUNS under its tmp_path); a module asks for it with `usefixtures`."""
    yield
    for p in psutil.process_iter():
        try:
            if str(tmp_path) in p.environ().get("NASCTL_LOG_DIR", "") + p.environ().get("NASCTL_TEST_RUNS", ""):
                p.kill()
        except psutil.Error:
            continue
