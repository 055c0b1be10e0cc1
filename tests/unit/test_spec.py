"""Spec validation: the example parses; malformed and hostile inputs give one-line errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from nasctl.errors import SpecError
from nasctl.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[2]

BASE = """
name: t
search_space:
  hidden_size_1: {type: int, low: 16, high: 128, log: true}
  learning_rate: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}
  batch_size: {type: choice, values: [32, 64], ordered: true}
  epochs: {type: fixed, value: 1}
objectives:
  val_acc: {goal: maximize, threshold: 0.8}
  num_params: {goal: minimize}
budget: {max_trials: 4}
trial: {search_space: mlp_digits}
"""


def test_example_spec_parses() -> None:
    spec = load_spec(ROOT / "examples" / "digits_mlp.yaml")
    assert spec.budget.max_trials == 48 and spec.budget.parallelism == 2
    assert list(spec.objectives) == ["val_acc", "num_params"]
    assert spec.objectives["num_params"].threshold == 80000
    assert spec.search_space["batch_size"].ordered is True  # type: ignore[union-attr]
    assert spec.initial_trials == 8


def test_defaults_and_views() -> None:
    spec = parse_spec(BASE)
    assert spec.runner.scheduler == "local_cwd"
    assert set(spec.tunable) == {"hidden_size_1", "learning_rate", "batch_size"}
    assert spec.fixed == {"epochs": 1}
    assert spec.metric_names == ["val_acc", "num_params"]
    assert spec.budget.max_failures == 5
    # default initial trials: 5, never above the budget
    assert spec.initial_trials == 4


@pytest.mark.parametrize(("max_trials", "parallelism", "initial"), [(50, 1, 5), (50, 8, 8), (6, 8, 6), (3, 1, 3)])
def test_default_initial_trials(max_trials: int, parallelism: int, initial: int) -> None:
    """5 quasi-random trials whatever the number of parameters, more when more trials start together."""
    spec = parse_spec(BASE.replace("max_trials: 4", f"max_trials: {max_trials}, parallelism: {parallelism}"))
    assert len(spec.tunable) == 3
    assert spec.initial_trials == initial


def _err(text: str) -> str:
    with pytest.raises(SpecError) as ei:
        parse_spec(text, source="s.yaml")
    msg = str(ei.value)
    assert "\n" not in msg, msg
    assert ei.value.exit_code == 2
    return msg


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ("low: 16, high: 128, log: true", "low: 128, high: 16", "search_space.hidden_size_1: low (128) must be below high (16)"),
        ("low: 1.0e-4, high: 1.0e-2, log: true", "low: 0.0, high: 1.0, log: true", "log scale needs low > 0"),
        ("low: 1.0e-4, high: 1.0e-2, log: true", "low: .nan, high: 1.0", "finite"),
        ("{type: int, low: 16", "{type: integer, low: 16", "search_space.hidden_size_1: type must be one of int, float, choice, fixed"),
        ("values: [32, 64]", "values: [32, '64']", "values must all be of one type"),
        ("values: [32, 64]", "values: [32, 32]", "values must be distinct"),
        ("values: [32, 64]", "values: [32]", "search_space.batch_size.values"),
        ("goal: maximize, threshold: 0.8", "goal: up", "objectives.val_acc.goal"),
        ("max_trials: 4", "max_trials: 0", "budget.max_trials"),
        ("max_trials: 4", "max_trials: 4, parallel: 2", "budget.parallel: unknown key"),
        ("name: t", "name: ../../etc", "name '../../etc' must be"),
        ("hidden_size_1:", "hidden-size:", "parameter name 'hidden-size'"),
        ("trial: {search_space: mlp_digits}", "trial: {search_space: mlp_digits, script: x.py}", "set exactly one of"),
        ("trial: {search_space: mlp_digits}", "trial: {}", "set exactly one of"),
    ],
)
def test_invalid_fields_are_named(old: str, new: str, expect: str) -> None:
    assert old in BASE
    msg = _err(BASE.replace(old, new, 1))
    assert expect in msg
    assert msg.startswith("invalid spec s.yaml:")


def test_missing_required_sections() -> None:
    msg = _err("name: t\nsearch_space: {x: {type: int, low: 0, high: 3}}\n")
    assert "objectives: Field required" in msg and "budget: Field required" in msg


def test_constraints() -> None:
    spec = parse_spec(BASE + 'constraints: ["latency_ms <= 5", "model_bytes>=1e3"]\n')
    assert [str(c) for c in spec.parsed_constraints] == ["latency_ms <= 5", "model_bytes >= 1000"]
    assert spec.metric_names == ["val_acc", "num_params", "latency_ms", "model_bytes"]
    assert "must look like 'metric <= number'" in _err(BASE + 'constraints: ["latency_ms < 5"]\n')
    assert "use objectives.val_acc.threshold" in _err(BASE + 'constraints: ["val_acc >= 0.5"]\n')


def test_conditional_parameters() -> None:
    text = BASE.replace(
        "  epochs: {type: fixed, value: 1}",
        "  depth: {type: choice, values: [1, 2]}\n  width_2: {type: int, low: 8, high: 64, when: {depth: [2]}}",
    )
    spec = parse_spec(text)
    assert spec.active_parameters({"depth": 1, "width_2": 9, "hidden_size_1": 20}) == {"depth": 1, "hidden_size_1": 20}
    assert spec.active_parameters({"depth": 2, "width_2": 9})["width_2"] == 9
    bad = text.replace("when: {depth: [2]}", "when: {nope: [2]}")
    assert "names unknown parameter 'nope'" in _err(bad)


def test_hostile_yaml() -> None:
    # Python object tags are refused by the safe loader
    assert "not valid YAML" in _err("!!python/object/apply:os.system ['echo pwned']\n")
    # alias expansion ("billion laughs") is refused outright
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n'
    assert "aliases are not allowed" in _err(bomb)
    # not a mapping
    assert "must be a YAML mapping" in _err("- just\n- a list\n")
    assert "must be a YAML mapping" in _err("")
    # broken syntax names the line
    assert "at line 3" in _err("name: t\nsearch_space: {x: [\n")
    # absurdly large input
    assert "larger than" in _err("name: t\n" + "#" * 2_000_000)
    # huge numbers stay finite or are rejected
    assert "finite" in _err(BASE.replace("threshold: 0.8", "threshold: 1e999"))


def test_early_stopping_section() -> None:
    assert parse_spec(BASE + "early_stopping: null\n").early_stopping is None
    spec = parse_spec(BASE + "early_stopping: {}\n")
    es = spec.early_stopping
    assert es is not None and es.metric is None  # chosen from the curves (see test_early_stopping.py)
    assert (es.progress, es.min_progress, es.min_fraction, es.min_completed, es.margin) == ("points", 2, 0.25, 3, 0.0)
    spec = parse_spec(BASE + "early_stopping: {metric: num_params, progress: steps, min_progress: 100, "
                             "min_fraction: 0.5, min_completed: 5, margin: 0.02, reduced_precision_grace: 3}\n")
    assert spec.early_stopping is not None
    assert spec.early_stopping.metric == "num_params" and spec.early_stopping.progress == "steps"
    example = load_spec(ROOT / "examples" / "digits_mlp_early_stopping.yaml")
    assert example.early_stopping is not None and example.early_stopping.metric == "val_acc"


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("{patience: 3}", "early_stopping.patience: unknown key"),
        ("{metric: val_loss}", "early_stopping.metric 'val_loss' is not an objective; use one of"),
        ("{min_fraction: 2}", "early_stopping.min_fraction: Input should be less than or equal to 1"),
        ("{min_completed: 0}", "early_stopping.min_completed: Input should be greater than or equal to 1"),
        ("{margin: -0.1}", "early_stopping.margin: Input should be greater than or equal to 0"),
        ("{progress: epochs}", "early_stopping.progress: Input should be 'points' or 'steps'"),
        ("{reduced_precision_grace: 0.5}", "early_stopping.reduced_precision_grace: Input should be greater"),
        ("true", "early_stopping: must be null or a mapping"),
        ("[val_acc]", "early_stopping: must be null or a mapping"),
    ],
)
def test_early_stopping_errors_are_one_line(section: str, expected: str) -> None:
    msg = _err(BASE + f"early_stopping: {section}\n")
    assert expected in msg, msg
    assert "\n" not in msg


def test_script_path_resolved_relative_to_spec(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(BASE.replace("trial: {search_space: mlp_digits}", "trial: {script: train.py}"))
    spec = load_spec(spec_file)
    assert spec.trial.script == str((tmp_path / "train.py").resolve())
    spec_file.write_text(BASE.replace("trial: {search_space: mlp_digits}", "trial: {script: missing.py}"))
    with pytest.raises(SpecError, match="trial.script missing.py does not exist"):
        load_spec(spec_file)


def test_missing_file() -> None:
    with pytest.raises(SpecError, match="does not exist"):
        load_spec("/nonexistent/spec.yaml")


def test_unknown_key_names_the_spec_reference_once() -> None:
    msg = _err(BASE.replace("max_trials: 4", "max_trials: 4, parallel: 2", 1))
    assert "budget.parallel: unknown key (check the spelling)" in msg
    assert msg.count("docs/spec.md") == 1, msg


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ("low: 16, high: 128, log: true", "low: 16, high: 16", "search_space.hidden_size_1: low (16) must be below high (16)"),
        ("low: 1.0e-4, high: 1.0e-2, log: true", "low: 0.01, high: 0.01",
         "search_space.learning_rate: low (0.01) must be below high (0.01)"),
    ],
)
def test_an_empty_range_is_refused(old: str, new: str, expect: str) -> None:
    """low == high leaves one value: a `fixed` parameter, not a range the optimizer can search."""
    assert old in BASE
    assert expect in _err(BASE.replace(old, new, 1))


@pytest.mark.parametrize("name", ["int", "float", "choice", "fixed"])
def test_parameters_named_like_a_parameter_type_stay_in_the_error_path(name: str) -> None:
    """pydantic adds the parameter type to an error's location; a parameter of that name is not dropped with it."""
    text = BASE.replace("  epochs: {type: fixed, value: 1}", f'  {name}: {{type: int, low: 0, high: "x"}}')
    assert f"search_space.{name}.high: Input should be a valid integer" in _err(text)
    text = BASE.replace("  epochs: {type: fixed, value: 1}", f"  {name}: {{type: integer}}")
    assert f"search_space.{name}: type must be one of int, float, choice, fixed" in _err(text)
    text = BASE.replace("num_params: {goal: minimize}", f"{name}: {{goal: down}}")
    assert f"objectives.{name}.goal: Input should be" in _err(text)


def test_stored_spec_errors_name_the_field() -> None:
    from nasctl.spec import spec_from_dict, spec_to_dict

    data = spec_to_dict(parse_spec(BASE))
    data["search_space"]["float"] = {"type": "float", "low": 0.0, "high": "x"}
    with pytest.raises(SpecError, match=r"stored in the database: search_space\.float\.high: Input should be"):
        spec_from_dict(data)


def test_overrides_merge_into_the_spec_and_are_validated_again(tmp_path: Path) -> None:
    """One merge for `nasctl run --name/--max-trials`, `nasctl.run(**overrides)` and submissions to `nasctl serve`."""
    from nasctl.errors import BadInputError
    from nasctl.spec import apply_overrides, spec_changes

    assert spec_changes("n2", max_trials=9, optimizer={"seed": 3}, budget={"parallelism": 2}) == {
        "name": "n2", "budget": {"max_trials": 9, "parallelism": 2}, "optimizer": {"seed": 3}}
    with pytest.raises(BadInputError, match="unknown override max_trails=3"):
        spec_changes(max_trails=3)
    spec = parse_spec(BASE + "optimizer: {seed: 7, method: sobol}\n")
    assert apply_overrides(spec, {}) is spec
    changed = apply_overrides(spec, spec_changes("n2", parallelism=2, optimizer={"seed": 3}))
    assert (changed.name, changed.budget.max_trials, changed.budget.parallelism) == ("n2", 4, 2)
    assert (changed.optimizer.seed, changed.optimizer.method) == (3, "sobol")  # merged, not replaced
    with pytest.raises(SpecError, match=r"^invalid spec s\.yaml: budget\.max_trials: "):
        apply_overrides(spec, spec_changes(max_trials=0), source="s.yaml")
    # relative paths in the changes resolve in the folder given, as in a spec file there
    (tmp_path / "train.py").write_text("")
    moved = apply_overrides(spec, {"trial": {"search_space": None, "script": "train.py"}}, folder=tmp_path)
    assert moved.trial.script == str((tmp_path / "train.py").resolve())
    with pytest.raises(SpecError, match="trial.script gone.py does not exist"):
        apply_overrides(spec, {"trial": {"search_space": None, "script": "gone.py"}}, folder=tmp_path)
    # a mapping not validated yet is validated once, with the changes in
    raw = {"name": "r", "search_space": {"x": {"type": "int", "low": 0, "high": 3}},
           "objectives": {"v": {"goal": "maximize"}}, "budget": {"max_trials": 0}, "trial": {"script": "train.py"}}
    assert apply_overrides(raw, spec_changes(max_trials=5), folder=tmp_path).budget.max_trials == 5
