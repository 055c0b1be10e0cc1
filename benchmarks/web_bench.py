"""Dashboard endpoint timings on one experiment of 100,000 trials with 3 objectives.

    python benchmarks/web_bench.py [--trials 100000] [--db sqlite:///web_bench.db] [--repeat 5]

Builds the experiment once (bulk import through `nasctl.store.manage`), then
calls the real FastAPI app in process (httpx through ASGI, no network) and
prints a markdown table: median of `--repeat` calls, except "cold" rows, which
are the first call after the store changed (the per-experiment analysis is
rebuilt). It also times the 3-objective Pareto front against the reference
pairwise-style implementation.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import args as argtypes  # noqa: E402
from nasctl.pareto import compute_front, hypervolume, pareto_mask  # noqa: E402
from nasctl.spec import parse_spec, spec_to_dict  # noqa: E402
from nasctl.store import Store, queries, requests  # noqa: E402
from nasctl.store import manage as store_manage  # noqa: E402
from nasctl.types import TrialStatus  # noqa: E402
from nasctl.web import create_app  # noqa: E402

SPEC = """
name: big
search_space:
  width: {type: int, low: 8, high: 1024, log: true}
  depth: {type: int, low: 1, high: 8}
  lr: {type: float, low: 1.0e-4, high: 1.0e-1, log: true}
  act: {type: choice, values: [relu, gelu, tanh]}
objectives:
  val_acc: {goal: maximize, threshold: 0.5}
  num_params: {goal: minimize, threshold: 5.0e6}
  latency_ms: {goal: minimize, threshold: 50}
budget: {max_trials: 100000, parallelism: 64}
trial: {script: train.py}
"""


def build(store: Store, n: int, seed: int = 0, name: str = "big") -> None:
    spec = parse_spec(SPEC.replace("name: big", f"name: {name}"))
    exp = store.create_experiment(name, spec_to_dict(spec), f"/nonexistent/{name}")
    # the optimizer's log-scale state, said once before the bulk of the audit trail: the
    # summary's lookup of the newest such event must not walk the 300,000 events after it
    store.add_event(exp.id, queries.LOG_SCALE, "optimizer: modelling latency_ms on the log scale",
                    data={"metrics": ["latency_ms"]})
    rng = np.random.default_rng(seed)
    width = np.exp(rng.uniform(np.log(8), np.log(1024), n)).astype(int)
    depth = rng.integers(1, 9, n)
    lr = np.exp(rng.uniform(np.log(1e-4), np.log(1e-1), n))
    acts = rng.choice(["relu", "gelu", "tanh"], n)
    size = width * width * depth + width * 64
    acc = 1 - 0.5 * np.exp(-np.log(size) / 6) - 0.1 * np.abs(np.log10(lr) + 2.5) + rng.normal(0, 0.02, n)
    lat = 0.5 + size / 2e5 + depth * 0.3 + rng.exponential(0.5, n)
    rows = []
    for i in range(n):
        params = {"width": int(width[i]), "depth": int(depth[i]), "lr": float(lr[i]), "act": str(acts[i])}
        if i % 50 == 7:
            rows.append((i, params, TrialStatus.FAILED.value, {}))
        else:
            rows.append((i, params, TrialStatus.COMPLETED.value,
                         {"val_acc": float(acc[i]), "num_params": float(size[i]), "latency_ms": float(lat[i])}))
    store_manage.import_finished_trials(store, exp.id, rows, "Sobol")


def timed(client: TestClient, path: str, repeat: int) -> tuple[float, int, int, float]:
    """Median wall time, sizes, and median CPU time of the whole process (the app runs in
    the test client's thread): the CPU figure is what a quiet machine would take."""
    times, cpus, size, wire = [], [], 0, 0
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        r = client.get(path)
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        assert r.status_code == 200, (path, r.status_code, r.text[:200])
        size, wire = len(r.content), r.num_bytes_downloaded
    return statistics.median(times), size, wire, statistics.median(cpus)


def once(client: TestClient, path: str) -> tuple[float, int, int, float]:
    return timed(client, path, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=argtypes.positive_int, default=100_000)
    ap.add_argument("--db", default=None)
    ap.add_argument("--repeat", type=argtypes.positive_int, default=5)
    args = ap.parse_args()
    db = args.db or f"sqlite:///{Path('web_bench.db').resolve()}"
    store = Store(db, create=True)
    t0 = time.perf_counter()
    try:
        store.get_experiment("big")
        built = "reused"
    except Exception:
        build(store, args.trials)
        built = f"built in {time.perf_counter() - t0:.1f} s"
    client = TestClient(create_app(store))
    exp = store.get_experiment("big")
    n = len(queries.trial_points(store, exp.id))
    rows: list[tuple[str, float, int, int, float]] = []

    base = "/api/experiments/big"
    rows.append(("GET /api/experiments/big (cold: analysis rebuilt)", *once(client, base)))
    cursor = client.get(base).json()["cursor"]
    # the rows' trial and page (at the default 100,000 trials: trial 54321, offset 90,000)
    detail = 54321 if n > 54321 else n // 2
    offset = 90_000 if n > 90_000 else 9 * n // 10
    for label, path in [
        ("GET /api/experiments", "/api/experiments"),
        ("GET /api/experiments/big", base),
        ("GET .../points (all trials, columns)", base + "/points"),
        ("GET .../hypervolume", base + "/hypervolume"),
        ("GET .../trials?limit=50 (by index)", base + "/trials?limit=50"),
        ("GET .../trials sorted by val_acc desc", base + "/trials?limit=50&sort=values.val_acc&desc=true"),
        ("GET .../trials filtered + sorted by a parameter",
         base + "/trials?limit=50&status=COMPLETED&where=val_acc%3E%3D0.8&where=latency_ms%3C%3D5&sort=parameters.width"),
        (f"GET .../trials page at offset {offset:,}", base + f"/trials?limit=50&offset={offset}"),
        ("GET .../parallel (2,000 trials)", base + "/parallel"),
        ("GET .../changes (nothing new)", base + f"/changes?since={cursor}"),
        (f"GET .../trials/{detail} (detail)", base + f"/trials/{detail}"),
        ("GET .../events?latest=true&limit=200", base + "/events?latest=true&limit=200"),
    ]:
        rows.append((label, *timed(client, path, args.repeat)))
    # the analysis endpoints: the first call builds (columns, forests, comparison), later ones hit the cache
    try:
        store.get_experiment("big-twin")
    except Exception:
        build(store, max(1, args.trials // 10), seed=1, name="big-twin")
    selection = base + "/selection?where=width%3C64&where=act%20%3D%20relu&where=val_acc%3E%3D0.7"
    for label, path in [
        ("GET .../history", base + "/history"),
        ("GET .../importance", base + "/importance"),
        ("GET .../contour?x=width&y=lr", base + "/contour?x=width&y=lr&objective=val_acc"),
        ("GET .../selection (3 filters, parameters and metrics)", selection),
        ("GET .../selection.csv (3 filters)", selection.replace("/selection?", "/selection.csv?")),
        ("GET /api/compare?names=big&names=big-twin", "/api/compare?names=big&names=big-twin"),
    ]:
        rows.append((label + " (cold)", *once(client, path)))
        rows.append((label, *timed(client, path, args.repeat)))
    requests.request_stop(store, exp.id, "benchmark: one new event")
    rows.append(("GET .../changes after a new event (cold)", *once(client, base + f"/changes?since={cursor}")))

    spec = parse_spec(SPEC)
    done = [(i, v) for i, st, v in queries.trial_points(store, exp.id) if st == "COMPLETED"]
    Y = np.array([[v["val_acc"], -v["num_params"], -v["latency_ms"]] for _, v in done])
    lookups = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        assert queries.log_scale_metrics(store, exp.id) == ["latency_ms"]
        lookups.append(time.perf_counter() - t0)
    pareto_rows = [("newest log-scale event (summary's optimizer card), store query", statistics.median(lookups))]
    t0 = time.perf_counter()
    pareto_mask(Y)
    pareto_rows.append(("pareto_mask (moocore)", time.perf_counter() - t0))
    t0 = time.perf_counter()
    fast = compute_front(done, spec.objectives)
    pareto_rows.append(("compute_front (front + hypervolume)", time.perf_counter() - t0))
    signs = np.array([1.0 if o.maximize else -1.0 for o in spec.objectives.values()])
    ref = np.array([fast.reference[k] for k in spec.objectives]) * signs
    t0 = time.perf_counter()
    Yr = np.array([[v[k] for k in spec.objectives] for _, v in done]) * signs
    beyond = np.all(Yr > ref, axis=1)
    slow_mask = pareto_mask(Yr[beyond])
    slow_hv = hypervolume(Yr[beyond], ref)
    pareto_rows.append(("pareto_mask + hypervolume of the feasible points", time.perf_counter() - t0))
    assert int(slow_mask.sum()) == len(fast.indices) and abs(slow_hv - fast.hypervolume) <= 1e-9 * max(1.0, slow_hv)

    print(f"Experiment: {n:,} trials ({len(done):,} completed), 3 objectives, {db.split('///')[0]} ({built}); "
          f"front: {len(fast.indices)} trials")
    print()
    print("| endpoint | median time | CPU time | JSON size | sent (gzip) |")
    print("|---|---:|---:|---:|---:|")
    for label, t, size, wire, cpu in rows:
        print(f"| {label} | {t * 1000:,.0f} ms | {cpu * 1000:,.0f} ms | {size / 1024:,.0f} KiB | {wire / 1024:,.0f} KiB |")
    print()
    print("| store query or Pareto computation (3 objectives) | time |")
    print("|---|---:|")
    for label, t in pareto_rows:
        print(f"| {label} | {t * 1000:,.{0 if t >= 0.01 else 2}f} ms |")
    print(json.dumps({"trials": n, "front": len(fast.indices)}))


if __name__ == "__main__":
    main()
