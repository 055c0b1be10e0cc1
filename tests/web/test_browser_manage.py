"""Managing experiments in real headless Chromium against a real `nasctl web`: notes
(markdown rendered safely), rename, delete, diagnostics computed in the background,
folded constant curves, toolbars clear of titles, dates as dates."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from nasctl.store import Store
from nasctl.types import ExperimentStatus, Observation, TrialStatus
from tests.helpers.browser import overlap
from tests.helpers.synthetic import add_synthetic
from tests.web.conftest import TOKEN, Server

pytestmark = pytest.mark.browser

XSS_NOTE = """## Findings

**lr** above 3e-3 *diverges*; see `trial 4` and [the paper](https://example.org/p).

- <img src=x onerror="window.__xss=1">
- [click me](javascript:window.__xss=2)
- <script>window.__xss=3</script>

```
<b>code stays text</b>
```"""


def _stopped(server: Server, name: str, n: int = 10) -> Store:
    store = Store(server.url)
    exp = add_synthetic(store, name, n)
    store.set_experiment_status(exp.id, ExperimentStatus.STOPPED, "by the test")
    return store


def _with_token(page: Any) -> None:
    page.wait_for_selector("#token-input")
    page.fill("#token-input", TOKEN)
    page.dispatch_event("#token-input", "change")


def _write_note(page: Any, text: str) -> None:
    page.wait_for_selector("#note[data-ready='1'] button.note-edit")
    page.click("#note button.note-edit")
    page.fill("#note textarea", text)
    page.click("#note button.note-save")
    page.wait_for_selector("#note .markdown")


def test_experiment_note_renders_markdown_and_never_markup(page: Any, server: Server, screenshots: Path) -> None:
    _stopped(server, "noted")
    page.goto(f"{server.base}/experiments/noted")
    page.wait_for_selector("body[data-ready='1']")
    _with_token(page)
    assert "No note yet" in page.inner_text("#note")
    _write_note(page, XSS_NOTE)
    note = page.locator("#note .markdown")
    assert note.locator("h4").inner_text() == "Findings"
    assert note.locator("strong").first.inner_text() == "lr" and note.locator("em").first.inner_text() == "diverges"
    assert note.locator("a[href='https://example.org/p']").inner_text() == "the paper"
    assert note.locator("li").count() == 3
    # markup in a note is text: no element, no handler, no javascript: link
    assert note.locator("img, script, b").count() == 0
    assert note.locator("a[href^='javascript']").count() == 0
    assert '<img src=x onerror="window.__xss=1">' in note.inner_text()
    assert "<b>code stays text</b>" in note.locator("pre code").inner_text()
    assert page.evaluate("window.__xss") is None
    page.locator("#notes-panel").screenshot(path=str(screenshots / "web-notes.png"))
    # stored: a fresh read-only visit shows it too, with its date as a date
    assert httpx.get(f"{server.base}/api/experiments/noted").json()["note"]["text"] == XSS_NOTE
    page.goto(f"{server.base}/experiments/noted")
    page.wait_for_selector("#note[data-ready='1'] .markdown")
    assert re.search(r"edited \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page.inner_text("#note"))
    assert page.evaluate("window.__xss") is None
    assert not page.errors


def test_trial_note_is_shown_and_edited_on_the_trial_page(page: Any, server: Server) -> None:
    _stopped(server, "trialnote", 5)
    page.goto(f"{server.base}/experiments/trialnote/trials/2")
    page.wait_for_selector("body[data-ready='1']")
    _with_token(page)
    _write_note(page, "the **kept** one")
    assert page.locator("#note .markdown strong").inner_text() == "kept"
    r = httpx.get(f"{server.base}/api/experiments/trialnote/trials/2").json()
    assert r["note"]["text"] == "the **kept** one"
    assert httpx.get(f"{server.base}/api/experiments/trialnote/note").json()["text"] is None
    assert not page.errors


def test_without_a_token_no_write_controls_are_offered(page: Any, server: Server) -> None:
    _stopped(server, "readers", 3)
    page.goto(f"{server.base}/experiments/readers")
    page.wait_for_selector("#note[data-ready='1']")
    page.fill("#token-input", "wrong")
    page.dispatch_event("#token-input", "change")
    page.click("#note button.note-edit")
    page.fill("#note textarea", "nope")
    page.click("#note button.note-save")
    page.wait_for_function("document.querySelector('#note .error') !== null")
    assert "missing or wrong token" in page.inner_text("#note")
    assert httpx.get(f"{server.base}/api/experiments/readers/note").json()["text"] is None


def test_rename_from_the_page(page: Any, server: Server, screenshots: Path) -> None:
    _stopped(server, "to-rename")
    page.goto(f"{server.base}/experiments/to-rename")
    page.wait_for_selector("body[data-ready='1']")
    _with_token(page)
    page.wait_for_selector("#manage-panel:not([hidden]) #rename")
    page.locator("#manage-panel").screenshot(path=str(screenshots / "web-manage.png"))
    page.fill("#rename-to", "renamed-here")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.accept()))
    page.click("#rename")
    page.wait_for_url(re.compile(r"/experiments/renamed-here$"), timeout=15_000)
    page.wait_for_selector("body[data-ready='1']")
    assert dialogs == ["Rename experiment to-rename to renamed-here? Its files stay where they are."]
    assert page.inner_text("#title").startswith("renamed-here")
    assert httpx.get(f"{server.base}/api/experiments/to-rename").status_code == 404
    assert not page.errors


def test_delete_from_the_page_needs_confirmation(page: Any, server: Server, tmp_path: Path) -> None:
    _stopped(server, "to-delete")
    page.goto(f"{server.base}/experiments/to-delete")
    page.wait_for_selector("body[data-ready='1']")
    _with_token(page)
    page.wait_for_selector("#manage-panel:not([hidden]) #delete")
    answers = iter([False, True, True])
    page.on("dialog", lambda d: d.accept() if next(answers) else d.dismiss())
    page.click("#delete")  # dismissed: nothing happens
    assert httpx.get(f"{server.base}/api/experiments/to-delete").status_code == 200
    page.check("#delete-files")
    page.click("#delete")
    page.wait_for_url(re.compile(r"/\?deleted=to-delete"), timeout=15_000)
    page.wait_for_selector("#deleted-note")
    # its work directory (/nonexistent/...) was not there: the page says the files were kept and why
    assert "Deleted experiment to-delete" in page.inner_text("#deleted-note")
    assert "does not exist" in page.inner_text("#deleted-note")
    assert httpx.get(f"{server.base}/api/experiments/to-delete").status_code == 404
    page.wait_for_selector("#experiments tbody tr")
    assert "to-delete" not in page.inner_text("#experiments")
    # with a folder that is there, the page says it went too
    folder = tmp_path / "with-files"
    (folder / "trial_0000").mkdir(parents=True)
    store = Store(server.url)
    store.set_experiment_status(add_synthetic(store, "with-files", 2, work_dir=str(folder)).id,
                                ExperimentStatus.STOPPED, "by the test")
    page.goto(f"{server.base}/experiments/with-files")
    page.wait_for_selector("#manage-panel:not([hidden]) #delete")
    page.check("#delete-files")
    page.click("#delete")
    page.wait_for_selector("#deleted-note")
    assert page.inner_text("#deleted-note") == f"Deleted experiment with-files and its folder {folder}."
    assert not folder.exists()
    assert not page.errors


def test_a_running_experiment_is_not_deleted(page: Any, server: Server) -> None:
    store = Store(server.url)
    add_synthetic(store, "still-running", 3, finish=False)
    page.goto(f"{server.base}/experiments/still-running")
    page.wait_for_selector("body[data-ready='1']")
    _with_token(page)
    page.wait_for_selector("#manage-panel:not([hidden]) #delete")
    page.on("dialog", lambda d: d.accept())
    page.click("#delete")
    page.wait_for_function("document.getElementById('manage-message').textContent.includes('stop it first')")
    assert httpx.get(f"{server.base}/api/experiments/still-running").status_code == 200


def test_diagnostics_page_shows_it_is_computing_then_the_result(page: Any, server: Server) -> None:
    _stopped(server, "diag-fresh", 12)
    page.goto(f"{server.base}/experiments/diag-fresh/diagnostics")
    page.wait_for_selector("body[data-computing='1']", timeout=15_000)  # the first answer: computing
    # while it computes, the page says what the server is doing and for how long (issue 41: ~20 s, nothing shown)
    computing = page.inner_text("#message").strip()
    assert re.match(r"Computing the diagnostics \(\d+ s\): (reading the trials|loading Ax|fitting|cross-validating)", computing), computing
    assert page.locator("#message progress").count() == 1
    page.wait_for_selector("body[data-ready='1']", timeout=180_000)
    assert page.locator("#diag > div").count() == 3
    assert "fitted on" in page.inner_text("#message")
    assert not page.errors


def test_curves_objectives_first_constant_series_folded(page: Any, server: Server, screenshots: Path) -> None:
    store = _stopped(server, "curvy", 3)
    exp = store.get_experiment("curvy")
    t = store.add_trial(exp.id, 3, {"x": 0.4, "act": "relu"}, "Sobol", "curvy-3", "")
    t = store.mark_trial_running(t.id, "local_cwd://synthetic/curvy-3", "local_cwd", {"submitted": 1764089000.5})
    obs = []
    for s in range(1, 5):
        obs += [Observation("a_loss", s, 1 / s), Observation("size", s, 100 - s), Observation("acc", s, s / 5),
                Observation("epochs_total", s, 4.0), Observation("lr_const", s, 0.001)]
    store.add_observations(t.id, obs)
    store.finish_trial(t.id, TrialStatus.COMPLETED, {"acc": 0.8, "size": 96.0, "lat": 1.0})
    page.goto(f"{server.base}/experiments/curvy/trials/3")
    page.wait_for_selector("body[data-ready='1']")
    shown = page.eval_on_selector_all("#curves > div", "ds => ds.map(d => d.dataset.metric)")
    assert shown == ["acc", "size", "a_loss"]  # the objectives in spec order, then the rest
    folded = page.locator("#constant-curves")
    assert folded.get_attribute("open") is None
    assert "2 constant series: epochs_total = 4, lr_const = 0.001" in folded.locator("summary").inner_text()
    folded.locator("summary").click()
    page.wait_for_function("document.querySelectorAll('#constant-curves .main-svg').length > 0")
    assert page.locator("#constant-curves [data-metric]").count() == 2
    # the toolbar does not cover a plot's title
    first = page.locator("#curves > div").first
    first.hover()
    title, bar = first.locator(".gtitle").bounding_box(), first.locator(".modebar").bounding_box()
    assert title and bar and not overlap(title, bar)
    # dates are dates: the job's submission time (epoch seconds) and the trial's timestamps
    job = page.inner_text("#job")
    assert "2025-11-25 16:43:20 UTC" in job and "1764089000" not in job and "1.764" not in job
    assert re.search(r"created\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", job)
    page.screenshot(path=str(screenshots / "web-trial-curves.png"), full_page=True)
    assert not page.errors


def test_report_keeps_the_diagnostics_caption_out_of_its_header(page: Any, server: Server, tmp_path: Path) -> None:
    from nasctl.store import manage as store_manage
    from nasctl.web.report import build_report

    store = _stopped(server, "reported", 12)
    store_manage.set_note(store, store.get_experiment("reported").id, "shipped **trial 4**")
    out = tmp_path / "report.html"
    out.write_text(build_report(store, "reported"))
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    page.wait_for_function("document.querySelectorAll('#diag > div').length === 3")
    assert "fitted on" in page.inner_text("#diag-caption")
    assert page.inner_text("#message").strip() == ""  # the line under the title stays the report's own
    page.wait_for_selector("#note .markdown strong")
    assert page.inner_text("#note .markdown strong") == "trial 4"
    assert page.locator("#note button").count() == 0 and page.locator("#manage-panel").is_hidden()
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page.inner_text("#events"))
    assert not page.errors
