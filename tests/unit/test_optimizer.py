"""The Ax adapter: candidates respect the spec's types and bounds; indices match ours."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

from nasctl.orchestration.optimizer import AxOptimizer, ax_metric_names
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
    lock file behind; later orchestrators must still propose (they never JIT-build)."""
    ext = tmp_path / "ext" / "logei_fused_ext"
    ext.mkdir(parents=True)
    (ext / "lock").touch()
    code = f"""
from nasctl.spec import parse_spec
from nasctl.orchestration.optimizer import AxOptimizer
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
