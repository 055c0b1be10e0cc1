"""End to end: the digits demo run by nasctl vs the stock Ax Orchestrator + TorchXRunner.

    python benchmarks/e2e.py [--spec examples/digits_mlp.yaml] [--repeat 1] [--seeds 0]
                             [--max-trials N] [--out benchmarks/results/e2e.json]
                             [--only nasctl|reference] [--keep]

Both sides run the same experiment (search space, objectives, thresholds,
budget, parallelism, seed, Ax generation strategy) with the same trainer,
`benchmarks/trial_clock.py` (`nasctl.search_spaces.mlp` plus a clock file),
each as its own command, one after the other (the order alternates when
repeated): `nasctl run SPEC` on SQLite, and `benchmarks/ax_reference.py`.

Measured the same way for both:

- wall-clock: the whole command, process start to exit;
- utilisation: the share of the time from the first trial's launch to the
  last trial's end during which `parallelism` trial processes were running
  (launch = the trainer process's creation time from the kernel, end = the
  moment the process was gone; both from its clock file);
- outside the trials: command start -> first trial launch (imports, set-up,
  the first proposal), and last trial end -> command exit;
- end -> next launch: for every trial end that freed a slot still needed,
  the time until the next trial process was created (median and p95);
- final hypervolume: every completed trial's last logged values, read from
  its TensorBoard files with nasctl's reader, through `nasctl.pareto` with
  the spec's thresholds as the reference point.

Prints a markdown table with the targets (nasctl <= 0.6x the reference's
wall-clock at no lower hypervolume, utilisation >= 90%) and writes raw JSON.
The box's load averages are recorded before and after every run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TRAINER = ROOT / "benchmarks" / "trial_clock.py"
sys.path.insert(0, str(ROOT))

from benchmarks import args as argtypes  # noqa: E402
from nasctl.metrics import MetricSummary  # noqa: E402
from nasctl.metrics.tensorboard import read_scalars  # noqa: E402
from nasctl.pareto import compute_front  # noqa: E402
from nasctl.orchestration.jobs import preload_modules  # noqa: E402
from nasctl.spec import load_spec  # noqa: E402


def bench_spec(spec_path: str, max_trials: int | None, out: Path, cold: bool = False, seed: int | None = None) -> Path:
    """The demo spec with the clocked trainer as its trial script (warm-started
    by nasctl unless `cold`), with `optimizer.seed` set to `seed` if given."""
    data = yaml.safe_load(Path(spec_path).read_text())
    builtin_preload = [] if cold else list(preload_modules(load_spec(spec_path)))  # what the demo's trainer gets
    if seed is not None:
        data.setdefault("optimizer", {})["seed"] = seed
    data["name"] = "e2e-" + data["name"]
    # the built-in trainer's warm start (`trial.preload`), which a script gets only when asked for;
    # the reference starts every trial cold, as the stock TorchXRunner does
    data["trial"] = {"script": str(TRAINER), "args": data["trial"].get("args", {}),
                     "resources": data["trial"].get("resources", {}), "preload": builtin_preload}
    if max_trials:
        data["budget"]["max_trials"] = max_trials
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def ensure_extension() -> None:
    """Build BoTorch's fused kernel once before timing anything, so neither side pays for it."""
    from nasctl.optimizer.ax_optimizer import build_extension
    from nasctl.orchestration.control import prepare_orchestrator_process

    prepare_orchestrator_process()
    print("making sure BoTorch's fused kernel is built (~45 s the first time)...", file=sys.stderr)
    if not build_extension():
        print("BoTorch's fused kernel is not built: both sides will use its pure-Python path", file=sys.stderr)


def run_side(side: str, spec: Path, work: Path) -> dict[str, Any]:
    work.mkdir(parents=True)
    if side == "nasctl":
        cmd = [sys.executable, "-m", "nasctl", "run", str(spec), "--db", f"sqlite:///{work}/nasctl.db",
               "--workdir", str(work), "--json"]
    else:
        cmd = [sys.executable, str(ROOT / "benchmarks" / "ax_reference.py"), str(spec), str(work)]
    load_before = os.getloadavg()
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=str(work), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t1 = time.time()
    wall = t1 - t0
    (work / "stdout.log").write_text(proc.stdout)
    (work / "stderr.log").write_text(proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{side} failed with exit code {proc.returncode}; see {work}/stderr.log:\n"
                         + proc.stderr[-2000:])
    parsed = load_spec(spec)
    res = analyse(parsed, work)
    starts = [c["start"] for c in res["clocks"]]
    ends = [c["end"] for c in res["clocks"]]
    return {"side": side, "seed": parsed.optimizer.seed, "wall_seconds": wall, "load_before": load_before, "load_after": os.getloadavg(),
            "work_dir": str(work), "to_first_launch": min(starts) - t0, "after_last_end": t1 - max(ends), **res}


def analyse(spec: Any, work: Path) -> dict[str, Any]:
    par = spec.budget.parallelism
    clocks = []
    for path in sorted(work.rglob("clock.json")):
        c = json.loads(path.read_text())
        c["dir"] = str(path.parent)
        c["trained"] = c["end"]
        c["end"] = c.get("exit", c["end"])  # the process is gone (watcher), else training ended
        clocks.append(c)
    if not clocks:
        raise SystemExit(f"no trial clock files under {work}")
    first, last = min(c["start"] for c in clocks), max(c["end"] for c in clocks)
    # time with `par` trials running: sweep over start/end events
    events = sorted([(c["start"], 1) for c in clocks] + [(c["end"], -1) for c in clocks])
    full, running, prev = 0.0, 0, first
    for t, d in events:
        if running >= par:
            full += t - prev
        running += d
        prev = t
    starts = sorted(c["start"] for c in clocks)
    ends = sorted(c["end"] for c in clocks)
    # the k-th freed slot is taken by the (k + par)-th launch
    gaps = [starts[k + par] - ends[k] for k in range(len(starts) - par)]
    done = []
    for i, c in enumerate(sorted(clocks, key=lambda c: c["start"])):
        if c["returncode"] != 0:
            continue
        summary = MetricSummary()
        summary.update(read_scalars(os.path.join(c["dir"], "tb")))
        values = {}
        for m, o in spec.objectives.items():
            v = summary.value(m, o.value, o.maximize)
            if v is not None:
                values[m] = v
        if len(values) == len(spec.objectives):
            done.append((i, values))
    front = compute_front(done, spec.objectives, spec.parsed_constraints)
    return {
        "trials": len(clocks),
        "completed": len(done),
        "span_seconds": last - first,
        "utilisation": full / (last - first),
        "gap_median": statistics.median(gaps) if gaps else None,
        "gap_p95": _quantile(gaps, 0.95) if gaps else None,
        "gaps": gaps,
        "trial_seconds_median": statistics.median(c["end"] - c["start"] for c in clocks),
        "shutdown_seconds_median": statistics.median(c["end"] - c["trained"] for c in clocks),
        "hypervolume": front.hypervolume,
        "pareto_size": len(front.indices),
        "clocks": [{k: c[k] for k in ("start", "trained", "end", "returncode")} for c in clocks],
    }


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def table(runs: list[dict[str, Any]], par: int) -> str:
    def mean(side: str, key: str) -> float:
        return statistics.fmean(r[key] for r in runs if r["side"] == side)

    lines = [
        "| run | seed | order | wall-clock | to first launch | trial span | after last end | completed | utilisation "
        "| end -> next launch (median / p95) | median trial | final HV | load (before -> after) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for k, r in enumerate(runs):
        lines.append(
            f"| {r['side']} | {r.get('seed', '')} | {k + 1} | {r['wall_seconds']:.1f} s | {r['to_first_launch']:.1f} s | "
            f"{r['span_seconds']:.1f} s | {r['after_last_end']:.1f} s | "
            f"{r['completed']}/{r['trials']} | {100 * r['utilisation']:.1f}% | "
            f"{r['gap_median']:.2f} s / {r['gap_p95']:.2f} s | {r['trial_seconds_median']:.1f} s | "
            f"{r['hypervolume']:.1f} | {'/'.join(f'{x:.2f}' for x in r['load_before'])} -> "
            f"{'/'.join(f'{x:.2f}' for x in r['load_after'])} |"
        )
    if {r["side"] for r in runs} != {"nasctl", "reference"}:
        return "\n".join(lines)  # one side only: nothing to compare
    ratio = mean("nasctl", "wall_seconds") / mean("reference", "wall_seconds")
    hv_n, hv_r = mean("nasctl", "hypervolume"), mean("reference", "hypervolume")
    util = min(r["utilisation"] for r in runs if r["side"] == "nasctl")
    n = sum(r["side"] == "nasctl" for r in runs)
    ok = lambda b: "met" if b else "**MISSED**"  # noqa: E731
    lines += [
        "",
        "| target | measured | verdict |",
        "|---|---:|---|",
        f"| nasctl wall-clock <= 0.6x reference (means of {n} runs) | {ratio:.2f}x | {ok(ratio <= 0.6)} |",
        f"| final hypervolume no lower than reference (means) | {hv_n:.1f} vs {hv_r:.1f} | {ok(hv_n >= hv_r)} |",
        f"| utilisation ({par} trials running) >= 90% | {100 * util:.1f}% (worst nasctl run) | {ok(util >= 0.9)} |",
    ]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spec", default=str(ROOT / "examples" / "digits_mlp.yaml"))
    p.add_argument("--repeat", type=argtypes.positive_int, default=1,
                   help="pairs of runs per seed; the order alternates")
    p.add_argument("--seeds", type=argtypes.seeds, default=None,
                   help="comma-separated optimizer seeds, one pair (or --repeat pairs) each; default: the spec's")
    p.add_argument("--first", choices=["nasctl", "reference"], default="nasctl")
    p.add_argument("--max-trials", type=argtypes.positive_int, default=None)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "e2e.json"))
    p.add_argument("--keep", action="store_true", help="keep the trial directories")
    p.add_argument("--cold", action="store_true",
                   help="nasctl starts every trial cold too (trial.preload: []), as the reference does")
    p.add_argument("--only", choices=["nasctl", "reference"], default=None,
                   help="run one side only (no comparison; for tracing a side's time)")
    args = p.parse_args()
    if not Path(args.spec).is_file():
        p.error(f"--spec: no file {args.spec}; give the path of an experiment spec (default: examples/digits_mlp.yaml)")
    ensure_extension()
    tmp = Path(tempfile.mkdtemp(prefix="nasctl-e2e-"))
    seeds: list[int | None] = list(args.seeds) if args.seeds else [None]
    specs = {seed: bench_spec(args.spec, args.max_trials, tmp / f"spec{'' if seed is None else seed}.yaml",
                              cold=args.cold, seed=seed) for seed in seeds}
    par = load_spec(specs[seeds[0]]).budget.parallelism
    runs = []
    order = [args.first, "reference" if args.first == "nasctl" else "nasctl"]
    if args.only:
        order = [args.only]
    try:
        k = 0
        for seed, spec in specs.items():
            for _ in range(args.repeat):
                for side in order if k % 2 == 0 else order[::-1]:
                    print(f"running {side} (seed {seed}, pair {k + 1})...", file=sys.stderr, flush=True)
                    r = run_side(side, spec, tmp / f"{k}-{side}")
                    print(f"  {side}: {r['wall_seconds']:.1f} s, utilisation {100 * r['utilisation']:.1f}%, "
                          f"HV {r['hypervolume']:.1f}", file=sys.stderr, flush=True)
                    runs.append(r)
                k += 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(table(runs, par))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(), "cold": args.cold,
            "python": sys.version.split()[0], "spec": args.spec, "parallelism": par}
    Path(args.out).write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    print(f"\nraw results: {args.out}", file=sys.stderr)
    print(f"summary: {add_to_summary(SUMMARY, Path(args.out).stem, meta, runs)}", file=sys.stderr)


SUMMARY = ROOT / "benchmarks" / "results" / "e2e" / "summary.json"
"""The file git keeps: every command's runs without their per-trial lists (`add_to_summary`)."""
BULKY = ("gaps", "clocks", "work_dir", "load_before", "load_after")


def add_to_summary(path: Path, name: str, meta: dict[str, Any], runs: list[dict[str, Any]]) -> Path:
    """Store one command's runs in the summary under `name` (its --out file's stem):
    the per-run fields, without the per-trial clocks and gaps the raw file keeps."""
    from benchmarks.summary import merge_into

    return merge_into(path, name, {"meta": meta, "runs": [{k: v for k, v in r.items() if k not in BULKY}
                                                          for r in runs]})
