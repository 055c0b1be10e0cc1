"""What a dashboard user tripped on (issue 41), in real headless Chromium against a
real `nasctl web`: every request answered, 404 pages, the offline /docs, brushes
and box selections in step with the table's filter, a confirmation that stays,
feasibility as the Pareto plot has it, readable log axes, and pages that fit at
1280 and 420 px (with screenshots of each)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import pytest

from nasctl.leases import owner_id
from nasctl.spec import parse_spec, spec_to_dict
from nasctl.store import Store
from nasctl.types import ExperimentRecord, Observation, TrialStatus
from tests.helpers.browser import overlap, wait_analysis
from tests.web.conftest import TOKEN, Server

pytestmark = pytest.mark.browser
WIDTHS = (1280, 420)

POLISH = """
name: {name}
search_space:
  learning_rate: {{type: float, low: 0.001, high: 0.01, log: true}}
  dropout: {{type: float, low: 0, high: 1}}
  activation: {{type: choice, values: [relu, gelu]}}
  batch_size: {{type: choice, values: [32, 64, 128], ordered: true}}
  weight_decay: {{type: float, low: 0, high: 0.1}}
objectives:
  val_acc: {{goal: maximize, threshold: 0.2}}
  num_params: {{goal: minimize}}
constraints: ["latency_ms <= 8"]
budget: {{max_trials: 20}}
trial: {{script: train.py}}
"""


def polish_experiment(store: Store, name: str, work_dir: str = "/nonexistent/polish") -> ExperimentRecord:
    """16 completed trials with learning_rate spread over its decade; trial 3 misses the
    val_acc threshold (0.2) with the smallest num_params, trial 5 the latency_ms constraint,
    and trial 16 is still running."""
    exp = store.create_experiment(name, spec_to_dict(parse_spec(POLISH.format(name=name))), work_dir)
    for i in range(17):
        lr = 0.001 * 10 ** (i / 16)
        log_dir = f"{work_dir}/a-rather-long-experiment-folder-name/trials/trial_{i:04d}/job/torchx/{name}-{i}-x7f3k"
        t = store.add_trial(exp.id, i, {"learning_rate": lr, "dropout": (i * 7 % 17) / 17,
                                          "activation": "relu" if i % 2 else "gelu", "batch_size": 32 * 2 ** (i % 3),
                                          "weight_decay": (i * 5 % 17) / 170},
                            "Sobol", f"{name}-{i}", log_dir)
        t = store.mark_trial_running(t.id, f"local_cwd://synthetic/{name}-{i}", "local_cwd",
                                     {"stdout": f"{work_dir}/trial_{i:04d}/stdout.log"})
        if i == 16:
            continue
        acc = 0.1 if i == 3 else 0.3 + 0.6 * math.sin(i)**2
        size = 5.0 if i == 3 else 20 + 80 * acc * acc + i
        store.add_observations(t.id, [Observation("val_acc", s, acc * s / 3) for s in range(1, 4)])
        store.finish_trial(t.id, TrialStatus.COMPLETED, {"val_acc": acc, "num_params": size,
                                                           "latency_ms": 9.0 if i == 5 else 1.0 + i / 10})
    return exp


@pytest.fixture(scope="module")
def polish(server: Server) -> str:
    store = Store(server.url)
    polish_experiment(store, "polish")
    polish_experiment(store, "polish-b")
    return "polish"


def test_every_request_is_answered_and_unknown_pages_are_404(page: Any, server: Server, polish: str) -> None:
    """No 404 in the console on any page under `nasctl web` (no /api/service, a favicon, no log
    request for a trial without a log file); /docs renders offline; unknown pages answer 404."""
    store = Store(server.url)
    exp = store.get_experiment(polish)
    t = store.add_trial(exp.id, 17, {"learning_rate": 0.002, "dropout": 0.5, "activation": "relu", "batch_size": 64,
                                   "weight_decay": 0.01}, "Sobol", "polish-17", "")
    t = store.mark_trial_running(t.id, "inprocess://polish-17", "inprocess", {})
    store.finish_trial(t.id, TrialStatus.FAILED, failure_reason="ValueError: bad", log_tail="Traceback ...\nValueError: bad")
    failed: list[str] = []
    outside: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    # a request still in flight when the test goes to the next page is cancelled by the
    # browser (net::ERR_ABORTED: the experiment page's poll for changes, under load)
    page.on("requestfailed", lambda r: None if "ERR_ABORTED" in (r.failure or "") else failed.append(
        f"failed {r.url}: {r.failure}"))
    page.route(lambda url: not url.startswith(server.base), lambda route: (outside.append(route.request.url), route.abort()))
    for path in ("/", f"/experiments/{polish}", "/experiments/tiny/trials/0", f"/experiments/{polish}/trials/2",
                 f"/experiments/{polish}/trials/17", f"/compare?names={polish}&names=polish-b"):
        page.goto(server.base + path)
        page.wait_for_selector("body[data-ready='1']" if path != "/" else "#experiments tbody tr", timeout=30_000)
        if path == f"/experiments/{polish}":
            wait_analysis(page)
        page.wait_for_load_state("networkidle")
        if path.endswith("/17"):  # the in-process trial: its stored log tail, and no log file asked for
            assert page.inner_text("#log") == "Traceback ...\nValueError: bad"
    page.goto(server.base + "/docs")
    page.wait_for_selector(".swagger-ui .opblock", timeout=30_000)
    assert page.locator(".swagger-ui .opblock").count() > 20
    assert "nasctl dashboard" in page.inner_text(".swagger-ui .info")
    assert failed == [] and outside == []
    for path, says in ((f"/experiments/nope", "no experiment named 'nope'"),
                       (f"/experiments/{polish}/trials/99", f"no trial 99 in this experiment '{polish}'")):
        answer = page.goto(server.base + path)
        assert answer is not None and answer.status == 404
        assert says in page.inner_text("#message")
        assert page.locator("#trials, #pareto, #summary").count() == 0  # no empty page under the error
    assert not page.errors


def test_brushes_and_box_selections_follow_the_filter_box(page: Any, server: Server, polish: str) -> None:
    base = f"{server.base}/api/experiments/{polish}"
    page.goto(f"{server.base}/experiments/{polish}")
    wait_analysis(page)
    rows = "document.querySelectorAll('#trials tbody tr').length"
    total = page.evaluate(rows)
    # brush the dropout axis (the second parameter) of the parallel coordinates
    page.evaluate("Plotly.restyle('parallel', {'dimensions[1].constraintrange': [[0.2, 0.6]]})")
    page.wait_for_function("document.getElementById('f-where').value.includes('dropout >= ')")
    where = [w.strip() for w in page.input_value("#f-where").split(",")]
    want = httpx.get(base + "/trials", params={"where": where}).json()["total"]
    assert 0 < want < total
    page.wait_for_function(f"{rows} === {want}")
    # the user clears the filter: all rows, and the brush and the grey lines go too
    page.fill("#f-where", "")
    page.click("#f-apply")
    page.wait_for_function(f"{rows} === {total}")
    page.wait_for_function("!document.getElementById('parallel').data[0].dimensions[1].constraintrange")
    assert page.get_attribute("#pareto", "data-selected") == ""
    # a box drawn in the Pareto plot filters the table on its x and y ranges
    page.evaluate("Plotly.relayout('pareto', {dragmode: 'select'})")
    area = page.locator("#pareto .nsewdrag").first.bounding_box()
    page.mouse.move(area["x"] + area["width"] * 0.5, area["y"] + 2)
    page.mouse.down()
    page.mouse.move(area["x"] + area["width"] - 2, area["y"] + area["height"] * 0.6, steps=8)
    page.mouse.up()
    page.wait_for_function("document.getElementById('f-where').value.includes('val_acc >= ')")
    where = [w.strip() for w in page.input_value("#f-where").split(",")]
    assert [w.split()[0] for w in where] == ["val_acc", "val_acc", "num_params", "num_params"]
    want = httpx.get(base + "/trials", params={"where": where}).json()["total"]
    assert 0 < want < total
    page.wait_for_function(f"{rows} === {want}")
    page.wait_for_function(f"document.getElementById('pareto').dataset.selected === '{want}'")
    page.fill("#f-where", "")
    page.press("#f-where", "Enter")
    page.wait_for_function(f"{rows} === {total}")
    page.wait_for_function("document.getElementById('pareto').dataset.selected === ''")
    assert not page.errors


def test_history_feasibility_log_ticks_and_a_stop_confirmation_that_stays(page: Any, server: Server, polish: str) -> None:
    page.goto(f"{server.base}/experiments/{polish}")
    wait_analysis(page)
    # history: infeasible as in the Pareto plot (trial 3 misses the val_acc threshold, trial 5 the latency_ms constraint)
    infeasible = page.evaluate("document.getElementById('pareto').data.find(t => t.meta === 'infeasible').customdata")
    assert sorted(infeasible) == [3, 5]
    page.select_option("#history-objective", "num_params")
    page.wait_for_function("document.getElementById('history').data[2].name === 'best so far'")
    history = page.evaluate("(() => { const d = document.getElementById('history').data; return [d[1].customdata, d[2].y]; })()")
    assert sorted(history[0]) == [3, 5]
    assert 5.0 not in history[1]  # trial 3's num_params is not the best so far
    # a log-scaled parameter's ticks say their values (plotly alone labels 0.002 as "2")
    ticks = page.evaluate("[...document.querySelector('#slices [data-parameter=learning_rate]').querySelectorAll('.xtick text')].map(t => t.textContent)")
    assert len(ticks) >= 3 and all(0.001 * 0.99 <= float(t) <= 0.01 * 1.01 for t in ticks), ticks
    page.select_option("#contour-x", "learning_rate")
    page.select_option("#contour-y", "dropout")
    page.wait_for_function("document.getElementById('contour')._fullLayout.xaxis.type === 'log'")
    ticks = page.evaluate("[...document.querySelectorAll('#contour .xtick text')].map(t => t.textContent)")
    assert len(ticks) >= 3 and all(0.001 * 0.99 <= float(t) <= 0.01 * 1.01 for t in ticks), ticks
    # stop: the confirmation stays through the live refresh that the request itself causes
    store = Store(server.url)
    store.acquire_lease(store.get_experiment(polish).id, owner_id(), 60.0)  # a live orchestrator: a request
    store.close()
    page.fill("#token-input", TOKEN)
    page.dispatch_event("#token-input", "change")
    page.on("dialog", lambda d: d.accept())
    drawn = page.get_attribute("#trials", "data-drawn")
    page.click("#stop")  # records an event: the live loop sees a change and redraws the table
    page.wait_for_function("document.getElementById('message').textContent.includes('stop requested')")
    page.wait_for_function(f"document.getElementById('trials').dataset.drawn > {drawn}", timeout=20_000)
    assert "stop requested" in page.inner_text("#message")
    assert not page.errors


@pytest.mark.parametrize("width", WIDTHS)
def test_pages_fit_the_window_and_plots_keep_their_labels_apart(
    browser: Any, server: Server, polish: str, screenshots: Path, width: int
) -> None:
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    overflow = "document.documentElement.scrollWidth - window.innerWidth"
    try:
        for path, shot in (("/", "experiments"), (f"/experiments/{polish}", "experiment"),
                           (f"/experiments/{polish}/trials/2", "trial"), (f"/compare?names={polish}&names=polish-b", "compare")):
            page.goto(server.base + path)
            page.wait_for_selector("body[data-ready='1']" if path != "/" else "#experiments tbody tr", timeout=60_000)
            if shot == "experiment":
                page.wait_for_selector("body[data-analysis='1']", timeout=60_000)
            assert page.evaluate(overflow) <= 0, f"{path} is wider than a {width} px window"
            if shot == "experiment":  # parallel-coordinates axis titles do not overlap
                titles = [b for b in (t.bounding_box() for t in page.locator("#parallel .axis-title").all()) if b]
                assert len(titles) == 7
                assert not any(overlap(a, b) for k, a in enumerate(titles) for b in titles[k + 1:]), titles
            if shot == "trial":
                _check_timeline(page)
            page.screenshot(path=str(screenshots / f"web-{shot}-{width}.png"), full_page=True)
    finally:
        ctx.close()
    assert not errors


def _check_timeline(page: Any) -> None:
    """Every tick label inside the plot, none under the legend; the running phase says so."""
    names = page.evaluate("document.getElementById('timeline-plot').data.map(t => t.name)")
    assert names[-1] == "running \u2192 completed" and names[:-1] in ([], ["waiting to start"]), names
    svg = page.locator("#timeline-plot .main-svg").first.bounding_box()
    legend = page.locator("#timeline-plot .legend").first.bounding_box()
    for tick in page.locator("#timeline-plot .xtick text").all():
        b = tick.bounding_box()
        if not b:
            continue
        assert svg["x"] <= b["x"] and b["x"] + b["width"] <= svg["x"] + svg["width"] + 0.5, (b, svg)
        assert b["y"] + b["height"] <= svg["y"] + svg["height"] + 0.5, (b, svg)
        assert not overlap(b, legend), (b, legend)
