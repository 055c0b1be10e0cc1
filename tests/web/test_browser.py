"""The dashboard in real headless Chromium, against a real `nasctl web` server."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from nasctl.store import Store, queries
from nasctl.types import Observation, TrialStatus
from tests.helpers.browser import expected_plotted
from tests.helpers.synthetic import add_synthetic
from tests.web.conftest import TOKEN, Server

pytestmark = pytest.mark.browser

EVIL = "<img src=x onerror=\"window.__xss=1\">"


def wait_ready(page: Any) -> None:
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)


def test_experiment_page_plots_every_trial_and_a_click_opens_it(page: Any, server: Server, screenshots: Path) -> None:
    page.goto(f"{server.base}/experiments/tiny")
    wait_ready(page)
    want = expected_plotted(server.base, "tiny", "val_acc", "num_params")
    assert want == 9  # the failed trial logged nothing
    assert page.get_attribute("#pareto", "data-points") == str(want)
    # SVG markers: the trials (the reference point is drawn on demand, see test_browser_analysis.py)
    assert page.locator("#pareto .scatterlayer .point").count() == want
    assert page.locator("#trials tbody tr").count() == 10
    assert "hypervolume" in page.inner_text("#summary").lower()
    page.screenshot(path=str(screenshots / "experiment.png"), full_page=True)

    front_trace, index = page.evaluate(
        """() => { const gd = document.getElementById('pareto');
                   const k = gd.data.findIndex(t => t.meta === 'front');
                   return [k, gd.data[k].customdata[0]]; }"""
    )
    point = page.locator("#pareto .scatterlayer .trace").nth(front_trace).locator(".point").first
    box = point.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_url(re.compile(rf"/experiments/tiny/trials/{index}$"), timeout=15_000)
    wait_ready(page)
    assert f"trial {index}" in page.inner_text("#title")
    assert page.locator("#curves > div").count() == 4
    page.wait_for_function("document.getElementById('log').textContent.includes('done')", timeout=10_000)
    assert "COMPLETED" in page.inner_text("#title")
    assert page.locator("#params tbody tr").count() == 3
    page.screenshot(path=str(screenshots / "trial.png"), full_page=True)
    assert not page.errors


def test_axes_can_be_any_two_metrics(page: Any, server: Server) -> None:
    page.goto(f"{server.base}/experiments/tiny")
    wait_ready(page)
    page.select_option("#pareto-x", "latency_ms")
    want = expected_plotted(server.base, "tiny", "latency_ms", "num_params")
    assert page.get_attribute("#pareto", "data-points") == str(want)
    # the reference point is drawn only when both axes are objectives
    assert page.locator("#pareto .scatterlayer .point").count() == want
    assert not page.errors


def test_table_sorting_and_paging_in_the_page(page: Any, server: Server) -> None:
    page.goto(f"{server.base}/experiments/tiny")
    wait_ready(page)
    page.select_option("#f-limit", "25")
    # A second click while the first click's page is still on its way: the answers
    # can arrive in either order, and the newest request must win. Hold the first
    # (ascending) answer until the second (descending) one has been drawn.
    held: list[Any] = []

    def ascending(url: str) -> bool:
        return "sort=values.val_acc" in url and "desc=true" not in url

    def hold(route: Any) -> None:
        held.append(route)

    page.route(ascending, hold)
    header = page.locator("#trials th[data-key='values.val_acc']")
    header.click()
    for _ in range(200):
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the ascending request was never made"
    header.click()
    api = httpx.get(f"{server.base}/api/experiments/tiny/trials", params={"sort": "values.val_acc", "desc": "true"}).json()
    first = str(api["trials"][0]["index"])
    first_row = "document.querySelector('#trials tbody tr')?.getAttribute('data-index')"
    page.wait_for_function(f"{first_row} === '{first}'", timeout=15_000)
    assert page.locator("#trials th.sorted.desc").count() == 1
    with page.expect_response(lambda r: ascending(r.url)):
        held[0].continue_()
    page.wait_for_timeout(1000)  # time for a stale answer to be drawn, if it would be
    assert page.evaluate(first_row) == first, "an older answer replaced the newer sort"
    page.unroute(ascending)
    page.fill("#f-where", "val_acc >= 0.7")
    page.click("#f-apply")
    want = httpx.get(f"{server.base}/api/experiments/tiny/trials", params={"where": "val_acc >= 0.7"}).json()["total"]
    page.wait_for_function(f"document.querySelectorAll('#trials tbody tr').length === {want}")
    assert not page.errors


def test_user_strings_are_shown_as_text(page: Any, server: Server, tmp_path: Path) -> None:
    store = Store(server.url)
    work = tmp_path / "evil"
    (work / "t").mkdir(parents=True)
    log = work / "t" / "stdout.log"
    log.write_text(f"hello {EVIL}\n")
    exp = add_synthetic(store, "evil", 8, choices=(EVIL, "plain"), work_dir=str(work))
    t = store.add_trial(exp.id, 8, {"x": 0.5, "act": EVIL}, "Sobol", "evil-8", "")
    store.mark_trial_running(t.id, "local_cwd://synthetic/evil-8", "local_cwd", {"stdout": str(log)})
    store.finish_trial(t.id, TrialStatus.FAILED, failure_reason=f"reason {EVIL}")
    page.goto(f"{server.base}/experiments/evil")
    wait_ready(page)
    assert EVIL in page.inner_text("#trials")
    page.goto(f"{server.base}/experiments/evil/trials/8")
    wait_ready(page)
    page.select_option("#log-stream", "stdout")
    page.wait_for_function("document.getElementById('log').textContent.includes('hello')")
    assert EVIL in page.inner_text("#log")
    assert f"reason {EVIL}" in page.inner_text("#summary")
    assert EVIL in page.inner_text("#params")
    assert page.evaluate("window.__xss") is None
    assert page.locator("img[src='x']").count() == 0
    assert not page.errors


def test_the_page_follows_a_running_experiment_without_reloading(page: Any, server: Server, screenshots: Path) -> None:
    store = Store(server.url)
    exp = add_synthetic(store, "growing", 6)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{server.base}/experiments/growing")
    wait_ready(page)
    before = int(page.get_attribute("#pareto", "data-points"))
    page.evaluate("window.__marker = 'same page'")
    # sizes inside the observed range keep the inferred reference point (and so every category) unchanged
    sizes = [t.values["size"] for t in store.list_trials(exp.id) if "size" in t.values]
    inside = (min(sizes) + max(sizes)) / 2
    for i in (6, 7):
        t = store.add_trial(exp.id, i, {"x": 0.3 + i / 100, "act": "relu"}, "MBM", f"growing-{i}", "")
        t = store.mark_trial_running(t.id, f"local_cwd://synthetic/growing-{i}", "local_cwd", {})
        store.add_observations(t.id, [Observation("acc", 1, 0.5)])
        store.finish_trial(t.id, TrialStatus.COMPLETED, {"acc": 0.997 + i / 10000, "size": inside - i / 100, "lat": 1.0})
    page.wait_for_function(
        f"document.getElementById('pareto').dataset.points === '{before + 2}'", timeout=20_000
    )
    assert page.evaluate("window.__marker") == "same page"
    page.wait_for_function("document.querySelectorAll('#trials tbody tr').length === 8", timeout=10_000)
    assert "trial 7 completed" in page.inner_text("#events")
    full_reads = [u for u in requests if u.endswith("/api/experiments/growing/points")]
    assert len(full_reads) == 1, "live updates must fetch changes, not every point again"
    assert any("/changes?since=" in u for u in requests)
    # the optimizer's announcement that it models an objective on the log scale reaches the summary
    store.add_event(exp.id, queries.LOG_SCALE, "optimizer: modelling size on the log scale", data={"metrics": ["size"]})
    page.wait_for_function(
        "document.getElementById('summary').textContent.includes('quasi-random first; on the log scale: size')",
        timeout=20_000,
    )
    page.screenshot(path=str(screenshots / "live.png"), full_page=True)
    assert not page.errors


def test_stop_button_stops_an_experiment_no_orchestrator_runs(page: Any, server: Server) -> None:
    """No orchestrator drives it (the lease is free): the stop acts at once, as `nasctl stop`
    does (a request would wait for a loop that never reads it). With a live orchestrator the
    button records a request: tests/web/test_browser_polish.py."""
    store = Store(server.url)
    exp = add_synthetic(store, "stoppable", 3, finish=False)
    page.goto(f"{server.base}/experiments/stoppable")
    wait_ready(page)
    page.fill("#token-input", TOKEN)
    page.dispatch_event("#token-input", "change")
    page.on("dialog", lambda d: d.accept())
    page.click("#stop")
    page.wait_for_function("document.getElementById('message').textContent.includes('no orchestrator was running')")
    from nasctl.store import requests
    from nasctl.types import ExperimentStatus

    assert requests.requests_after(store, exp.id) == []
    assert store.get_experiment("stoppable").status == ExperimentStatus.STOPPED
    assert not page.errors


def test_experiments_list_and_diagnostics_pages(page: Any, server: Server, screenshots: Path) -> None:
    page.goto(server.base + "/")
    page.wait_for_selector("#experiments tbody tr")
    assert "tiny" in page.inner_text("#experiments")
    page.screenshot(path=str(screenshots / "experiments.png"), full_page=True)
    page.goto(f"{server.base}/experiments/tiny/diagnostics")
    page.wait_for_selector("body[data-ready='1']", timeout=180_000)  # the model is fitted in the background
    assert page.locator("#diag > div").count() == 3  # val_acc, num_params, latency_ms
    assert "fitted on 9 completed trials" in page.inner_text("#message")
    page.screenshot(path=str(screenshots / "diagnostics.png"), full_page=True)
    assert not page.errors


def test_edge_cases_render_without_errors(page: Any, server: Server) -> None:
    from nasctl.spec import parse_spec, spec_to_dict

    store = Store(server.url)
    add_synthetic(store, "empty", 0)
    single = parse_spec("""
name: single
search_space: {x: {type: float, low: 0, high: 1}}
objectives: {acc: {goal: maximize}}
budget: {max_trials: 5}
trial: {script: train.py}
""")
    exp = store.create_experiment("single", spec_to_dict(single), "/nonexistent/single")
    for i in range(3):
        t = store.add_trial(exp.id, i, {"x": i / 3}, "Sobol", f"single-{i}", "")
        t = store.mark_trial_running(t.id, "h", "local_cwd", {})
        store.finish_trial(t.id, TrialStatus.FAILED if i == 0 else TrialStatus.COMPLETED, {"acc": i / 3})
    # a failed trial that logged its objective is drawn too (as failed); one objective: both axes show it
    assert expected_plotted(server.base, "single", "acc", "acc") == 3
    for name, points in (("empty", "0"), ("single", "3")):
        page.goto(f"{server.base}/experiments/{name}")
        wait_ready(page)
        assert page.get_attribute("#pareto", "data-points") == points
    page.goto(f"{server.base}/experiments/empty/diagnostics")
    page.wait_for_function("document.getElementById('message').className === 'error'")
    assert "cross-validation needs at least" in page.inner_text("#message")
    page.goto(f"{server.base}/experiments/nope")
    page.wait_for_function("document.getElementById('message').className === 'error'")
    assert "no experiment named 'nope'" in page.inner_text("#message")
    page.goto(f"{server.base}/experiments/single/trials/77")
    page.wait_for_function("document.getElementById('message').className === 'error'")
    assert not page.errors


def test_trial_info_is_a_key_value_table(page: Any, server: Server) -> None:
    store = Store(server.url)
    exp = add_synthetic(store, "withinfo", 2)
    t = store.add_trial(exp.id, 2, {"x": 0.5, "act": "relu"}, "Sobol", "withinfo-2", "")
    info = {"precision": "bf16", "device": "cpu", "latency": {"median_ms": 0.0421, "threads": 1},
            "argv": ["--x", "0.5"], "note": EVIL}
    store.finish_trial(t.id, TrialStatus.COMPLETED, {"val_acc": 0.5}, info=info)
    page.goto(f"{server.base}/experiments/withinfo/trials/2")
    wait_ready(page)
    assert page.locator("#info-panel").is_visible()
    rows = dict(
        (r.locator("td").nth(0).inner_text(), r.locator("td").nth(1).inner_text())
        for r in page.locator("#info tbody tr").all()
    )
    assert rows["precision"] == "bf16" and rows["latency.median_ms"] == "0.0421" and rows["latency.threads"] == "1"
    assert rows["argv"] == "--x 0.5" and rows["note"] == EVIL  # shown as text
    assert page.evaluate("window.__xss") is None and not page.errors
    page.goto(f"{server.base}/experiments/withinfo/trials/0")  # no info recorded: no panel
    wait_ready(page)
    assert not page.locator("#info-panel").is_visible()


def test_trial_devices_and_waiting_are_shown(page: Any, server: Server) -> None:
    store = Store(server.url)
    exp = add_synthetic(store, "ongpus", 1)
    placed = store.add_trial(exp.id, 1, {"x": 0.2, "act": "relu"}, "Sobol", "ongpus-1", "")
    store.mark_trial_running(placed.id, "local_cwd://torchx/ongpus-1", "local_cwd", {}, devices=["2", "3"])
    waiting = store.add_trial(exp.id, 2, {"x": 0.7, "act": "gelu"}, "Sobol", "ongpus-2", "")
    store.set_device_wait(waiting.id, datetime(2026, 1, 1))
    page.goto(f"{server.base}/experiments/ongpus/trials/1")
    wait_ready(page)
    rows = {r.locator("td").nth(0).inner_text(): r.locator("td").nth(1).inner_text()
            for r in page.locator("#job tbody tr").all()}
    assert rows["devices"] == "2,3"
    page.goto(f"{server.base}/experiments/ongpus/trials/2")
    wait_ready(page)
    rows = {r.locator("td").nth(0).inner_text(): r.locator("td").nth(1).inner_text()
            for r in page.locator("#job tbody tr").all()}
    assert rows["devices"] == "waiting for free devices"
    page.goto(f"{server.base}/experiments/ongpus")
    wait_ready(page)
    page.wait_for_selector("text=waiting for devices", timeout=15_000)
    assert not page.errors


def test_queued_trials_gpu_hours_and_restarts_are_shown(page: Any, server: Server) -> None:
    """A trial whose job waits in the scheduler's queue is QUEUED with the reason, the
    summary counts GPU-hours, and the timeline draws an attempt's waits and runs apart."""
    from nasctl.orchestration import attempts as A
    from nasctl.runners.base import JobState, JobStatus, SubmittedJob

    store = Store(server.url)
    exp = add_synthetic(store, "queued", 1)
    t0 = datetime(2026, 1, 1, 10, 0, 0)
    base = t0.timestamp()
    job = SubmittedJob("slurm://torchx/41")
    waiting = store.add_trial(exp.id, 1, {"x": 0.2, "act": "relu"}, "Sobol", "queued-1", "")
    attempts = A.started([], job, t0, queued=True, gpus=2.0)
    attempts[-1], _ = A.observe(attempts[-1], JobStatus(JobState.PENDING, "Priority"), base + 5, None)
    store.mark_trial_running(waiting.id, job.handle, "slurm", {}, attempts=attempts)
    restarted = store.add_trial(exp.id, 2, {"x": 0.7, "act": "gelu"}, "Sobol", "queued-2", "")
    a = A.started([], job, t0, queued=True, gpus=2.0)[-1]
    a, _ = A.observe(a, JobStatus(JobState.RUNNING, running_since=base + 60), base + 61, None)
    a, _ = A.observe(a, JobStatus(JobState.PENDING, "BeginTime"), base + 600, None)
    a, _ = A.observe(a, JobStatus(JobState.RUNNING, running_since=base + 720), base + 721, None)
    store.mark_trial_running(restarted.id, job.handle, "slurm", {}, attempts=[a])
    store.finish_trial(restarted.id, TrialStatus.COMPLETED, {"val_acc": 0.9, "num_params": 1000.0}, None, None,
                       attempts=A.ended([a], None, None, None, datetime(2026, 1, 1, 10, 20, 0)),
                       ended_at=datetime(2026, 1, 1, 10, 20, 0))
    store.add_event(exp.id, A.QUEUE_EVENT, "trial 1 waits in slurm's queue: Priority", trial_index=1)

    page.goto(f"{server.base}/experiments/queued")
    wait_ready(page)
    page.wait_for_selector("#trials .status.QUEUED", timeout=15_000)
    assert "Priority" in page.locator("#trials tbody tr", has=page.locator(".status.QUEUED")).inner_text()
    summary = page.inner_text("#summary").lower()  # the cards' labels are upper-cased by the style sheet
    assert "1 of the running queued by the scheduler" in summary and "gpu-hours" in summary, summary
    page.goto(f"{server.base}/experiments/queued/trials/2")
    wait_ready(page)
    page.wait_for_function("document.getElementById('timeline-plot').data", timeout=15_000)
    names = page.evaluate("() => document.getElementById('timeline-plot').data.map(t => t.name)")
    assert names == ["queued by the scheduler", "running \u2192 restarted", "queued by the scheduler",
                     "running \u2192 completed"], names
    cards = page.inner_text("#summary").lower()
    assert "restarts" in cards and "gpu-hours" in cards and "queued" in cards, cards
    assert not page.errors
