"""The benchmark commands' argument types: a bad value is refused before any run starts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks import args


def test_seeds_take_ranges_lists_and_both() -> None:
    assert args.seeds("0-3") == [0, 1, 2, 3]
    assert args.seeds("7") == [7]
    assert args.seeds("0,3,5") == [0, 3, 5]
    assert args.seeds("0-2, 5,1") == [0, 1, 2, 5]  # each seed once, in the order given


@pytest.mark.parametrize(("text", "message"), [
    ("x", "'x' is not a seed list; write seeds as 0-9"),
    ("1-x", "'1-x' is not a seed list"),
    ("", "'' is not a seed list"),
    ("5-2", "'5-2' is not a seed range; seeds are non-negative and a range runs low-high"),
    ("-3", "'-3' is not a seed list"),  # read as an empty low end
])
def test_bad_seeds_are_refused_with_the_fix(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        args.seeds(text)


def test_counts_must_be_at_least_one() -> None:
    assert args.positive_int("3") == 3
    assert args.positive_ints("20,44") == [20, 44]
    with pytest.raises(argparse.ArgumentTypeError, match="0 is too small; give at least 1"):
        args.positive_int("0")
    with pytest.raises(argparse.ArgumentTypeError, match="'2.5' is not a whole number"):
        args.positive_int("2.5")
    with pytest.raises(argparse.ArgumentTypeError, match="-1 is too small"):
        args.positive_ints("8,-1")


def test_names_come_from_the_choices() -> None:
    parse = args.names(["loop", "store"])
    assert parse("store,loop") == ["store", "loop"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown 'web', 'x'; choose from loop, store"):
        parse("loop,web,x")


def test_a_command_refuses_them_with_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.sample_efficiency import main

    for argv, message in ((["--jobs", "0"], "argument --jobs: 0 is too small; give at least 1"),
                          (["--problems", "dtlz3"], "argument --problems: unknown 'dtlz3'; choose from branin_currin"),
                          (["--seeds", "9-0"], "argument --seeds: '9-0' is not a seed range"),
                          (["--methods", "nasctl-ahead0"], "nasctl-ahead0 run on the simulated clock only: pass "
                                                           "--parallelism"),
                          (["--paired", "nasctl"], "--paired takes two methods, BASE,OTHER, and runs on the "
                                                   "simulated clock: pass --parallelism"),
                          (["--from-sequential", "--parallelism", "4"],
                           "--from-sequential makes parallelism-1 results only: pass --parallelism 1")):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err.splitlines()[-1]


def test_the_ablation_variants_at_parallelism() -> None:
    from benchmarks.ablation import parse_variant

    assert parse_variant("min-observed-5") == [("strategies", "MIN_OBSERVED_RESULTS", 5)]
    assert parse_variant("botorch-retry") == [("strategies", "RETRY_ON_OPTIMIZATION_WARNING", True)]
    assert parse_variant("cap-start") == [("strategies", "START_WITHIN_REQUEST", False)]
    for bad in ("min-observed-0", "min-observed-x"):
        with pytest.raises(ValueError, match="min-observed-N"):
            parse_variant(bad)


def test_positive_floats_are_finite_and_above_zero() -> None:
    assert args.positive_float("0.5") == 0.5
    for text, message in (("0", "0 is not above 0 and finite"), ("-2", "-2 is not above 0"),
                          ("nan", "nan is not above 0 and finite"), ("inf", "inf is not above 0 and finite"),
                          ("3s", "'3s' is not a number; give one above 0")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            args.positive_float(text)


@pytest.mark.parametrize(("argv", "message"), [
    (["--faults", "requeue,reboot"], "argument --faults: unknown 'reboot'; choose from requeue, node-down"),
    (["--repeats", "0"], "argument --repeats: 0 is too small; give at least 1"),
    (["--epoch-seconds", "0"], "argument --epoch-seconds: 0 is not above 0 and finite"),
    (["--epochs", "2"], "--epochs 2 is too few: a fault is made after the first epoch; give at least 3"),
    (["--epoch-seconds", "30"], "--epoch-seconds 30 leaves fewer than 3 epochs per one-minute allocation"),
    (["--time-limit-seconds", "60"], "--time-limit-seconds 60 fits inside one allocation (60-90 s)"),
])
def test_the_fault_benchmark_refuses_bad_arguments_before_any_run(
        argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.faults import main

    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written


def test_the_stock_strategy_variant_is_axs_default_seeded_by_the_spec() -> None:
    """`stock-strategy` swaps nasctl's generation strategy for the one Ax's `Client`
    chooses when given none: none of nasctl's generator settings, the spec's seed."""
    from benchmarks.ablation import parse_variant, stock_strategy
    from nasctl.spec import parse_spec

    ((module, attribute, build),) = parse_variant("stock-strategy")
    assert (module, attribute, build) == ("ax_optimizer", "build_strategy", stock_strategy)
    spec = parse_spec("""
name: s
search_space: {x: {type: float, low: 0, high: 1}}
objectives: {y: {goal: minimize}, z: {goal: minimize}}
budget: {max_trials: 10}
trial: {script: /bin/true}
optimizer: {seed: 7}
""")
    gs = build(spec, "botorch", None)
    specs = [g for node in gs.nodes_by_name.values() for g in node.generator_specs]
    model = [g for g in specs if g.generator_enum.value == "BoTorch"]
    sobol = [g for g in specs if g.generator_enum.value == "Sobol"]
    assert model and sobol
    assert all("acquisition_class" not in g.generator_kwargs and "transforms" not in g.generator_kwargs
               for g in model)
    assert all(g.generator_kwargs.get("seed") == 7 for g in sobol)
