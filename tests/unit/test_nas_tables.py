"""The shipped NAS tables (benchmarks/nas_tables.py): complete grids, sound curves,
and the `trial.function` contract of their look-ups."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from benchmarks import nas_tables
from benchmarks.problems import hypervolume

SHIPPED = ("mlp_digits", "cnn_mnist1d", "mlp_mnist1d", "cnn_digits")
"""The tables in benchmarks/data (see benchmarks/data/README.md)."""


def _first_config(name: str) -> dict[str, object]:
    return {p: values[0] for p, values in nas_tables.TABLES[name].grid.items()}


@pytest.mark.parametrize("name", SHIPPED)
def test_table_is_the_complete_grid_with_a_curve_per_row(name: str) -> None:
    spec = nas_tables.TABLES[name]
    rows = nas_tables.load_table(name)
    assert len(rows) >= 500
    assert set(rows) == set(itertools.product(*(range(len(v)) for v in spec.grid.values())))
    for row in rows.values():
        assert len(row.curve) == spec.max_epochs
        assert all(0.0 <= acc <= 1.0 for acc in row.curve)
        assert row.num_params >= 1 and row.latency_ms > 0 and row.seconds_per_epoch > 0


@pytest.mark.parametrize("name", SHIPPED)
def test_function_gives_the_metrics_after_the_given_epochs(name: str) -> None:
    spec = nas_tables.TABLES[name]
    fn = getattr(nas_tables, name)
    params = {p: values[-1] for p, values in spec.grid.items()}
    by_epoch = [fn({**params, "epochs": e}) for e in range(1, spec.max_epochs + 1)]
    assert all(set(m) == set(nas_tables.METRICS) for m in by_epoch)
    assert fn(params) == by_epoch[-1]  # epochs defaults to E
    assert [m["val_acc"] for m in by_epoch] == list(nas_tables.load_table(name)[
        nas_tables.config_key(spec, params)].curve)
    assert all(m["val_error"] == pytest.approx(1.0 - m["val_acc"]) for m in by_epoch)
    seconds = [m["train_seconds"] for m in by_epoch]
    assert all(a < b for a, b in zip(seconds, seconds[1:]))
    assert len({(m["num_params"], m["latency_ms"]) for m in by_epoch}) == 1
    # numbers as an optimizer may send them (a float for an int) find the same row
    as_floats = {p: float(v) if isinstance(v, int) else v for p, v in params.items()}
    assert fn({**as_floats, "epochs": 2.0}) == by_epoch[1]


def test_a_configuration_outside_the_grid_raises_naming_it() -> None:
    params = _first_config("mlp_digits")
    with pytest.raises(ValueError, match="hidden_size_1=7"):
        nas_tables.mlp_digits({**params, "hidden_size_1": 7})
    with pytest.raises(ValueError, match="lacks \\['dropout'\\]"):
        nas_tables.mlp_digits({p: v for p, v in params.items() if p != "dropout"})
    E = nas_tables.TABLES["mlp_digits"].max_epochs
    for epochs in (0, E + 1, 1.5):
        with pytest.raises(ValueError, match=f"epochs={epochs!r}"):
            nas_tables.mlp_digits({**params, "epochs": epochs})


@pytest.mark.parametrize("problem", [f"{name}{n}" for name in SHIPPED for n in ("", "_3obj")])
def test_problem_max_hv_is_that_of_the_whole_search_space(problem: str) -> None:
    p = nas_tables.get_problem(problem)
    space = p.search_space
    assert "epochs" not in space
    points = [
        [p.evaluate(dict(zip(space, values)))[k] for k in p.objectives]
        for values in itertools.product(*(s["values"] for s in space.values()))
    ]
    assert hypervolume(points, p.ref) == pytest.approx(p.max_hv, rel=1e-12)
    assert p.max_hv > 0 and p.function == f"benchmarks.nas_tables:{problem.removesuffix('_3obj')}"


def test_an_interrupted_append_is_dropped_on_resume() -> None:
    spec = dataclasses.replace(nas_tables.TABLES["mlp_digits"], max_epochs=2)
    config = next(iter(itertools.product(*spec.grid.values())))
    row = nas_tables.Row(682.0, 0.02, 0.05, (0.5, 0.75))
    line = ",".join(nas_tables.format_row(spec, config, row))
    text = ",".join(nas_tables.header(spec)) + "\n" + line + "\n" + line[:10]
    assert nas_tables.read_rows(spec, text) == {(0, 0, 0, 0, 0): row}
