"""The analysis views in real headless Chromium, against a real `nasctl web` server:
history, importance, slices, contour, EDF, the Pareto plot's options, linked
selection with CSV download, and the comparison page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from nasctl.spec import parse_spec, spec_to_dict
from nasctl.store import Store
from nasctl.types import TrialStatus
from tests.helpers.browser import expected_plotted, wait_analysis
from tests.helpers.synthetic import add_synthetic
from tests.web.conftest import Server

pytestmark = pytest.mark.browser

THREE = """
name: three
search_space:
  x: {type: float, low: 0, high: 1}
  act: {type: choice, values: [relu, gelu]}
objectives:
  acc: {goal: maximize}
  size: {goal: minimize}
  lat: {goal: minimize}
budget: {max_trials: 30}
trial: {script: train.py}
"""


def plot(page: Any, div: str, expr: str) -> Any:
    return page.evaluate(f"() => {{ const gd = document.getElementById('{div}'); return {expr}; }}")


def test_history_importance_slices_contour_and_edf(page: Any, server: Server, screenshots: Path) -> None:
    page.goto(f"{server.base}/experiments/tiny")
    wait_analysis(page)
    h = httpx.get(f"{server.base}/api/experiments/tiny/history").json()
    acc = h["objectives"][0]
    assert page.get_attribute("#history", "data-points") == "9"
    assert float(page.get_attribute("#history", "data-best")) == acc["best"]["value"][-1]
    assert plot(page, "history", "gd.data[2].y") == acc["best"]["value"]
    assert plot(page, "history", "gd._fullLayout.xaxis.type") == "linear"
    page.select_option("#history-x", "time")
    page.wait_for_function("document.getElementById('history')._fullLayout.xaxis.type === 'date'")
    page.select_option("#history-objective", "num_params")
    page.wait_for_function("document.getElementById('history').data[2].y.length > 0")
    assert plot(page, "history", "gd.data[2].y") == h["objectives"][1]["best"]["value"]

    imp = httpx.get(f"{server.base}/api/experiments/tiny/importance").json()
    assert page.get_attribute("#importance", "data-parameters") == "3"
    bars = plot(page, "importance", "gd.data.map(t => [t.name, t.y, t.x])")
    assert [b[0] for b in bars] == ["val_acc", "num_params"]
    for name, ys, xs in bars:
        assert dict(zip(ys, xs)) == pytest.approx(imp["objectives"][name]["share"])
    assert "Random-forest main effects on 9 of 9 completed trials" in page.inner_text("#importance-note")

    assert page.locator("#slices > div").count() == 3
    assert plot(page, "slices", "gd.children[1]._fullLayout.xaxis.type") == "log"  # lr is on the log scale
    assert plot(page, "slices", "gd.children[2]._fullLayout.xaxis.type") == "category"  # act
    assert page.get_attribute("#contour", "data-grid") == "24x24"
    page.select_option("#contour-y", "act")
    page.wait_for_function("document.getElementById('contour').dataset.grid === '24x2'")
    assert plot(page, "contour", "gd.data[0].type") == "heatmap"
    assert page.get_attribute("#edf", "data-points") == "9"
    ys = plot(page, "edf", "gd.data[0].y")
    assert ys == sorted(ys) and ys[-1] == 1
    page.screenshot(path=str(screenshots / "analysis.png"), full_page=True)
    assert not page.errors


def test_pareto_axes_fit_the_points_with_toggles(page: Any, server: Server) -> None:
    page.goto(f"{server.base}/experiments/tiny")
    wait_analysis(page)
    want = expected_plotted(server.base, "tiny", "val_acc", "num_params")
    assert page.locator("#pareto .scatterlayer .point").count() == want  # no reference point
    ref = httpx.get(f"{server.base}/api/experiments/tiny").json()["reference_point"]
    pts = httpx.get(f"{server.base}/api/experiments/tiny/points").json()
    xs = [v for v in pts["values"]["val_acc"] if v is not None]
    lo, hi = plot(page, "pareto", "gd._fullLayout.xaxis.range")
    assert lo > ref["val_acc"] and lo < min(xs) and hi > max(xs)  # fits the points, not the reference (0.2)
    assert not page.is_visible("#pareto-3d")  # two objectives: no 3-D view
    page.check("#pareto-ref")
    page.wait_for_function(f"document.querySelectorAll('#pareto .scatterlayer .point').length === {want + 1}")
    assert plot(page, "pareto", "gd._fullLayout.xaxis.range[0]") < ref["val_acc"]
    page.check("#pareto-logy")
    page.wait_for_function("document.getElementById('pareto')._fullLayout.yaxis.type === 'log'")
    assert plot(page, "pareto", "gd._fullLayout.xaxis.type") == "linear"
    assert not page.errors


def test_three_objectives_in_3d(page: Any, server: Server, screenshots: Path) -> None:
    store = Store(server.url)
    exp = store.create_experiment("three", spec_to_dict(parse_spec(THREE)), "/nonexistent/three")
    for i in range(12):
        x = (i + 0.5) / 12
        t = store.add_trial(exp.id, i, {"x": x, "act": "relu" if i % 2 else "gelu"}, "Sobol", f"three-{i}", "")
        store.finish_trial(t.id, TrialStatus.COMPLETED, {"acc": x, "size": 10 + 90 * x * x, "lat": 1 + (i * 7) % 5})
    page.goto(f"{server.base}/experiments/three")
    wait_analysis(page)
    assert page.get_attribute("#pareto", "data-points") == "12"
    page.check("#pareto-3d")
    page.wait_for_function("document.getElementById('pareto').data[0].type === 'scatter3d'")
    assert page.input_value("#pareto-z") == "lat"
    assert page.get_attribute("#pareto", "data-points") == "12"
    assert sum(plot(page, "pareto", "gd.data.map(t => t.z.length)")) == 12
    page.select_option("#pareto-z", "acc")
    page.wait_for_function("document.getElementById('pareto')._fullLayout.scene.zaxis.title.text.startsWith('acc')")
    page.screenshot(path=str(screenshots / "pareto-3d.png"), full_page=False)
    page.uncheck("#pareto-3d")
    page.wait_for_function("document.getElementById('pareto').data[0].type !== 'scatter3d'")
    assert not page.errors


def _brush(page: Any, axis: int, start: float, end: float) -> None:
    """Drag along parallel-coordinates axis `axis` from `start` to `end` (fractions of its height, top = 0)."""
    page.locator("#parallel").scroll_into_view_if_needed()
    box = page.locator("#parallel .axis-brush").nth(axis).bounding_box()
    x = box["x"] + box["width"] / 2
    page.mouse.move(x, box["y"] + start * box["height"])
    page.mouse.down()
    page.mouse.move(x, box["y"] + (start + end) / 2 * box["height"], steps=4)
    page.mouse.move(x, box["y"] + end * box["height"], steps=4)
    page.mouse.up()


def test_brushing_filters_table_and_pareto_and_downloads_csv(page: Any, server: Server, screenshots: Path) -> None:
    store = Store(server.url)
    add_synthetic(store, "linked", 40, seed=5)
    base = f"{server.base}/api/experiments/linked"
    page.goto(f"{server.base}/experiments/linked")
    wait_analysis(page)
    _brush(page, 0, 0.15, 0.6)  # axis 0: parameter x, the upper part of its range
    page.wait_for_function("document.getElementById('f-where').value.includes('x >=')", timeout=10_000)
    where = [w.strip() for w in page.input_value("#f-where").split(",")]
    assert len(where) == 2 and where[1].startswith("x <=")
    sel = httpx.get(base + "/selection", params=[("where", w) for w in where]).json()
    table = httpx.get(base + "/trials", params=[("where", w) for w in where]).json()
    assert 0 < sel["total"] == table["total"] < 40
    page.wait_for_function(f"document.getElementById('pareto').dataset.selected !== ''", timeout=10_000)
    page.wait_for_function(f"document.querySelectorAll('#trials tbody tr').length === {table['total']}")
    plotted = {int(i) for i in plot(page, "pareto", "gd.data.filter(t => t.meta !== 'unselected').flatMap(t => t.customdata || [])")}
    pts = httpx.get(base + "/points").json()
    drawable = {i for k, i in enumerate(pts["index"]) if pts["values"]["acc"][k] is not None and pts["values"]["size"][k] is not None}
    assert plotted == set(sel["index"]) & drawable
    assert page.get_attribute("#pareto", "data-selected") == str(len(plotted))
    assert f"{sel['total']} trials selected" in page.inner_text("#selection-info")
    page.screenshot(path=str(screenshots / "selection.png"), full_page=True)

    with page.expect_download() as download:
        page.click("#f-csv")
    lines = Path(download.value.path()).read_text().splitlines()
    assert lines[0] == "index,status,x,act,acc,size,lat" and len(lines) == sel["total"] + 1

    # a typed filter (a parameter and a metric) highlights its trials too
    page.fill("#f-where", "act = gelu, acc > 0.4")
    page.click("#f-apply")
    want = httpx.get(base + "/selection", params=[("where", "act = gelu"), ("where", "acc > 0.4")]).json()
    page.wait_for_function(f"document.getElementById('selection-info').textContent === '{want['total']} trials selected'")
    # a new result that passes the filters joins the selection without a reload
    exp = store.get_experiment("linked")
    t = store.add_trial(exp.id, 40, {"x": 0.9, "act": "gelu"}, "MBM", "linked-40", "")
    store.finish_trial(t.id, TrialStatus.COMPLETED, {"acc": 0.9, "size": 50.0, "lat": 1.0})
    page.wait_for_function(
        f"document.getElementById('selection-info').textContent === '{want['total'] + 1} trials selected'", timeout=20_000)
    assert 40 in plot(page, "pareto", "gd.data.filter(t => t.meta !== 'unselected').flatMap(t => t.customdata || [])")
    page.fill("#f-where", "")
    page.click("#f-apply")
    page.wait_for_function("document.getElementById('pareto').dataset.selected === ''")
    assert page.get_attribute("#pareto", "data-points") == str(expected_plotted(server.base, "linked", "acc", "size"))
    assert not page.errors


def test_compare_page_from_the_experiment_list(page: Any, server: Server, screenshots: Path) -> None:
    store = Store(server.url)
    add_synthetic(store, "cmp-a", 30, seed=1)
    add_synthetic(store, "cmp-b", 20, seed=2)
    page.goto(server.base + "/")
    page.wait_for_selector("#compare-links a")
    link = page.locator("#compare-links a").first
    assert "names=cmp-a" in link.get_attribute("href") and "names=tiny" not in link.get_attribute("href")
    page.goto(f"{server.base}/compare?names=cmp-a&names=cmp-b")
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    c = httpx.get(f"{server.base}/api/compare", params=[("names", "cmp-a"), ("names", "cmp-b")]).json()
    assert plot(page, "compare-hv", "gd.data.map(t => t.y[t.y.length - 1])") == [x["history"]["hypervolume"][-1] for x in c["experiments"]]
    assert plot(page, "compare-front", "gd.data.map(t => t.x.length)") == [len(x["front"]["trial_index"]) for x in c["experiments"]]
    assert page.locator("#compare-table tbody tr").count() == 2
    assert "Common reference point" in page.inner_text("#message")
    page.screenshot(path=str(screenshots / "compare.png"), full_page=True)
    page.goto(f"{server.base}/compare?names=tiny&names=cmp-a")
    page.wait_for_function("document.getElementById('message').className === 'error'")
    assert "different objectives" in page.inner_text("#message")
    assert not page.errors
