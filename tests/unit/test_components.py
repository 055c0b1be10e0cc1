"""TorchX components as trials: how a component is called for a trial, what is
refused, and a real experiment whose trials are a builtin component's apps."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from nasctl.errors import BadInputError
from nasctl.orchestration.jobs import build_request
from nasctl.orchestration.control import check_spec_runnable
from nasctl.spec import load_spec
from tests.conftest import run_cli

TINY = Path(__file__).resolve().parents[1] / "web" / "scripts" / "tiny_trial.py"

COMPONENTS = '''
import torchx.specs as specs
from torchx.components import utils


def named(width: int, lr: float, log_dir: str, trial_index: int, act: str = "relu") -> specs.AppDef:
    """Every parameter by name.

    Args:
        width: width
        lr: learning rate
        log_dir: log dir
        trial_index: index
        act: activation
    """
    app = utils.python("--width", str(width), "--lr", repr(lr), "--act", act, script=SCRIPT,
                       name=f"t{trial_index}", cpu=2, memMB=300)
    app.roles[0].env["FROM_COMPONENT"] = log_dir
    return app


def two_roles(width: int) -> specs.AppDef:
    """Two roles.

    Args:
        width: width
    """
    app = utils.python("--width", str(width), c="print(1)")
    return specs.AppDef(name="x", roles=[app.roles[0], app.roles[0]])


def fixed_only(width: int) -> specs.AppDef:
    """Takes only width.

    Args:
        width: width
    """
    return utils.python(c="print(1)")
'''

SPEC = """
name: comp
search_space:
  width: {{type: int, low: 14, high: 40}}  # tiny_trial.py fails on purpose at 13
  lr:    {{type: float, low: 0.001, high: 0.02}}
objectives:
  val_acc:    {{goal: maximize}}
  num_params: {{goal: minimize}}
budget: {{max_trials: {n}, parallelism: 2}}
trial: {trial}
optimizer: {{method: sobol, seed: 1}}
"""


def _spec(tmp_path: Path, trial: str, n: int = 2) -> Path:
    (tmp_path / "comps.py").write_text(COMPONENTS.replace("SCRIPT", repr(str(TINY))))
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(n=n, trial=trial))
    return path


def test_file_component_gets_parameters_log_dir_and_index_by_name(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, "{component: comps.py:named}"))
    check_spec_runnable(spec)
    req = build_request(spec, "comp", str(tmp_path / "w"), 3, {"width": 7, "lr": 0.01})
    tb = str(tmp_path / "w" / "trials" / "trial_0003" / "tb")
    assert req.entrypoint == sys.executable  # "python" means the orchestrator's interpreter
    assert req.args[-6:] == ["--width", "7", "--lr", "0.01", "--act", "relu"]
    assert req.env["FROM_COMPONENT"] == tb and req.env["NASCTL_LOG_DIR"] == tb
    assert (req.cpu, req.mem_mb) == (2, 300)  # the component's resources apply
    assert req.env["OMP_NUM_THREADS"] == "2"


def test_builtin_component_passes_the_rest_as_program_arguments(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, f"{{component: utils.python, args: {{script: {json.dumps(str(TINY))}}}}}"))
    check_spec_runnable(spec)
    req = build_request(spec, "comp", str(tmp_path / "w"), 0, {"width": 9, "lr": 0.5})
    assert req.args[:2] == ["-u", str(TINY)] or str(TINY) in req.args
    assert req.args[-4:] == ["--width", "9", "--lr", "0.5"]


@pytest.mark.parametrize(
    ("trial", "message"),
    [
        ("{component: missing.py:named}", "does not exist"),
        ("{component: comps.py:nope}", "nope"),
        ("{component: no.such.builtin}", "not found"),
        ("{component: comps.py:fixed_only}", "takes no parameters ['lr']"),
    ],
)
def test_bad_components_are_refused_before_launch(tmp_path: Path, trial: str, message: str) -> None:
    spec = load_spec(_spec(tmp_path, trial))
    with pytest.raises(BadInputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_spec_runnable(spec)
    r = run_cli("run", str(tmp_path / "spec.yaml"), "--dryrun", "--db", f"sqlite:///{tmp_path / 'n.db'}")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "n.db").exists()


def test_component_with_two_roles_is_refused(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, "{component: comps.py:two_roles}").parent / "spec.yaml")
    spec = spec.model_copy(update={"search_space": {"width": spec.search_space["width"]}})
    with pytest.raises(BadInputError, match="2 roles"):
        build_request(spec, "comp", str(tmp_path / "w"), 0, {"width": 5})


@pytest.mark.e2e
def test_component_experiment_end_to_end(tmp_path: Path) -> None:
    path = _spec(tmp_path, "{component: comps.py:named}", n=3)
    db = f"sqlite:///{tmp_path / 'n.db'}"
    r = run_cli("run", str(path), "--db", db, "--workdir", str(tmp_path / "runs"), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    trials = json.loads(run_cli("trials", "comp", "--db", db, "--json").stdout)
    assert [t["status"] for t in trials] == ["COMPLETED"] * 3
    for t in trials:
        assert t["values"]["num_params"] == t["parameters"]["width"] * 65
