"""The Ax adapter: candidates respect the spec's types and bounds; indices match ours."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nasctl.optimizer.ax_optimizer import AxOptimizer, ax_metric_names
from nasctl.spec import parse_spec

SPEC = """
name: opt
search_space:
  width: {type: int, low: 16, high: 128, log: true}
  lr: {type: float, low: 1.0e-4, high: 1.0e-1, log: true}
  dropout: {type: float, low: 0.0, high: 0.5}
  batch: {type: choice, values: [32, 64, 128], ordered: true}
  act: {type: choice, values: [relu, gelu]}
  depth: {type: choice, values: [1, 2]}
  width_2: {type: int, low: 8, high: 64, when: {depth: [2]}}
  epochs: {type: fixed, value: 3}
objectives:
  val/acc: {goal: maximize, threshold: 0.5}
  size: {goal: minimize, threshold: 1.0e6}
constraints: ["latency-ms <= 5"]
budget: {max_trials: 6, parallelism: 3}
trial: {script: /bin/true}
optimizer: {initial_trials: 6, seed: 3}
"""


def test_metric_names_are_made_safe_for_ax() -> None:
    spec = parse_spec(SPEC)
    assert ax_metric_names(spec) == {"val/acc": "val_acc", "size": "size", "latency-ms": "latency_ms"}


def test_candidates_respect_types_and_bounds() -> None:
    spec = parse_spec(SPEC)
    opt = AxOptimizer(spec)
    cands = opt.generate(3) + opt.generate(3)
    assert [c.index for c in cands] == list(range(6))
    seen = set()
    for c in cands:
        p = c.parameters
        assert set(p) == set(spec.tunable)  # fixed parameters never go to Ax
        assert isinstance(p["width"], int) and 16 <= p["width"] <= 128
        assert isinstance(p["lr"], float) and 1e-4 <= p["lr"] <= 1e-1
        assert 0.0 <= p["dropout"] <= 0.5
        assert p["batch"] in (32, 64, 128) and p["act"] in ("relu", "gelu") and p["depth"] in (1, 2)
        assert c.method in ("CenterOfSearchSpace", "Sobol")
        seen.add(tuple(sorted(p.items())))
    assert len(seen) == 6
    # outcomes in our metric names reach Ax under its safe names
    opt.complete(0, {"val/acc": 0.9, "size": 100.0, "latency-ms": 1.0, "extra": 3.0})
    opt.fail(1, "crashed")
    opt.abandon(2)
    data = opt.client._experiment.lookup_data().df  # noqa: SLF001
    assert set(data["metric_name"]) == {"val_acc", "size", "latency_ms"}
    assert math.isclose(float(data[data["metric_name"] == "val_acc"]["mean"].iloc[0]), 0.9)


def test_same_seed_same_start() -> None:
    spec = parse_spec(SPEC)
    a = [c.parameters for c in AxOptimizer(spec).generate(4)]
    b = [c.parameters for c in AxOptimizer(spec).generate(4)]
    assert a == b


def test_a_stale_kernel_build_lock_never_blocks_proposals(tmp_path: Path) -> None:
    """An orchestrator SIGKILLed while torch held its extension-build lock leaves the
    lock file behind; later orchestrators must still propose (they never JIT-build).
    The build directory is a copy of the installation's, where the kernel is
    built (ninja finds it up to date: its commands name no path of the
    directory), with the lock and without the builder's marks, so the builder
    started here deals with the stale lock without compiling again."""
    import shutil

    from nasctl.optimizer.fused_kernel import READY, build_extension, extension_dir

    ext = tmp_path / "ext" / "logei_fused_ext"
    built = extension_dir()
    if built is not None and build_extension():
        shutil.copytree(built, ext)  # modification times kept
        for mark in (READY, "builder.pid"):
            (ext / mark).unlink(missing_ok=True)
    else:
        ext.mkdir(parents=True)
    (ext / "lock").touch()
    code = f"""
from nasctl.spec import parse_spec
from nasctl.optimizer.ax_optimizer import AxOptimizer
spec = parse_spec('''{SPEC}'''.replace("initial_trials: 6", "initial_trials: 3"))
opt = AxOptimizer(spec)
for c in opt.generate(3):
    opt.complete(c.index, {{"val/acc": 0.5 + 0.1 * c.index, "size": 1000.0 * (c.index + 1), "latency-ms": 1.0}})
(c,) = opt.generate(1)
print("method", c.method)
"""
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "method MBM" in proc.stdout


def test_early_stopped_trials_teach_the_model_their_optimistic_values() -> None:
    """With every metric known, an early-stopped trial reaches Ax as EARLY_STOPPED with
    the values it was judged by, and the model fits with it; otherwise it is abandoned.
    A restored optimizer ends in the same state."""
    from ax.core.base_trial import TrialStatus as AxStatus

    from nasctl.optimizer.ax_optimizer import RestoredTrial

    spec = parse_spec(SPEC.replace("initial_trials: 6", "initial_trials: 4").replace("max_trials: 6", "max_trials: 8"))
    opt = AxOptimizer(spec)
    cands = opt.generate(4)
    outcomes = [(0.9, 1000.0), (0.7, 500.0), (0.8, 2000.0), (0.6, 300.0)]
    for k, (acc, size) in enumerate(outcomes):
        opt.complete(k, {"val/acc": acc, "size": size, "latency-ms": 1.0})
    while len(cands) < 6:  # the model may hand out fewer than asked for
        cands += opt.generate(6 - len(cands))
    opt.early_stop(4, {"val/acc": 0.55, "size": 3000.0, "latency-ms": 2.0})
    opt.early_stop(5, {"val/acc": 0.55})  # size unknown when it was stopped
    trials = opt.client._experiment.trials  # noqa: SLF001
    assert trials[4].status == AxStatus.EARLY_STOPPED and trials[5].status == AxStatus.ABANDONED
    data = opt.client._experiment.lookup_data().df  # noqa: SLF001
    row = data[(data.trial_index == 4) & (data.metric_name == "val_acc")]
    assert list(row["mean"]) == [0.55]
    assert 5 not in set(data.trial_index)
    nxt = opt.generate(1)  # the model fits with the early-stopped trial's data
    assert [c.index for c in nxt] == [6] and nxt[0].method not in ("Sobol", "CenterOfSearchSpace")

    restored = AxOptimizer(spec)
    stored = [RestoredTrial(k, cands[k].parameters, "COMPLETED", cands[k].method,
                            {"val/acc": a, "size": s, "latency-ms": 1.0}) for k, (a, s) in enumerate(outcomes)]
    stored += [RestoredTrial(4, cands[4].parameters, "EARLY_STOPPED", cands[4].method, {"val/acc": 0.31},
                             {"val/acc": 0.55, "size": 3000.0, "latency-ms": 2.0}),
               RestoredTrial(5, cands[5].parameters, "EARLY_STOPPED", cands[5].method, {"val/acc": 0.2}, None)]
    restored.restore(stored)
    again = restored.client._experiment.trials  # noqa: SLF001
    assert again[4].status == AxStatus.EARLY_STOPPED and again[5].status == AxStatus.ABANDONED


def test_build_extension_waits_for_a_builder_in_another_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While another live process is recorded as the kernel's builder, `build_extension`
    starts none of its own and waits for that one's kernel, built and marked ready (or
    gives up at its timeout)."""
    import threading

    from nasctl.optimizer.ax_optimizer import FUSED_EXTENSION, build_extension

    ext = tmp_path / "ext" / FUSED_EXTENSION
    ext.mkdir(parents=True)
    (ext / "builder.pid").write_text(str(os.getpid()))  # a live process: this one
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    assert build_extension(timeout=2) is False
    def built() -> None:  # what the builder does: the kernel file, then the mark
        (ext / f"{FUSED_EXTENSION}.so").touch()
        (ext / "ready").write_text("1")

    timer = threading.Timer(1.5, built)
    timer.start()
    try:
        assert build_extension(timeout=60) is True
    finally:
        timer.cancel()
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
    assert build_extension() is False  # nowhere to build


SMALL_START = """
name: start
search_space:
  x: {type: float, low: 0.0, high: 1.0}
  y: {type: float, low: 0.0, high: 1.0}
objectives:
  a: {goal: minimize}
  b: {goal: minimize}
budget: {max_trials: 20, parallelism: 6}
trial: {script: /bin/true}
optimizer: {initial_trials: 3, seed: 1}
"""


def test_a_failure_before_any_result_leaves_nothing_to_propose_until_one_is_in() -> None:
    """`initial_trials` below `parallelism`: every slot starts a quasi-random trial, and
    when one of them fails before any has a result, the model has nothing to fit.
    The optimizer then proposes nothing (the loop asks again when another trial ends;
    Ax raised DataRequiredError, which failed the experiment) and proposes from the
    model once a result is in."""
    opt = AxOptimizer(parse_spec(SMALL_START))
    start = opt.generate(6)
    assert len(start) == 6 and {c.method for c in start} <= {"CenterOfSearchSpace", "Sobol"}
    opt.fail(start[0].index, "crashed")
    assert opt.generate(1) == []
    opt.complete(start[1].index, {"a": 0.3, "b": 0.6})
    (model,) = opt.generate(1)
    assert model.method == "MBM" and model.index == 6
