"""Fixtures for the dashboard tests: a real small experiment (run by `nasctl run`),
a real `nasctl web` server, and Debian's headless Chromium driven by Playwright.
Experiments written through the Store's public methods: tests/helpers/synthetic.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import free_port
from tests.helpers.synthetic import TINY_SCRIPT, TINY_SPEC

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
TOKEN = "s3cret-token"


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


@dataclass(frozen=True)
class RealExperiment:
    url: str
    name: str
    work_root: Path


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> RealExperiment:
    """A real 10-trial experiment (one trial fails) run by `nasctl run`."""
    d = tmp_path_factory.mktemp("tiny")
    spec = d / "tiny.yaml"
    spec.write_text(TINY_SPEC.format(script=TINY_SCRIPT))
    url = f"sqlite:///{d / 'nasctl.db'}"
    proc = subprocess.run(
        [sys.executable, "-m", "nasctl", "run", str(spec), "--db", url, "--workdir", str(d / "runs")],
        cwd=d, env=env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return RealExperiment(url, "tiny", d / "runs")


@dataclass(frozen=True)
class Server:
    base: str
    url: str  # the database


@pytest.fixture(scope="session")
def server(tiny: RealExperiment) -> Iterator[Server]:
    """`nasctl web` on the tiny experiment's database, with a token, on a free loopback port."""
    port = free_port()
    e = env()
    e["NASCTL_WEB_TOKEN"] = TOKEN
    proc = subprocess.Popen(
        [sys.executable, "-m", "nasctl", "web", "--db", tiny.url, "--port", str(port)],
        env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                if httpx.get(base + "/api/info", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.stdout.read() if proc.stdout else ""
                pytest.fail(f"nasctl web did not start: {out}")
            time.sleep(0.2)
        yield Server(base, tiny.url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder for screenshots: $NASCTL_WEB_SCREENSHOTS, else a session temp folder (printed at the end)."""
    target = os.environ.get("NASCTL_WEB_SCREENSHOTS")
    d = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    d.mkdir(parents=True, exist_ok=True)
    _SCREENSHOT_DIRS.append(d)
    return d


_SCREENSHOT_DIRS: list[Path] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for d in _SCREENSHOT_DIRS:
        terminalreporter.write_line(f"dashboard screenshots: {d}")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, driven by Playwright (never a downloaded browser)."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (the CI script does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    try:
        yield pg
    finally:
        ctx.close()
