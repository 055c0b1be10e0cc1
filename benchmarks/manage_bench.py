"""Diagnostics in the background, and the management endpoints, timed in process.

    python benchmarks/manage_bench.py [--trials 40] [--big 100000]

Part 1 writes an experiment of `--trials` trials (2 objectives, a constraint)
through the store, then calls `GET /api/experiments/NAME/diagnostics` on the
real FastAPI app (httpx through ASGI, no network): the first answer (202,
computing), the time until the result is there (polling every 50 ms), and a
cached answer. Part 2 bulk-imports an experiment of `--big` trials and times
the note endpoints and the experiment summary (which carries the note),
median of 5 calls after a warm-up. Prints markdown tables: wall time and this
process's CPU time (the background fit runs in a thread of the same process).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nasctl.store import Store  # noqa: E402
from nasctl.store import manage as store_manage  # noqa: E402
from nasctl.types import ExperimentStatus, TrialStatus  # noqa: E402
from nasctl.web import create_app  # noqa: E402
from tests.helpers.synthetic import add_synthetic  # noqa: E402

TOKEN = "bench"


def _timed(call):  # type: ignore[no-untyped-def]
    w, c = time.perf_counter(), time.process_time()
    r = call()
    return r, time.perf_counter() - w, time.process_time() - c


def diagnostics(tmp: Path, n: int) -> None:
    store = Store(f"sqlite:///{tmp / 'diag.db'}", create=True)
    exp = add_synthetic(store, "d", n)
    store.set_experiment_status(exp.id, ExperimentStatus.STOPPED)
    c = TestClient(create_app(store))
    url = "/api/experiments/d/diagnostics"
    first, w1, c1 = _timed(lambda: c.get(url))
    start, cpu = time.perf_counter(), time.process_time()
    while (r := c.get(url)).status_code == 202:
        time.sleep(0.05)
    done_w, done_c = time.perf_counter() - start + w1, time.process_time() - cpu + c1
    cached = [_timed(lambda: c.get(url)) for _ in range(5)]
    print(f"\n### Diagnostics, {n} trials ({sum(1 for t in store.list_trials(exp.id) if t.status == TrialStatus.COMPLETED)} completed)\n")
    print("| request | status | wall ms | CPU ms |\n|---|---|---|---|")
    print(f"| first (cold) | {first.status_code} `{first.json()['state']}` | {1000 * w1:.0f} | {1000 * c1:.0f} |")
    print(f"| until the result is there | {r.status_code} | {1000 * done_w:.0f} | {1000 * done_c:.0f} |")
    print(f"| cached (median of 5) | {cached[0][0].status_code} | {1000 * statistics.median(x[1] for x in cached):.1f} | "
          f"{1000 * statistics.median(x[2] for x in cached):.1f} |")


def notes_at_scale(tmp: Path, n: int) -> None:
    store = Store(f"sqlite:///{tmp / 'big.db'}", create=True)
    exp = add_synthetic(store, "big", 0)
    rows = [(i, {"x": i / n, "act": "relu"}, TrialStatus.COMPLETED.value,
             {"acc": (i % 997) / 997, "size": 10.0 + (i * 7919) % 1000, "lat": (i % 13) / 2}) for i in range(n)]
    store_manage.import_finished_trials(store, exp.id, rows)
    store.set_experiment_status(exp.id, ExperimentStatus.STOPPED)
    c = TestClient(create_app(store, token=TOKEN))
    h = {"Authorization": f"Bearer {TOKEN}"}
    c.get("/api/experiments/big")  # the analysis is built once
    calls = {
        "PUT /api/experiments/big/note": lambda: c.put("/api/experiments/big/note", json={"text": "x" * 2000}, headers=h),
        "GET /api/experiments/big/note": lambda: c.get("/api/experiments/big/note"),
        f"PUT /api/experiments/big/trials/{n - 1}/note": lambda: c.put(f"/api/experiments/big/trials/{n - 1}/note",
                                                                       json={"text": "kept"}, headers=h),
        f"GET /api/experiments/big/trials/{n - 1}/note": lambda: c.get(f"/api/experiments/big/trials/{n - 1}/note"),
        "GET /api/experiments/big (summary with note)": lambda: c.get("/api/experiments/big"),
    }
    print(f"\n### Notes on an experiment of {n:,} trials\n")
    print("| request | wall ms (median of 5) | CPU ms |\n|---|---|---|")
    for label, call in calls.items():
        call()
        t = [_timed(call) for _ in range(5)]
        assert t[0][0].status_code == 200, t[0][0].text
        print(f"| {label} | {1000 * statistics.median(x[1] for x in t):.1f} | {1000 * statistics.median(x[2] for x in t):.1f} |")
    r, w, cpu = _timed(lambda: c.delete("/api/experiments/big", headers=h))
    print(f"| DELETE /api/experiments/big ({r.json()['removed_rows']['trials']:,} trials, "
          f"{r.json()['removed_rows']['events']:,} events) | {1000 * w:.0f} (once) | {1000 * cpu:.0f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=40)
    p.add_argument("--big", type=int, default=100_000)
    a = p.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as d:
        diagnostics(Path(d), a.trials)
        notes_at_scale(Path(d), a.big)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
