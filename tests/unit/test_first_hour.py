"""What a new user tripped on in the CLI (issue 41): each case is the command as
they ran it and what it must say."""

from __future__ import annotations

import json
from pathlib import Path

from nasctl.store import Store
from nasctl.types import TrialStatus
from tests.conftest import run_cli
from tests.helpers.cli import EXAMPLE
from tests.helpers.service import TOKEN, Service
from tests.helpers.synthetic import add_synthetic


def test_pareto_says_how_many_met_the_thresholds_and_what_left_the_others_out(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/p.db"
    store = Store(url, create=True)
    exp = add_synthetic(store, "thr", 6)  # acc > 0.05 (threshold), lat <= 8 (constraint)
    # the most accurate trial, which misses the constraint; and one below the acc threshold
    for i, values in ((6, {"acc": 0.999, "size": 50.0, "lat": 9.5}), (7, {"acc": 0.01, "size": 10.0, "lat": 1.0})):
        t = store.add_trial(exp.id, i, {"x": 0.5, "act": "relu"}, "Sobol", f"thr-{i}", "")
        store.finish_trial(t.id, TrialStatus.COMPLETED, values)
    proc = run_cli("pareto", "thr", "--db", url)
    assert proc.returncode == 0, proc.stderr
    view = json.loads(run_cli("pareto", "thr", "--db", url, "--json").stdout)
    assert view["excluded"]["lat <= 8"][-1] == 6 and view["excluded"]["acc > 0.05"] == [7]
    assert view["feasible"] == view["completed"] - sum(len(v) for v in view["excluded"].values())
    out = " ".join(proc.stdout.split())
    assert f"{view['feasible']} of {view['completed']} completed trials met every threshold and constraint" in out
    assert "failed acc > 0.05 (#7)" in out and "#6)" in out.split("failed lat <= 8")[1]


def test_submit_without_the_right_token_names_the_cli_options(tmp_path: Path) -> None:
    svc = Service(f"sqlite:///{tmp_path / 's.db'}", tmp_path, {})
    svc.start()
    try:
        spec = tmp_path / "s.yaml"
        spec.write_text("name: s\n")
        for token, says in ((None, "pass --token TOKEN or set NASCTL_TOKEN"), ("wrong", "check --token / NASCTL_TOKEN")):
            proc = svc.submit(spec, token=token)
            err = proc.stderr.strip()
            assert proc.returncode == 2 and err.count("\n") == 0, (proc.returncode, err)
            assert "missing or wrong token" in err and says in err and "Authorization" not in err
        assert TOKEN  # the service has one: the refusal is about the request, not a read-only service
        import httpx

        # its pages offer resume: /api/info says it is the service (they no longer probe /api/service)
        assert httpx.get(svc.url + "/api/info").json()["service"] is True
    finally:
        svc.kill()


LOG_BOUND_SPEC = """
name: bounds
search_space:
  lr: {type: float, low: 1.0e-4, high: 3.0e-2, log: true}
  width: {type: int, low: 4, high: 64}
objectives: {acc: {goal: maximize}}
budget: {max_trials: 4}
trial: {script: train.py}
optimizer: {method: sobol, seed: 0}
"""


def test_a_log_scaled_bound_is_proposed_as_the_bound() -> None:
    """Ax proposes a log-scaled upper bound as 10 ** log10(high): 0.029999999999999995 for 3.0e-2."""
    import math

    from ax.core.arm import Arm
    from ax.core.generator_run import GeneratorRun

    from nasctl.optimizer.ax_optimizer import AxOptimizer
    from nasctl.sources.base import command_arguments
    from nasctl.spec import parse_spec

    at_bound = 10 ** math.log10(3.0e-2)
    assert at_bound != 3.0e-2

    class AtTheBound(AxOptimizer):  # the model proposes the bound, as from its log scale
        def _trial_run(self, run: object) -> object:
            return GeneratorRun(arms=[Arm(parameters={"lr": at_bound, "width": 64})], generation_node_name="MBM")

    cand = AtTheBound(parse_spec(LOG_BOUND_SPEC)).generate(1)[0]
    assert cand.parameters == {"lr": 3.0e-2, "width": 64}
    assert command_arguments(cand.parameters)[:2] == ["--lr", "0.03"]
    lr = parse_spec(LOG_BOUND_SPEC).search_space["lr"]
    assert lr.at_bound(1.0e-4 * (1 + 1e-12)) == 1.0e-4 and lr.at_bound(0.01) == 0.01  # type: ignore[union-attr]


def _in_a_terminal(*args: str, columns: int = 80) -> str:
    """`nasctl ARGS` with its stdout on a pseudo-terminal `columns` wide, as a user sees it."""
    import os
    import pty
    import re
    import subprocess
    import sys

    primary, secondary = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "dumb"}
    proc = subprocess.Popen([sys.executable, "-m", "nasctl", *args], stdout=secondary, stderr=subprocess.PIPE, env=env)
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:  # the terminal closed: the command is done
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", b"".join(chunks).decode())


def test_tables_in_an_80_column_terminal_cut_no_header_and_no_value(tmp_path: Path) -> None:
    from nasctl.spec import parse_spec, spec_to_dict

    url = f"sqlite:///{tmp_path}/w.db"
    store = Store(url, create=True)
    names = ["hidden_size_1", "hidden_size_2", "learning_rate", "dropout", "batch_size", "activation"]
    space = "\n".join(f"  {n}: {{type: float, low: 0.001, high: 1}}" for n in names)
    spec = parse_spec(f"name: wide\nsearch_space:\n{space}\nobjectives:\n  val_acc: {{goal: maximize}}\n"
                      "  num_params: {goal: minimize}\n  latency_ms: {goal: minimize}\n"
                      "budget: {max_trials: 3}\ntrial: {script: train.py}\n")
    exp = store.create_experiment("wide", spec_to_dict(spec), str(tmp_path))
    for i in range(3):
        t = store.add_trial(exp.id, i, {n: 0.0054321 + i for n in names}, "Sobol", f"wide-{i}", "")
        store.finish_trial(t.id, TrialStatus.COMPLETED, {"val_acc": 0.9 + i / 100, "num_params": 81234.0 + i,
                                                          "latency_ms": 0.0054321 * (i + 1)})
    for args in (("trials", "wide"), ("pareto", "wide"), ("ls",)):
        out = _in_a_terminal(*args, "--db", url)
        assert "…" not in out, out
        assert max(len(line) for line in out.splitlines()) <= 80, out
        for word in [*names, "val_acc", "num_params", "latency_ms"] if args[0] != "ls" else ["wide", "completed 3"]:
            assert word in out, (word, out)
    trials = _in_a_terminal("trials", "wide", "--db", url)
    assert "0.005432" in trials and "81234" in trials and "0.01086" in trials


CRASHING_TRIAL = """
import argparse, sys, time
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float)
args = p.parse_args()
print("loading the data", flush=True)
time.sleep(0.3)  # the output before the crash, as a real script's would be
raise ValueError(f"learning rate {args.lr} is not a number I take")
"""


def test_a_crashing_script_says_its_exception_and_stops_the_experiment_early(tmp_path: Path) -> None:
    """The reason carries the exception's last line, the log tail keeps the output before
    the traceback, and three trials that fail the same way, with none succeeded, end the
    experiment instead of spending budget.max_failures (issue 41, items 3 and 4)."""
    (tmp_path / "train.py").write_text(CRASHING_TRIAL)
    spec = tmp_path / "crash.yaml"
    spec.write_text("name: crash\nsearch_space:\n  lr: {type: float, low: 0.001, high: 0.1, log: true}\n"
                    "objectives: {val_acc: {goal: maximize}}\n"
                    "budget: {max_trials: 10, max_failures: 8}\ntrial: {script: train.py}\n"
                    "optimizer: {method: sobol, seed: 0}\n")
    url = f"sqlite:///{tmp_path}/c.db"
    run = run_cli("run", str(spec), "--db", url, "--workdir", str(tmp_path / "runs"), cwd=tmp_path, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    status = json.loads(run_cli("status", "crash", "--db", url, "--json").stdout)
    assert status["status"] == "FAILED" and status["trials"]["FAILED"] == 3, status
    assert "the last 3 trials all failed the same way and none has succeeded" in status["status_reason"]
    assert "budget.fail_fast: 0" in status["status_reason"]
    trials = json.loads(run_cli("trials", "crash", "--db", url, "--json", "--status", "FAILED").stdout)
    for t in trials:
        assert t["failure_reason"].startswith("job failed: exit code 1: ValueError: learning rate "), t["failure_reason"]
    detail = json.loads(run_cli("trials", "crash", "--trial", "0", "--db", url, "--json").stdout)
    tail = detail["log_tail"]
    assert tail.index("loading the data") < tail.index("Traceback") < tail.index("ValueError: learning rate")


def test_fail_fast_judges_a_run_by_its_repeated_failures() -> None:
    from nasctl.orchestration.ledger import TrialLedger, failure_signature, repeated_failure
    from nasctl.orchestration.outcomes import exception_line
    from nasctl.spec import parse_spec

    traceback = ("Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n    f()\n"
                 "KeyError: 'x'\n\nDuring handling of the above exception, another exception occurred:\n\n"
                 "Traceback (most recent call last):\n  File \"t.py\", line 5, in <module>\n"
                 "    raise ValueError('lr 0.3')\nValueError: lr 0.3\n")
    assert exception_line("epoch 1\n" + traceback + "shutting down\n") == "ValueError: lr 0.3"
    assert exception_line("exit code 1\n") is None and exception_line(None) is None
    same = [failure_signature("user", f"job failed: exit code 1: ValueError: lr {lr}") for lr in (0.3, 1e-3, 2.5e-05)]
    assert len(set(same)) == 1
    other = failure_signature("user", "metric 'val_acc' was never logged (logged: nothing)")
    assert repeated_failure(same, succeeded=0, n=3)
    assert not repeated_failure(same[:2], succeeded=0, n=3)  # not yet
    assert not repeated_failure(same, succeeded=1, n=3)  # a trial succeeded: the trials can work
    assert not repeated_failure([*same[:2], other], succeeded=0, n=3)  # failing in different ways
    assert not repeated_failure(same, succeeded=0, n=0)  # the opt-out
    base = "name: f\nsearch_space: {x: {type: float, low: 0, high: 1}}\nobjectives: {a: {goal: maximize}}\n"
    for fail_fast, stops in (("", True), (", fail_fast: 0", False)):
        ledger = TrialLedger(parse_spec(base + f"budget: {{max_trials: 9, max_failures: 8{fail_fast}}}\n"
                                        "trial: {script: t.py}\n"))
        for lr in (0.1, 0.2, 0.3):
            ledger.move(None, TrialStatus.FAILED)
            ledger.failed("user", f"job failed: exit code 1: ValueError: lr {lr}")
        why = ledger.failures_exceeded("f")
        assert (why is not None and why.endswith("(budget.fail_fast: 0 lets a script that fails now and then go on)")
                and "ValueError: lr 0.3" in why) if stops else why is None


def test_fail_fast_judges_only_the_failures_of_this_run_after_a_resume(tmp_path: Path) -> None:
    """Three trials failed the same way before a resume (the user has since fixed the
    script): the resumed run, with fail_fast: 3, goes on and judges its own trials."""
    from nasctl.orchestration.ledger import TrialLedger
    from nasctl.spec import parse_spec

    spec = parse_spec("name: f\nsearch_space: {x: {type: float, low: 0, high: 1}}\nobjectives: {a: {goal: maximize}}\n"
                      "budget: {max_trials: 9, max_failures: 8, fail_fast: 3}\ntrial: {script: t.py}\n")
    store = Store(f"sqlite:///{tmp_path / 'f.db'}", create=True)
    exp = store.create_experiment("f", {"name": "f"}, str(tmp_path / "f"))
    for i, lr in enumerate((0.1, 0.2, 0.3)):
        t = store.add_trial(exp.id, i, {"x": lr}, "Sobol", f"f-{i}", str(tmp_path / f"t{i}"))
        store.finish_trial(t.id, TrialStatus.FAILED, None, f"job failed: exit code 1: ValueError: lr {lr}",
                           failure_class="user")
    ledger = TrialLedger(spec)
    for t in store.list_trials(exp.id):
        ledger.load(t)
    assert ledger.counts[TrialStatus.FAILED.value] == 3 and ledger.left == 6
    assert ledger.failures_exceeded("f") is None  # not stopped at once: the new trials are judged
    for lr in (0.4, 0.5):
        ledger.move(None, TrialStatus.FAILED)
        ledger.failed("user", f"job failed: exit code 1: ValueError: lr {lr}")
    assert ledger.failures_exceeded("f") is None  # two of this run's own: not yet three
    ledger.move(None, TrialStatus.FAILED)
    ledger.failed("user", "job failed: exit code 1: ValueError: lr 0.6")
    assert "the last 3 trials all failed the same way" in (ledger.failures_exceeded("f") or "")
    store.close()


def test_dryrun_shows_the_path_the_trial_gets(tmp_path: Path) -> None:
    """TorchX's local scheduler puts the working folder before the launching process's PATH."""
    import os

    proc = run_cli("run", EXAMPLE, "--dryrun", "--json", cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    request = json.loads(proc.stdout)["request"]
    assert f"'PATH': '{tmp_path}{os.pathsep}/usr/bin:/bin'" in request, request
