"""Tabulated NAS problems made with nasctl's own search spaces and trainer.

Each table is the full grid of a discrete search space, every configuration
trained once (seed 0) by the built-in trainer (nasctl.search_spaces.mlp or
.cnn, run in-process through its `main`) on a dataset that ships in a package,
with its validation accuracy after every epoch 1..E (the learning curve), its
`num_params`, the trainer's `latency_ms` and its training wall seconds per
epoch. benchmarks/data/README.md describes the files and the machine.

Make a table (resumable: rows are appended to `<out>.partial` as they finish
and skipped when present; the `.csv.gz` is written once the grid is complete):

    OMP_NUM_THREADS=1 python benchmarks/nas_tables.py make --table mlp_digits
    OMP_NUM_THREADS=1 python benchmarks/nas_tables.py make --table cnn_mnist1d
    OMP_NUM_THREADS=1 python benchmarks/nas_tables.py make --table mlp_mnist1d
    OMP_NUM_THREADS=1 python benchmarks/nas_tables.py make --table cnn_digits

`python benchmarks/nas_tables.py show` prints each shipped table's size, E,
reference points and maximal hypervolumes.

Look-ups (`trial.function` targets): `benchmarks.nas_tables:mlp_digits`,
`:cnn_mnist1d`, `:mlp_mnist1d`, `:cnn_digits`. Each takes the configuration's
parameters (the table's `search_space`; other keys are ignored) plus an
optional integer `epochs` (1..E, default E) and returns, after that many
epochs: `val_acc`, `val_error` (1 - val_acc), `num_params`, `latency_ms` and
`train_seconds` (cumulative: epochs x the configuration's seconds per epoch).
A configuration outside the grid, or epochs outside 1..E, raises ValueError.
`get_problem("mlp_digits")` (val_error, num_params) and
`get_problem("mlp_digits_3obj")` (+ latency_ms) give benchmarks/problems.py
`Problem`s scored at E epochs. The fidelity parameter `epochs` is not in
`search_space`: a multi-fidelity benchmark adds it (`{type: int, low: 1,
high: E}`, E = `TABLES[name].max_epochs`).
"""

from __future__ import annotations

import argparse
import csv
import functools
import gzip
import importlib
import io
import itertools
import json
import math
import numbers
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# _front_ref_maxhv is problems.py's rule for a table's reference point: called, not restated
from benchmarks.problems import Problem, _front_ref_maxhv  # noqa: E402

DATA_DIR = ROOT / "benchmarks" / "data"
SEED = 0
# Latency of these tiny models is ~0.02-0.1 ms: 30 timed runs over at least
# 0.05 s (instead of the trainer's 50 runs over 0.25 s) keep it cheap.
LATENCY_ARGS = ("--latency_repeats", "30", "--latency_warmup", "10",
                "--latency_min_seconds", "0.05", "--latency_threads", "1")
COST_COLUMNS = ("num_params", "latency_ms", "seconds_per_epoch")
METRICS = ("val_acc", "val_error", "num_params", "latency_ms", "train_seconds")

Grid = dict[str, tuple[Any, ...]]


@dataclass(frozen=True)
class TableSpec:
    """One table: what is trained (`model` on `dataset`), on which grid, for how many epochs."""

    name: str
    title: str
    model: str  # the nasctl.search_spaces module that trains it: "mlp" or "cnn"
    dataset: str
    grid: Grid
    max_epochs: int
    fixed: tuple[str, ...] = ()  # trainer arguments shared by every row

    @property
    def path(self) -> Path:
        return DATA_DIR / f"{self.name}.csv.gz"

    def configs(self) -> list[tuple[Any, ...]]:
        """Every grid point, in the order rows are trained and stored."""
        return list(itertools.product(*self.grid.values()))

    def trainer_argv(self, config: Sequence[Any]) -> list[str]:
        """The trainer's arguments for one grid point. CNN grids have one
        `channels` (block k gets channels x 2^(k-1)) and one `kernel_size`."""
        p = dict(zip(self.grid, config))
        argv: list[str] = []
        for name, value in p.items():
            if self.model == "cnn" and name in ("channels", "kernel_size"):
                for k in range(1, int(p["num_blocks"]) + 1):
                    v = int(value) * 2 ** (k - 1) if name == "channels" else value
                    argv += [f"--{name}_{k}", str(v)]
            else:
                argv += [f"--{name}", str(value)]
        return argv + list(self.fixed)


_MLP_GRID: Grid = {
    "hidden_size_1": (8, 16, 32, 64, 128),
    "hidden_size_2": (8, 16, 32, 64, 128),
    "learning_rate": (0.0003, 0.001, 0.003, 0.01),
    "dropout": (0.0, 0.2, 0.4),
    "batch_size": (32, 128),
}
_CNN_GRID: Grid = {
    "num_blocks": (1, 2, 3),
    "channels": (4, 8, 16, 32),
    "kernel_size": (3, 5, 7),
    "pooling": ("max", "avg"),
    "classifier_width": (16, 64),
    "learning_rate": (0.0005, 0.001, 0.003, 0.01),
}
TABLES: dict[str, TableSpec] = {
    "mlp_digits": TableSpec("mlp_digits", "MLP on digits (8x8)", "mlp", "digits", _MLP_GRID, 27),
    "cnn_mnist1d": TableSpec("cnn_mnist1d", "CNN on MNIST-1D", "cnn", "mnist1d", _CNN_GRID, 9,
                             ("--batch_size", "64")),
    "mlp_mnist1d": TableSpec("mlp_mnist1d", "MLP on MNIST-1D", "mlp", "mnist1d", _MLP_GRID, 27),
    "cnn_digits": TableSpec("cnn_digits", "CNN on digits (8x8)", "cnn", "digits", _CNN_GRID, 9,
                            ("--batch_size", "64")),
}


class Row(NamedTuple):
    num_params: float
    latency_ms: float
    seconds_per_epoch: float
    curve: tuple[float, ...]  # val_acc after epochs 1..E


def header(spec: TableSpec) -> list[str]:
    return [*spec.grid, *COST_COLUMNS, *(f"val_acc_{e}" for e in range(1, spec.max_epochs + 1))]


def _index(spec: TableSpec, name: str, value: Any, params: Mapping[str, Any]) -> int:
    """Position of `value` in the grid's values of `name`: numbers compare as numbers
    (64.0 finds 64), strings as written (a choice, or a number read back from the CSV)."""
    values = spec.grid[name]
    for i, v in enumerate(values):
        if isinstance(value, str):
            if value == str(v):
                return i
        elif isinstance(value, numbers.Real) and not isinstance(value, bool) and not isinstance(v, str):
            if math.isclose(float(value), float(v), rel_tol=1e-9):
                return i
    raise ValueError(f"{spec.name}: configuration {dict(params)} is not in the table: "
                     f"{name}={value!r} is not one of {list(values)}")


def config_key(spec: TableSpec, params: Mapping[str, Any]) -> tuple[int, ...]:
    """The grid indices of `params` (extra keys are ignored).

    Raises:
        ValueError: a grid parameter is missing or has a value outside the grid.
    """
    missing = [n for n in spec.grid if n not in params]
    if missing:
        raise ValueError(f"{spec.name}: configuration {dict(params)} lacks {missing}; "
                         f"the table's parameters are {list(spec.grid)}")
    return tuple(_index(spec, n, params[n], params) for n in spec.grid)


def read_rows(spec: TableSpec, text: str) -> dict[tuple[int, ...], Row]:
    """Rows of a table's CSV text; a partial last line (an interrupted append) is dropped."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines.pop()
    reader = csv.reader(lines)
    if next(reader, None) not in (None, header(spec)):
        raise ValueError(f"{spec.name}: the file's columns are not {header(spec)}; remake it")
    n = len(spec.grid)
    rows = {}
    for rec in reader:
        key = config_key(spec, dict(zip(spec.grid, rec)))
        nums = [float(x) for x in rec[n:]]
        rows[key] = Row(nums[0], nums[1], nums[2], tuple(nums[3:]))
    return rows


@functools.lru_cache(maxsize=None)
def load_table(name: str) -> dict[tuple[int, ...], Row]:
    """The shipped table `name`, keyed by grid indices (read once).

    Raises:
        FileNotFoundError: the table was not made; the message names the command.
    """
    spec = TABLES[name]
    if not spec.path.is_file():
        raise FileNotFoundError(f"{spec.path} does not exist: "
                                f"run `python benchmarks/nas_tables.py make --table {name}`")
    with gzip.open(spec.path, "rt", newline="") as f:
        return read_rows(spec, f.read())


def lookup(name: str, params: Mapping[str, Any]) -> dict[str, float]:
    """The metrics of configuration `params` after `params["epochs"]` epochs (default E).

    Raises:
        ValueError: the configuration is not in the table, or epochs is not in 1..E.
    """
    spec = TABLES[name]
    epochs = params.get("epochs", spec.max_epochs)
    if isinstance(epochs, bool) or not float(epochs).is_integer() or not 1 <= int(epochs) <= spec.max_epochs:
        raise ValueError(f"{name}: epochs={epochs!r}, expected an integer in 1..{spec.max_epochs}")
    e = int(epochs)
    row = load_table(name).get(config_key(spec, params))
    if row is None:  # only a table file that lost rows
        raise ValueError(f"{name}: configuration {dict(params)} has no row in {spec.path}; remake the table")
    acc = row.curve[e - 1]
    return {"val_acc": acc, "val_error": 1.0 - acc, "num_params": row.num_params,
            "latency_ms": row.latency_ms, "train_seconds": e * row.seconds_per_epoch}


def mlp_digits(params: Mapping[str, Any]) -> dict[str, float]:
    return lookup("mlp_digits", params)


def cnn_mnist1d(params: Mapping[str, Any]) -> dict[str, float]:
    return lookup("cnn_mnist1d", params)


def mlp_mnist1d(params: Mapping[str, Any]) -> dict[str, float]:
    return lookup("mlp_mnist1d", params)


def cnn_digits(params: Mapping[str, Any]) -> dict[str, float]:
    return lookup("cnn_digits", params)


# --- problems --------------------------------------------------------------------------
def search_space(name: str) -> dict[str, dict[str, Any]]:
    """The nasctl `search_space` of table `name` (without `epochs`): one choice per grid parameter."""
    space: dict[str, dict[str, Any]] = {}
    for p, values in TABLES[name].grid.items():
        space[p] = {"type": "choice", "values": list(values)}
        if not isinstance(values[0], str):
            space[p]["ordered"] = True
    return space


def _objectives(n: int) -> tuple[str, ...]:
    return ("val_error", "num_params", "latency_ms")[:n]


def _split(problem: str) -> tuple[str, int]:
    """(table, number of objectives) of a problem name."""
    name, n = (problem.removesuffix("_3obj"), 3) if problem.endswith("_3obj") else (problem, 2)
    if name not in TABLES:
        raise KeyError(f"unknown problem {problem!r}; choose from {', '.join(PROBLEMS)}")
    return name, n


@functools.lru_cache(maxsize=None)
def get_problem(problem: str) -> Problem:
    """`<table>` (val_error, num_params) or `<table>_3obj` (+ latency_ms), scored at E epochs.

    The reference point is the nadir of the true Pareto front plus 10% of its
    range (benchmarks/problems.py's rule); max_hv is exact over the whole table."""
    name, n = _split(problem)
    spec = TABLES[name]
    objectives = _objectives(n)
    pts = np.array([[1.0 - r.curve[-1], r.num_params, r.latency_ms][:n] for r in load_table(name).values()])
    ref, max_hv = _front_ref_maxhv(pts)
    fn = globals()[name]
    return Problem(problem, f"{spec.title}, {spec.max_epochs} epochs, {n} obj", search_space(name), objectives,
                   ref, max_hv, fn, f"benchmarks.nas_tables:{name}")


PROBLEMS = [p for name in TABLES for p in (name, f"{name}_3obj")]


# --- generation --------------------------------------------------------------------------
def train_row(spec: TableSpec, config: Sequence[Any]) -> Row:
    """Train one grid point with the built-in trainer, in this process."""
    from nasctl.metrics.tensorboard import read_scalars

    module = importlib.import_module(f"nasctl.search_spaces.{spec.model}")
    E = spec.max_epochs
    with tempfile.TemporaryDirectory(prefix="nas_tables_") as log_dir:
        argv = [*spec.trainer_argv(config), "--epochs", str(E), "--seed", str(SEED), "--dataset", spec.dataset,
                *LATENCY_ARGS, "--log_dir", log_dir]
        rc = module.main(argv)
        if rc != 0:
            raise RuntimeError(f"{spec.name}: the trainer exited with {rc} for {argv}")
        with open(os.path.join(log_dir, "trial_info.json"), encoding="utf-8") as f:
            info = json.load(f)
        scalars = read_scalars(log_dir)
    acc = [o.value for o in sorted((o for o in scalars if o.metric == "val_acc"), key=lambda o: o.step)]
    costs = {o.metric: o.value for o in scalars if o.step == 0 and o.metric in ("num_params", "latency_ms")}
    if len(acc) != E + 1:  # one per epoch, then the final evaluation
        raise RuntimeError(f"{spec.name}: {len(acc)} val_acc values for {E} epochs ({argv})")
    return Row(costs["num_params"], costs["latency_ms"], info["train_seconds"] / E, tuple(acc[:E]))


def format_row(spec: TableSpec, config: Sequence[Any], row: Row) -> list[str]:
    return [*(str(v) for v in config), f"{row.num_params:.0f}", f"{row.latency_ms:.4g}",
            f"{row.seconds_per_epoch:.4g}", *(f"{a:.5f}" for a in row.curve)]


def make_table(spec: TableSpec, out: Path) -> None:
    """Train every grid point missing from `<out>.partial`, then write `out` (gzip CSV, grid order)."""
    import torch

    torch.set_num_threads(1)
    for var in ("NASCTL_CHECKPOINT_DIR", "NASCTL_RESUME_FROM"):
        os.environ.pop(var, None)
    partial = out.with_name(out.name + ".partial")
    done = read_rows(spec, partial.read_text(encoding="utf-8")) if partial.is_file() else {}
    configs = spec.configs()
    if not done:
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(",".join(header(spec)) + "\n", encoding="utf-8")
    elif not partial.read_text(encoding="utf-8").endswith("\n"):  # drop an interrupted append
        text = partial.read_text(encoding="utf-8")
        partial.write_text(text[: text.rfind("\n") + 1], encoding="utf-8")
    print(f"{spec.name}: {len(done)} of {len(configs)} rows already in {partial}", flush=True)
    if len(done) < len(configs):  # a first fit pays one-off setup costs: keep them out of the rows' times
        train_row(spec, configs[0])
    t_start = time.perf_counter()
    with open(partial, "a", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        for i, config in enumerate(configs):
            key = config_key(spec, dict(zip(spec.grid, config)))
            if key in done:
                continue
            t0 = time.perf_counter()
            row = done[key] = train_row(spec, config)
            writer.writerow(format_row(spec, config, row))
            f.flush()
            print(f"ROW {i + 1}/{len(configs)} {dict(zip(spec.grid, config))} acc={row.curve[-1]:.4f} "
                  f"params={row.num_params:.0f} s/epoch={row.seconds_per_epoch:.3f} "
                  f"config_s={time.perf_counter() - t0:.2f} total_s={time.perf_counter() - t_start:.0f}",
                  flush=True)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header(spec))
    for config in configs:
        writer.writerow(format_row(spec, config, done[config_key(spec, dict(zip(spec.grid, config)))]))
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as gz:
        gz.write(buf.getvalue().encode("utf-8"))
    os.replace(tmp, out)
    partial.unlink()
    print(f"{spec.name}: wrote {out} ({out.stat().st_size} bytes, {len(configs)} rows)", flush=True)


def show() -> None:
    for name, spec in TABLES.items():
        if not spec.path.is_file():
            print(f"{name}: not made")
            continue
        print(f"{name}: {len(load_table(name))} rows, E={spec.max_epochs}, {spec.path.stat().st_size} bytes")
        for problem in (name, f"{name}_3obj"):
            p = get_problem(problem)
            print(f"  {problem}: objectives {p.objectives}, ref {tuple(f'{v:.6g}' for v in p.ref)}, "
                  f"max_hv {p.max_hv:.6g}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    mk = sub.add_parser("make", help="train a table's missing rows (resumable)")
    mk.add_argument("--table", choices=list(TABLES), required=True)
    mk.add_argument("--out", type=Path, default=None, help="default: benchmarks/data/<table>.csv.gz")
    sub.add_parser("show", help="size, reference points and max_hv of each shipped table")
    args = p.parse_args(argv)
    if args.command == "make":
        spec = TABLES[args.table]
        make_table(spec, args.out or spec.path)
    else:
        show()
    return 0


if __name__ == "__main__":
    sys.exit(main())

