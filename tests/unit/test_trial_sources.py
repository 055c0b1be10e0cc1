"""trial.model / trial.dataset in the spec, and how build_request launches each
trial source; inactive conditional parameters never reach the trial's argv."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nasctl.errors import BadInputError, SpecError
from nasctl.orchestration.jobs import build_request
from nasctl.orchestration.running import read_trial_info
from nasctl.orchestration.control import check_spec_runnable
from nasctl.spec import load_spec, parse_spec
from tests.conftest import ROOT

MODEL_SPEC = """
name: m
search_space:
  width: {type: int, low: 4, high: 32}
  epochs: {type: fixed, value: 1}
objectives:
  val_acc: {goal: maximize}
budget: {max_trials: 2}
trial: {model: "pkg.mod:build", dataset: digits}
"""


def _write_model(folder: Path, body: str = "def build(params):\n    import torch\n    return None\n") -> None:
    (folder / "pkg").mkdir(parents=True, exist_ok=True)
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "pkg" / "mod.py").write_text(body)


def test_model_is_found_next_to_the_spec_without_importing_it(tmp_path: Path) -> None:
    _write_model(tmp_path, "import torch_that_does_not_exist\n\ndef build(params):\n    pass\n")
    (tmp_path / "s.yaml").write_text(MODEL_SPEC)
    spec = load_spec(tmp_path / "s.yaml")  # the module's imports are never executed
    assert spec.trial.source == "model" and spec.trial.model_path == str(tmp_path.resolve())
    req = build_request(spec, "m", str(tmp_path / "w"), 0, {"width": 8})
    assert req.args[:4] == ["-m", "nasctl.search_spaces.model", "--model", "pkg.mod:build"]
    assert req.args[4:] == ["--dataset", "digits", "--width", "8", "--epochs", "1"]
    assert req.env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path.resolve())


@pytest.mark.parametrize(
    ("setup", "trial", "expect"),
    [
        (False, '{model: "pkg.mod:build", dataset: digits}', "module pkg.mod not found"),
        (True, '{model: "pkg.mod:train", dataset: digits}', "defines no train()"),
        (True, '{model: "pkg.mod", dataset: digits}', "must look like pkg.module:function"),
        (True, '{model: "pkg.mod:build"}', "trial.model needs trial.dataset"),
        (True, '{model: "pkg.mod:build", script: x.py, dataset: digits}', "set exactly one of"),
        (True, "{script: x.py, dataset: digits}", "trial.dataset applies to the built-in trainer"),
        (True, '{model: "pkg.mod:build", dataset: digits, model_path: elsewhere}', "not found"),
    ],
)
def test_model_errors_are_one_line(tmp_path: Path, setup: bool, trial: str, expect: str) -> None:
    """The trial section's shape is refused when the file is loaded, the model's
    module and function when the spec is checked before launch (`ModelSource`)."""
    if setup:
        _write_model(tmp_path)
    (tmp_path / "x.py").write_text("")
    (tmp_path / "s.yaml").write_text(MODEL_SPEC.replace('{model: "pkg.mod:build", dataset: digits}', trial))
    with pytest.raises(SpecError) as e:
        check_spec_runnable(load_spec(tmp_path / "s.yaml"))
    assert expect in str(e.value) and "\n" not in str(e.value) and e.value.exit_code == 2


def test_user_code_is_looked_up_where_the_spec_file_put_it(tmp_path: Path) -> None:
    """Loading a file sets trial.model_path / trial.code_dir, and the check before
    launch looks the module up there; a spec parsed from text names code on the
    trial's own path, which is not checked."""
    function = MODEL_SPEC.replace('{model: "pkg.mod:build", dataset: digits}', '{function: "no_such_mod_here:f"}')
    for text, expect in ((MODEL_SPEC, "module pkg.mod not found"),
                         (function, "module 'no_such_mod_here' was not found next to the spec")):
        (tmp_path / "s.yaml").write_text(text)
        with pytest.raises(SpecError, match=expect):
            check_spec_runnable(load_spec(tmp_path / "s.yaml"))
        check_spec_runnable(parse_spec(text))


def test_unknown_dataset_and_metric_refused_before_launch() -> None:
    spec = parse_spec(MODEL_SPEC.replace("dataset: digits", "dataset: cifar"))
    with pytest.raises(BadInputError, match="trial.dataset 'cifar' is not a known dataset"):
        check_spec_runnable(spec)
    spec = parse_spec(MODEL_SPEC.replace("val_acc: {goal: maximize}", "top5: {goal: maximize}"))
    with pytest.raises(BadInputError, match="does not log metrics"):
        check_spec_runnable(spec)


CNN_SPEC = """
name: c
search_space:
  num_blocks: {type: int, low: 1, high: 3}
  channels_1: {type: int, low: 4, high: 16}
  channels_2: {type: int, low: 4, high: 16, when: {num_blocks: [2, 3]}}
  kernel_size_2: {type: choice, values: [3, 5], when: {num_blocks: [2, 3]}}
  channels_3: {type: int, low: 4, high: 16, when: {num_blocks: [3]}}
  precision: {type: choice, values: [fp32, bf16]}
objectives:
  val_acc: {goal: maximize}
  latency_ms: {goal: minimize}
  mflops: {goal: minimize}
budget: {max_trials: 2}
trial: {search_space: cnn, dataset: mnist1d}
"""


def test_inactive_cnn_parameters_never_reach_argv(tmp_path: Path) -> None:
    spec = parse_spec(CNN_SPEC)
    check_spec_runnable(spec)
    full = {"num_blocks": 1, "channels_1": 8, "channels_2": 9, "kernel_size_2": 5, "channels_3": 10, "precision": "bf16"}
    req = build_request(spec, "c", str(tmp_path), 0, full)
    assert req.args[:2] == ["-m", "nasctl.search_spaces.cnn"]
    flags = req.args[2::2]
    assert flags == ["--dataset", "--num_blocks", "--channels_1", "--precision"]
    req = build_request(spec, "c", str(tmp_path), 0, {**full, "num_blocks": 2})
    assert "--channels_2" in req.args and "--kernel_size_2" in req.args and "--channels_3" not in req.args


def test_cnn_builds_only_active_blocks() -> None:
    from nasctl.search_spaces import cnn

    args = cnn.parse_args(["--num_blocks", "1", "--channels_1", "8"])
    assert args.channels_2 is None and args.kernel_size_2 is None
    net = cnn.build_model(args, (1, 40), 10)
    convs = [m for m in net.modules() if type(m).__name__.startswith("Conv")]
    assert [type(c).__name__ for c in convs] == ["Conv1d"] and convs[0].out_channels == 8
    args = cnn.parse_args(["--num_blocks", "3", "--pooling", "avg"])
    net = cnn.build_model(args, (1, 8, 8), 10)
    convs = [m for m in net.modules() if type(m).__name__.startswith("Conv")]
    assert [c.out_channels for c in convs] == [8, 16, 32] and type(convs[0]).__name__ == "Conv2d"
    assert sum(type(m).__name__ == "AvgPool2d" for m in net.modules()) == 3


def test_trial_info_reading(tmp_path: Path) -> None:
    assert read_trial_info(str(tmp_path)) == (None, None)
    (tmp_path / "trial_info.json").write_text('{"precision": "bf16", "x": NaN}')
    assert read_trial_info(str(tmp_path)) == ({"precision": "bf16", "x": None}, None)
    (tmp_path / "trial_info.json").write_text("[1, 2]")
    info, problem = read_trial_info(str(tmp_path))
    assert info is None and problem is not None and "not a JSON object" in problem
    (tmp_path / "trial_info.json").write_text("{oops")
    info, problem = read_trial_info(str(tmp_path))
    assert info is None and problem is not None and "not valid JSON" in problem


def test_examples_parse() -> None:
    for name in ("cnn_mnist1d", "user_model", "user_script"):
        spec = load_spec(ROOT / "examples" / f"{name}.yaml")
        check_spec_runnable(spec)
    assert len(load_spec(ROOT / "examples" / "cnn_mnist1d.yaml").objectives) == 3
