"""Screenshots of the dashboard's analysis views, from two real experiments.

    python tests/web/scripts/dashboard_screenshots.py docs/img [--workdir DIR]

Runs two experiments with `nasctl run` (the test suite's fast trial script,
three objectives, Sobol: 48 and 32 trials), serves them with `nasctl web` and
drives Debian's headless Chromium with Playwright to write
web-analysis-*.png, web-pareto-box.png (a box drawn in the Pareto plot
filters the table), web-trial.png (the trial page with its timeline) and
web-narrow.png (the trial page at 420 px) into the given folder.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SPEC = """
name: {name}
search_space:
  width: {{type: int, low: 4, high: 64}}
  lr: {{type: float, low: 0.001, high: 0.01, log: true}}
  act: {{type: choice, values: [relu, gelu]}}
objectives:
  val_acc: {{goal: maximize, threshold: 0.2}}
  num_params: {{goal: minimize, threshold: 4000}}
  latency_ms: {{goal: minimize}}
budget: {{max_trials: {trials}, parallelism: 4}}
trial: {{script: {script}}}
optimizer: {{method: sobol, seed: {seed}}}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--port", type=int, default=18799)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="nasctl-shots-"))
    work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    db = f"sqlite:///{work / 'demo.db'}"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if not (work / "demo.db").exists():
        for name, trials, seed in (("demo", 48, 5), ("demo-b", 32, 9)):
            spec = work / f"{name}.yaml"
            spec.write_text(SPEC.format(name=name, trials=trials, seed=seed, script=HERE / "tiny_trial.py"))
            subprocess.run([sys.executable, "-m", "nasctl", "run", str(spec), "--db", db, "--workdir", str(work / "runs")],
                           env=env, check=True, cwd=work)
    server = subprocess.Popen([sys.executable, "-m", "nasctl", "web", "--db", db, "--port", str(args.port)], env=env)
    base = f"http://127.0.0.1:{args.port}"
    try:
        for _ in range(150):
            try:
                if httpx.get(base + "/api/info", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        shoot(base, args.out)
    finally:
        server.terminate()
        server.wait(timeout=30)


def shoot(base: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox", "--disable-gpu"])
        pg = b.new_page(viewport={"width": 1400, "height": 1000})
        pg.goto(base + "/experiments/demo")
        pg.wait_for_selector("body[data-analysis='1']", timeout=120_000)
        pg.select_option("#contour-y", "lr")
        pg.wait_for_timeout(1500)
        pg.locator("#analysis").screenshot(path=str(out / "web-analysis-views.png"))
        pg.check("#pareto-3d")
        pg.select_option("#pareto-z", "train_loss")  # latency and size both follow width: a loss axis spreads the cloud
        pg.wait_for_timeout(1500)
        pg.locator("#pareto").screenshot(path=str(out / "web-analysis-pareto-3d.png"))
        pg.uncheck("#pareto-3d")
        pg.locator("#parallel").scroll_into_view_if_needed()
        box = pg.locator("#parallel .axis-brush").nth(0).bounding_box()
        x = box["x"] + box["width"] / 2
        pg.mouse.move(x, box["y"] + 0.1 * box["height"])
        pg.mouse.down()
        pg.mouse.move(x, box["y"] + 0.5 * box["height"], steps=5)
        pg.mouse.up()
        pg.wait_for_function("document.getElementById('pareto').dataset.selected !== ''")
        pg.wait_for_timeout(1000)
        pg.screenshot(path=str(out / "web-analysis-selection.png"), full_page=True, clip={
            "x": 0, "y": 0, "width": 1400, "height": 2200})
        pg.goto(base + "/compare?names=demo&names=demo-b")
        pg.wait_for_selector("body[data-ready='1']", timeout=60_000)
        pg.wait_for_timeout(500)
        pg.screenshot(path=str(out / "web-analysis-compare.png"), full_page=True)
        shoot_box_and_trial(pg, base, out)
        narrow = b.new_page(viewport={"width": 420, "height": 900})
        narrow.goto(base + "/experiments/demo/trials/5")
        narrow.wait_for_selector("body[data-ready='1']", timeout=60_000)
        narrow.wait_for_timeout(500)
        narrow.screenshot(path=str(out / "web-narrow.png"), full_page=True, clip={"x": 0, "y": 0, "width": 420, "height": 2300})
        b.close()


def shoot_box_and_trial(pg: Any, base: str, out: Path) -> None:
    """A box drawn in the Pareto plot, with the table it filters; a trial page."""
    pg.goto(base + "/experiments/demo")
    pg.wait_for_selector("body[data-analysis='1']", timeout=120_000)
    pg.evaluate("Plotly.relayout('pareto', {dragmode: 'select'})")
    area = pg.locator("#pareto .nsewdrag").first.bounding_box()
    pg.mouse.move(area["x"] + area["width"] * 0.55, area["y"] + area["height"] * 0.35)
    pg.mouse.down()
    pg.mouse.move(area["x"] + area["width"] * 0.98, area["y"] + area["height"] * 0.95, steps=8)
    pg.mouse.up()
    pg.wait_for_function("document.getElementById('pareto').dataset.selected !== ''")
    pg.wait_for_timeout(1000)
    top = pg.locator("#pareto").bounding_box()["y"] - 60
    bottom = pg.locator("#trials").bounding_box()
    pg.screenshot(path=str(out / "web-pareto-box.png"), full_page=True, clip={
        "x": 0, "y": top, "width": 1400, "height": min(bottom["y"] + bottom["height"], top + 1300) - top})
    pg.goto(base + "/experiments/demo/trials/5")
    pg.wait_for_selector("body[data-ready='1']", timeout=60_000)
    pg.wait_for_timeout(500)
    pg.screenshot(path=str(out / "web-trial.png"), full_page=True)


if __name__ == "__main__":
    main()
