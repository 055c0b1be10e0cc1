"""Regression check on optimizer behaviour, through the real loop: nasctl on
BraninCurrin (in-process trials, SQLite store, TensorBoard files read back)
must find a front far better than random search in 14 trials.

The bound is loose on purpose (behaviour, not tuning): random search reaches
about 0.0-0.1 of the maximal hypervolume after 14 trials (10 seeds in
docs/benchmarks.md), the model-based loop 0.55-0.7.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.problems import get_problem, hv_trace
from benchmarks.sample_efficiency import run_nasctl

pytest.importorskip("moocore")


def test_loop_finds_a_good_branin_currin_front() -> None:
    problem = get_problem("branin_currin")
    res = run_nasctl(problem, seed=0, budget=14)
    values = res["values"]
    assert len(values) == 14 and all(set(problem.objectives) <= set(v) for v in values)
    assert res["optimizer"].startswith("botorch")
    assert res["methods"][:1] == ["CenterOfSearchSpace"] and res["methods"][-1] == "MBM"
    # the values the loop read back from TensorBoard are the function's values
    for p, v in zip(res["params"], values):
        exact = problem.evaluate(p)
        assert all(abs(exact[k] - v[k]) <= 1e-4 * max(1.0, abs(exact[k])) for k in problem.objectives)
    front = [v for v in values
             if all(v[k] < r for k, r in zip(problem.objectives, problem.ref))
             and not any(all(w[k] <= v[k] for k in problem.objectives) and w != v for w in values)]
    assert len(front) >= 3
    assert hv_trace(problem, values)[-1] >= 0.4


def test_extend_continues_a_stored_stock_ax_run(tmp_path: Path) -> None:
    """`--extend` (the stock-Ax column at 50 trials): a stored shorter run is continued,
    its trials kept as they were, and the next proposal comes from Ax's model step, not
    from one more quasi-random point."""
    import json

    from benchmarks.sample_efficiency import result_path, run_one

    run_one("branin_currin", "ax", 0, 6, tmp_path)
    path = result_path(tmp_path, "branin_currin", "ax", 0)
    stored = json.loads(path.read_text())
    assert stored["methods"] == ["CenterOfSearchSpace", "Sobol", "Sobol", "Sobol", "Sobol", "MBM"]
    run_one("branin_currin", "ax", 0, 8, tmp_path, extend=True)
    extended = json.loads(path.read_text())
    assert extended["extended_from"] == 6 and extended["extended_date"] == stored["date"]
    assert extended["budget"] == 8 and len(extended["values"]) == len(extended["params"]) == 8
    for key in ("params", "values", "gen_seconds", "gen_cpu_seconds", "methods"):
        assert extended[key][:6] == stored[key], key
    assert extended["methods"][6:] == ["MBM", "MBM"]
    assert extended["params"][6] not in extended["params"][:6]
    assert extended["hv"] == hv_trace(get_problem("branin_currin"), extended["values"])
    assert extended["hv"][:6] == stored["hv"]


def test_ablation_runs_each_variant_in_its_own_process(tmp_path: Path) -> None:
    """benchmarks/ablation.py: a variant changes one setting, only in its own runs."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, str(root / "benchmarks" / "ablation.py"), "--problem", "branin_currin",
           "--variants", "default,budget-2-16,no-repeat-guard", "--seeds", "0", "--budget", "7",
           "--out", str(tmp_path), "--jobs", "2"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=root)
    assert r.returncode == 0, r.stderr[-2000:]
    runs = {v: json.loads((tmp_path / "branin_currin" / v / "seed00.json").read_text())
            for v in ("default", "budget-2-16", "no-repeat-guard")}
    problem = get_problem("branin_currin")
    for run in runs.values():
        assert len(run["values"]) == 7 and run["methods"][-1] == "MBM"
        assert run["hv"] == hv_trace(problem, run["values"])
    # the same quasi-random start; a 2-restart, 16-sample search proposes other points than the default
    assert runs["budget-2-16"]["values"][:5] == runs["default"]["values"][:5]
    assert runs["budget-2-16"]["values"][5:] != runs["default"]["values"][5:]
    # the guard never fires on this seed's first trials: the same run as the default
    assert runs["no-repeat-guard"]["values"] == runs["default"]["values"]
    table = r.stdout.splitlines()
    assert table[0].startswith("| variant | seeds | HV@7 | better / worse than default at 7 |") and len(table) == 5
    assert table[3].startswith("| budget-2-16 | 1 |")
    # the per-seed difference from the first variant at the last checkpoint (one seed: no standard error)
    change = runs["budget-2-16"]["hv"][6] - runs["default"]["hv"][6]
    assert table[3].split(" | ")[4] == f"{change:+.4f}"
    assert table[2].split(" | ")[3:5] == ["", ""]  # the baseline against itself

    bad = subprocess.run([*cmd[:4], "--variants", "budget-x"], capture_output=True, text=True, cwd=root)
    assert bad.returncode == 2 and "--variants: unknown variant 'budget-x'" in bad.stderr.splitlines()[-1]

    # `a+b` makes both changes; an unknown part is refused
    from benchmarks.ablation import parse_variant

    both = parse_variant("budget-2-16+mc-64")
    assert [(m, a) for m, a, _ in both] == [("strategies", "acquisition_budget"), ("strategies", "mc_samples")]
    assert both[0][2](2, True) == {"num_restarts": 2, "raw_samples": 16} and both[1][2](2, True) == 64
    with pytest.raises(ValueError, match="unknown variant 'mc-x'"):
        parse_variant("budget-2-16+mc-x")


def test_ablation_report_gives_the_paired_difference_and_its_standard_error(tmp_path: Path) -> None:
    """The report pairs each variant's seeds with the baseline's: counts, mean difference, standard error."""
    import json
    import math
    import statistics

    from benchmarks.ablation import report

    base = {0: 0.50, 1: 0.60, 2: 0.70, 3: 0.90}
    other = {0: 0.55, 1: 0.58, 2: 0.80, 3: 0.90}  # differences +0.05, -0.02, +0.10 and a tie
    for variant, hv in (("default", base), ("mc-64", other)):
        for seed, last in hv.items():
            path = tmp_path / "dtlz2" / variant / f"seed{seed:02d}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"hv": [0.1] * 9 + [last], "gen_cpu_seconds": [0.2] * 10}))
    lines = report(tmp_path, "dtlz2", ["default", "mc-64"], [0, 1, 2, 3]).splitlines()
    assert lines[0].startswith("| variant | seeds | HV@10 | better / worse than default at 10 | difference at 10")
    cells = lines[3].split(" | ")
    diffs = [0.05, -0.02, 0.10, 0.0]
    se = statistics.stdev(diffs) / math.sqrt(4)
    assert cells[1:3] == ["4", f"{statistics.mean(other.values()):.3f}"]
    # the tie counts as neither better nor worse, and does count in the mean
    assert cells[3] == "2 / 1" and cells[4] == f"+{statistics.mean(diffs):.4f} ({se:.4f})"


def test_ablation_starts_no_new_run_after_a_failure(tmp_path: Path) -> None:
    """A failed run ends the command with status 1; runs not yet started are not started."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "branin_currin").mkdir()
    (tmp_path / "branin_currin" / "default").write_text("")  # a file where the run's folder goes
    r = subprocess.run([sys.executable, str(root / "benchmarks" / "ablation.py"), "--problem", "branin_currin",
                        "--variants", "default,no-repeat-guard", "--seeds", "0-1", "--budget", "6",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=600, cwd=root)
    assert r.returncode == 1 and r.stdout == ""
    assert "branin_currin default seed 0: failed" in r.stderr
    assert ": done" not in r.stderr and ": failed" not in r.stderr.replace("default seed 0: failed", "")
    assert not (tmp_path / "branin_currin" / "no-repeat-guard").exists()


def test_grid_ends_with_status_1_when_a_run_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A failed run is reported and the grid's exit status says so; the runs that finished are kept."""
    import json

    from benchmarks.sample_efficiency import main

    (tmp_path / "dtlz2").mkdir()
    (tmp_path / "dtlz2" / "ax").write_text("")  # a file where DTLZ2's stock-Ax runs go: they fail
    argv = ["--problems", "branin_currin,dtlz2", "--methods", "ax", "--seeds", "0", "--budget", "3",
            "--jobs", "2", "--out", str(tmp_path)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "dtlz2 ax seeds [0]: FAILED rc=1" in err and "branin_currin ax seeds [0]: ok" in err
    assert "1 run process(es) failed (above)" in err.splitlines()[-1]
    stored = tmp_path / "branin_currin" / "ax" / "seed00.json"
    assert len(json.loads(stored.read_text())["hv"]) == 3
    (tmp_path / "dtlz2" / "ax").unlink()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "dtlz2 ax seeds [0]: ok" in err and "branin_currin ax" not in err  # the finished run is kept
