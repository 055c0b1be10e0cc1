"""The shared trainer in process: precision switching (autocast really active in
training and in the latency measurement), fp16 refused on CPU, costs at step 0
and at the final step, trial_info.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nasctl.metrics.tensorboard import read_scalars
from nasctl.search_spaces import BUILTIN_SEARCH_SPACES, TRAINER_PARAMETERS
from tests.conftest import ROOT
from tests.unit import probe_model


def _flags(module: str) -> set[str]:
    import argparse
    import importlib

    mod = importlib.import_module(module)
    parser_args: set[str] = set()
    real = argparse.ArgumentParser.add_argument

    def spy(self: argparse.ArgumentParser, *a: str, **k: object) -> object:
        parser_args.update(x[2:] for x in a if x.startswith("--"))
        return real(self, *a, **k)

    argparse.ArgumentParser.add_argument = spy  # type: ignore[method-assign]
    try:
        mod.parse_args([])
    finally:
        argparse.ArgumentParser.add_argument = real  # type: ignore[method-assign]
    return parser_args - {"log_dir", "help"}


def test_registry_matches_the_trainers_arguments() -> None:
    for space in BUILTIN_SEARCH_SPACES.values():
        assert _flags(space.module) == set(space.parameters), space.name
        assert TRAINER_PARAMETERS <= space.parameters


def test_bf16_autocast_in_training_and_latency(tmp_path: Path) -> None:
    from nasctl.search_spaces import model

    probe_model.SEEN.clear()
    rc = model.main(["--model", "tests.unit.probe_model:build", "--dataset", "digits", "--precision", "bf16",
                     "--epochs", "1", "--latency_repeats", "3", "--latency_warmup", "1", "--latency_min_seconds", "0",
                     "--log_dir", str(tmp_path)])
    assert rc == 0
    training = [s for s in probe_model.SEEN if s[0]]
    inference = [s for s in probe_model.SEEN if not s[0]]
    assert training and all(s[1] and s[2] == "torch.bfloat16" for s in training)
    # FLOP count (fp32, 1 forward) + warm-up + timed runs + validation + final evaluation
    assert len(inference) >= 1 + 1 + 3
    assert all(s[1] and s[2] == "torch.bfloat16" for s in inference[1:5])  # warm-up and timed runs
    assert inference[0] == (False, False, "torch.float32")  # FLOPs are counted in fp32
    info = json.loads((tmp_path / "trial_info.json").read_text())
    assert info["precision"] == "bf16" and info["lightning_precision"] == "bf16-mixed"
    assert info["latency"]["precision"] == "bf16" and info["latency"]["repeats"] == 5  # at least one per block
    assert info["device"] == "cpu" and info["dataset"] == "digits" and info["input_shape"] == [1, 8, 8]
    assert info["torch"] and info["lightning"] and info["model"] == "tests.unit.probe_model:build"
    scalars = read_scalars(tmp_path)
    steps = {o.metric: sorted(x.step for x in scalars if x.metric == o.metric) for o in scalars}
    last = max(o.step for o in scalars)
    for m in ("num_params", "model_bytes", "mflops", "latency_ms"):
        assert steps[m] == [0, last], m  # known before training, and again at the final step
    assert last in steps["val_acc"] and len(steps["train_loss"]) == 1
    costs = {o.metric: o.value for o in scalars if o.step == last}
    assert costs["num_params"] == 64 * 10 + 10
    assert costs["mflops"] == pytest.approx(2 * 64 * 10 / 1e6, rel=1e-6)  # TensorBoard stores float32


def test_fp16_on_cpu_is_refused_with_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nasctl.search_spaces.mlp", "--precision", "fp16", "--log_dir", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "fp16" in lines[0] and "bf16" in lines[0]


def test_user_model_errors_exit_2(tmp_path: Path) -> None:
    from nasctl.search_spaces import model

    assert model.main(["--model", "tests.unit.probe_model:nothing", "--log_dir", str(tmp_path)]) == 2
    assert model.main(["--model", "no_such_pkg.mod:build", "--log_dir", str(tmp_path)]) == 2
    with pytest.raises(SystemExit):
        model.main(["--model", "tests.unit.probe_model:build", "--width"])
