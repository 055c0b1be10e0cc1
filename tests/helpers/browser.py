"""Browser test helpers: what the dashboard should draw (from its API), waiting for a page, box overlap."""

from __future__ import annotations

from typing import Any

import httpx


def expected_plotted(base: str, name: str, x: str, y: str) -> int:
    """How many of experiment `name`'s points have both an `x` and a `y` value and are not pending."""
    p = httpx.get(f"{base}/api/experiments/{name}/points").json()
    return sum(
        1
        for k in range(len(p["index"]))
        if p["category"][k] != "pending" and p["values"][x][k] is not None and p["values"][y][k] is not None
    )


def wait_analysis(page: Any) -> None:
    """Wait until the page says its analysis is drawn (body[data-analysis='1'])."""
    page.wait_for_selector("body[data-analysis='1']", timeout=60_000)


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    """Whether two bounding boxes (x, y, width, height) overlap."""
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])
