"""The `inprocess` runner and the `trial.function` source: the runner contract
(as in test_runner_contract.py, with function trials instead of commands), the
shared trial entry point, and whole experiments through the real loop."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

from nasctl.errors import RunnerError, SpecError
from nasctl.metrics.tensorboard import read_scalars
from nasctl.orchestration.jobs import build_request
from nasctl.orchestration.control import check_spec_runnable
from nasctl.runners import JobRequest, JobState, SubmittedJob, get_runner
from nasctl.spec import load_spec, parse_spec
from tests.conftest import run_cli
from tests.helpers.runners import function_request, wait_terminal

FUNCS = '''
import threading, time
GATE = threading.Event()

def square(p):
    return {"y": (p["x"] - 0.25) ** 2, "label_len": len(p.get("label", ""))}

def broken(p):
    raise ValueError("bad point " + str(p["x"]))

def not_a_dict(p):
    return [1, 2]

def slow(p):
    GATE.wait(30)
    return {"y": 1.0}
'''


def test_contract_submit_poll_logs_and_json_only(tmp_path: Path, funcs: str) -> None:
    runner = get_runner("inprocess")
    ok = runner.submit(function_request(tmp_path, "ok", f"{funcs}:square", {"x": 0.75, "label": "ab"}))
    bad = runner.submit(function_request(tmp_path, "bad", f"{funcs}:broken", {"x": 3}))
    wrong = runner.submit(function_request(tmp_path, "wrong", f"{funcs}:not_a_dict", {"x": 3}))
    for job in (ok, bad, wrong):
        assert json.loads(json.dumps(job.metadata)) == job.metadata
    assert wait_terminal(runner, ok) == JobState.SUCCEEDED
    assert wait_terminal(runner, bad) == JobState.FAILED
    assert wait_terminal(runner, wrong) == JobState.FAILED
    assert "ValueError: bad point 3" in runner.log_tail(bad)
    assert "returned list" in runner.status([wrong])[wrong.handle].message  # type: ignore[operator]
    # the metrics are real TensorBoard events, read like any trial's
    obs = {o.metric: o.value for o in read_scalars(tmp_path / "ok" / "tb")}
    assert obs == {"y": pytest.approx(0.25), "label_len": 2.0}
    # a fresh runner (a restarted orchestrator) answers for finished trials from their files
    fresh = get_runner("inprocess")
    assert fresh.status([ok])[ok.handle].state == JobState.SUCCEEDED
    assert fresh.status([bad])[bad.handle].state == JobState.FAILED
    unknown = SubmittedJob("inprocess://never", {})
    assert fresh.status([unknown])[unknown.handle].state == JobState.UNKNOWN
    assert fresh.log_tail(unknown) == ""
    runner.close()


def test_runner_wakes_the_loop_when_a_call_ends(tmp_path: Path, funcs: str) -> None:
    """`notify_on_end`: the callback comes once per ended call (also a failed one),
    after its outcome is written, so the poll it triggers sees the job ended."""
    import importlib

    runner = get_runner("inprocess")
    seen: list[list[str]] = []  # the trials whose outcome was written, at each call
    woke = threading.Event()

    def wake() -> None:
        seen.append(sorted(n for n in ("a", "b") if (tmp_path / n / "inprocess.json").exists()))
        woke.set()

    assert runner.notify_on_end(wake) is True
    assert get_runner("local_cwd").notify_on_end(wake) is False  # its jobs end elsewhere: the loop polls
    jobs = []
    for name, target in (("a", "slow"), ("b", "broken")):
        woke.clear()
        jobs.append(runner.submit(function_request(tmp_path, name, f"{funcs}:{target}", {"x": 1})))
        if target == "slow":
            assert not woke.wait(0.3)  # nothing ended yet
            importlib.import_module(funcs).GATE.set()
        assert woke.wait(30)
    assert [runner.status([j])[j.handle].state for j in jobs] == [JobState.SUCCEEDED, JobState.FAILED]
    assert seen == [["a"], ["a", "b"]]
    runner.close()


def test_contract_cancel_find_and_no_double_run(tmp_path: Path, funcs: str) -> None:
    import importlib

    gate: threading.Event = importlib.import_module(funcs).GATE
    runner = get_runner("inprocess", {"workers": 2})
    req = function_request(tmp_path, "slow", f"{funcs}:slow", {"x": 1})
    assert runner.find(req) is None
    job = runner.submit(req)
    again = runner.submit(req)  # a second submission returns the first job, it does not run twice
    assert again.handle == job.handle
    runner.cancel(job)
    assert runner.status([job])[job.handle].state == JobState.CANCELLED
    runner.cancel(job)  # idempotent
    # a trial whose orchestrator went away mid-call is reported failed, not left hanging
    assert get_runner("inprocess").status([job])[job.handle].state == JobState.FAILED
    gate.set()
    runner.close()
    assert runner.find(req) is not None


def test_runner_refuses_other_trials_and_bad_cfg(tmp_path: Path) -> None:
    runner = get_runner("inprocess")
    req = JobRequest("cmd", sys.executable, ["-c", "print(1)"], {"NASCTL_LOG_DIR": str(tmp_path)}, str(tmp_path))
    with pytest.raises(RunnerError, match="only trial.function"):
        runner.submit(req)
    with pytest.raises(SpecError, match="does not take"):
        get_runner("inprocess", {"threads": 3})
    with pytest.raises(SpecError, match="workers"):
        get_runner("inprocess", {"workers": 0})


SPEC = """
name: fn-{name}
search_space:
  x: {{type: float, low: 0, high: 1}}
  label: {{type: choice, values: ["1", "22"]}}
objectives:
  y: {{goal: minimize, threshold: 1}}
  label_len: {{goal: minimize, threshold: 3}}
budget: {{max_trials: {n}, parallelism: 2}}
trial: {{function: "{target}"}}
runner: {{scheduler: {scheduler}}}
optimizer: {{method: sobol}}
"""


def test_function_spec_validation(tmp_path: Path, funcs: str) -> None:
    with pytest.raises(SpecError, match="exactly one of"):
        parse_spec(SPEC.format(name="a", n=2, target=f"{funcs}:square", scheduler="inprocess")
                   .replace("trial: {", "trial: {script: x.py, "))
    with pytest.raises(SpecError, match="package.module:function"):
        parse_spec(SPEC.format(name="a", n=2, target="no colon here", scheduler="inprocess"))
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(name="a", n=2, target="nasctl_missing_module_xyz:f", scheduler="inprocess"))
    missing = load_spec(path)  # the function's module is looked up before anything runs, where run/submit check
    with pytest.raises(SpecError, match="module 'nasctl_missing_module_xyz' was not found"):
        check_spec_runnable(missing)
    path.write_text(SPEC.format(name="a", n=2, target=f"{funcs}:square", scheduler="inprocess"))
    spec = load_spec(path)
    assert spec.trial.code_dir == str(tmp_path)
    req = build_request(spec, "fn-a", str(tmp_path / "w"), 0, {"x": 0.5, "label": "1"})
    # a choice "1" reaches the function as the string "1", not the number 1
    assert json.loads(req.args[-1]) == {"x": 0.5, "label": "1"}
    assert req.env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)


@pytest.mark.e2e
@pytest.mark.parametrize("scheduler", ["inprocess", "local_cwd"])
def test_function_experiment_end_to_end(tmp_path: Path, funcs: str, scheduler: str) -> None:
    """The same spec through the real loop, in the orchestrator's process and as
    trial processes through TorchX: same parameters in, same metrics out."""
    n = 6 if scheduler == "inprocess" else 2
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(name=scheduler.replace("_", "-"), n=n, target=f"{funcs}:square", scheduler=scheduler))
    db = f"sqlite:///{tmp_path / 'n.db'}"
    r = run_cli("run", str(path), "--db", db, "--workdir", str(tmp_path / "runs"), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    r = run_cli("trials", f"fn-{scheduler.replace('_', '-')}", "--db", db, "--json")
    trials = json.loads(r.stdout)
    assert len(trials) == n and all(t["status"] == "COMPLETED" for t in trials)
    for t in trials:
        p = t["parameters"]
        assert t["values"]["y"] == pytest.approx((p["x"] - 0.25) ** 2, rel=1e-6)
        assert t["values"]["label_len"] == len(p["label"])


def test_inprocess_needs_a_function(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    script = tmp_path / "t.py"
    script.write_text("print(1)\n")
    path.write_text(SPEC.format(name="s", n=2, target="x:y", scheduler="inprocess")
                    .replace('function: "x:y"', f"script: {script}"))
    r = run_cli("run", str(path), "--db", f"sqlite:///{tmp_path / 'n.db'}", "--dryrun")
    assert r.returncode == 2 and "inprocess runs only trial.function" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1

