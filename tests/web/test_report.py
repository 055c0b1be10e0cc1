"""`nasctl report`: one self-contained HTML file with the experiment page's plots."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nasctl.cli.cmd_web import is_loopback
from nasctl.store import Store
from nasctl.web.report import _script_json
from tests.helpers.synthetic import add_synthetic
from tests.web.conftest import RealExperiment, env


@pytest.mark.browser
def test_report_is_self_contained_and_renders_offline(
    tiny: RealExperiment, tmp_path: Path, page: Any, screenshots: Path
) -> None:
    out = tmp_path / "report.html"
    proc = subprocess.run(
        [sys.executable, "-m", "nasctl", "report", "tiny", "--db", tiny.url, "--out", str(out)],
        env=env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert not re.search(r"<script[^>]+src=", html)
    assert 'rel="stylesheet"' not in html
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    assert page.get_attribute("#pareto", "data-points") == "9"
    assert page.locator("#pareto .scatterlayer .point").count() == 9  # the reference point on demand, as on the page
    page.check("#pareto-ref")
    page.wait_for_function("document.querySelectorAll('#pareto .scatterlayer .point').length === 10")
    assert page.locator("#trials tbody tr").count() == 10
    assert page.locator("#diag > div").count() == 3
    assert page.locator("#hv .scatterlayer .trace").count() == 1
    # "the same plots" as the page: history, importance, slices, contours, EDF, offline
    page.wait_for_selector("body[data-analysis='1']", timeout=30_000)
    assert page.get_attribute("#history", "data-points") == "9"
    assert page.get_attribute("#importance", "data-parameters") == "3"
    assert page.locator("#slices > div").count() == 3
    assert page.get_attribute("#contour", "data-grid") == "24x24"
    page.select_option("#contour-y", "act")  # another pair: embedded too
    page.wait_for_function("document.getElementById('contour').dataset.grid === '24x2'")
    assert page.get_attribute("#edf", "data-points") == "9"
    assert [u for u in requests if not u.startswith("file:")] == []
    page.screenshot(path=str(screenshots / "report.png"), full_page=True)
    assert not page.errors


def test_report_without_diagnostics_and_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    add_synthetic(Store(url, create=True), "small", 2)
    out = tmp_path / "small.html"
    ok = subprocess.run([sys.executable, "-m", "nasctl", "report", "small", "--db", url, "--out", str(out),
                         "--no-diagnostics"], env=env(), capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert '"diagnostics":null' in out.read_text()
    missing = subprocess.run([sys.executable, "-m", "nasctl", "report", "nope", "--db", url],
                             env=env(), capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and missing.stderr.startswith("Error: no experiment named 'nope'")


def test_embedded_json_cannot_close_the_script() -> None:
    text = _script_json({"name": "</script><script>alert(1)</script>", "s": "\u2028"})
    assert "</" not in text and "<script" not in text and "\u2028" not in text


def test_web_binds_loopback_by_default() -> None:
    help_text = subprocess.run([sys.executable, "-m", "nasctl", "web", "--help"], env=env(),
                               capture_output=True, text=True, timeout=60).stdout
    assert "127.0.0.1" in help_text and "NASCTL_WEB_TOKEN" in help_text
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("example.com")
