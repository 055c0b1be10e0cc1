"""The trial-source contract (nasctl.sources.base.TrialSource, with the spec's
part of each source in nasctl.spec.SOURCE_KEYS), run against every registered
source. A new source joins by adding a spec that runs and one that cannot to
EXAMPLES; the suite fails until it does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nasctl.errors import BadInputError, NasctlError
from nasctl.orchestration.control import check_spec_runnable
from nasctl.orchestration.jobs import build_request, job_name, preload_modules, trial_dir
from nasctl.runners.base import JobRequest
from nasctl.sources import TRIAL_SOURCES, get_source, source_of
from nasctl.sources.base import TrialSource
from nasctl.spec import SOURCE_KEYS, SOURCE_OPTIONS, ExperimentSpec, TrialSpec, load_spec, parse_spec, parse_spec_in

COMPONENT = '''
import torchx.specs as specs
from torchx.components import utils


def named(width: int, log_dir: str, trial_index: int) -> specs.AppDef:
    """Every parameter by name.

    Args:
        width: width
        log_dir: log dir
        trial_index: index
    """
    return utils.python("--width", str(width), c="print(1)", name=f"t{trial_index}", cpu=2, memMB=300)
'''

FILES = {
    "train.py": "print('a trial')\n",
    "pkg/__init__.py": "",
    "pkg/mod.py": "def build(params):\n    import torch\n    return torch.nn.Linear(2, 2)\n",
    "contract_fn.py": "def f(p):\n    return {'val_acc': 1.0}\n",
    "comps.py": COMPONENT,
}

# per source: (a trial section that runs, one the source refuses at load or before launch)
EXAMPLES: dict[str, tuple[str, str]] = {
    "search_space": ("{search_space: mlp_digits}", "{search_space: no_such_space}"),
    "script": ("{script: train.py}", "{script: missing.py}"),
    "model": ('{model: "pkg.mod:build", dataset: digits}', '{model: "pkg.mod:missing", dataset: digits}'),
    "function": ('{function: "contract_fn:f"}', '{function: "no_such_module_here:f"}'),
    "component": ('{component: "comps.py:named"}', '{component: "comps.py:missing"}'),
}

SPEC = """
name: contract
search_space:
  {param}: {{type: int, low: 16, high: 64}}
  learning_rate: {{type: float, low: 0.001, high: 0.1}}
objectives:
  val_acc: {{goal: maximize}}
budget: {{max_trials: 2}}
trial: {trial}
"""


def _load(folder: Path, key: str, trial: str) -> ExperimentSpec:
    for name, text in FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    # a component takes the names its signature declares; the built-in space, its own
    param = {"search_space": "hidden_size_1", "component": "width"}.get(key, "width")
    text = SPEC.format(param=param, trial=trial)
    if key == "component":
        text = text.replace("  learning_rate: {type: float, low: 0.001, high: 0.1}\n", "")
    path = folder / f"{key}.yaml"
    path.write_text(text)
    return load_spec(path)


@pytest.fixture(params=sorted(TRIAL_SOURCES))
def key(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_every_source_has_examples_and_its_part_of_the_spec() -> None:
    assert sorted(EXAMPLES) == sorted(TRIAL_SOURCES)
    assert list(SOURCE_KEYS) == list(TRIAL_SOURCES), "nasctl.spec.SOURCE_KEYS and nasctl.sources name the same keys"


def test_registry_entry(key: str) -> None:
    source = get_source(key)
    assert isinstance(source, TrialSource) and source.key == key and get_source(key) is source
    assert key in TrialSpec.model_fields, f"TrialSpec needs a field {key!r} for the source"
    described = SOURCE_KEYS[key]
    assert described.description and described.options <= SOURCE_OPTIONS
    message = str(pytest.raises(NasctlError, parse_spec, SPEC.format(param="w", trial="{}")).value)
    assert f"trial.{key} ({described.description})" in message


def test_a_runnable_spec_builds_its_request(key: str, tmp_path: Path) -> None:
    spec = _load(tmp_path, key, EXAMPLES[key][0])
    assert spec.trial.source == key and source_of(spec.trial) is get_source(key)
    check_spec_runnable(spec)
    params = {name: 32 if name != "learning_rate" else 0.01 for name in spec.search_space}
    work = str(tmp_path / "work")
    req = build_request(spec, "contract", work, 7, params)
    assert isinstance(req, JobRequest)
    assert req == build_request(spec, "contract", work, 7, params)  # deterministic
    assert req.name == job_name("contract", 7) and req.trial_dir == trial_dir(work, 7)
    assert req.env["NASCTL_EXPERIMENT"] == "contract" and req.env["NASCTL_TRIAL_ID"] == "7"
    assert req.env["NASCTL_LOG_DIR"] == str(Path(trial_dir(work, 7), "tb"))
    assert all(isinstance(a, str) for a in [req.entrypoint, *req.args, *req.env.values()])
    assert req.cpu >= 1 and req.mem_mb > 0 and req.gpu >= 0
    preload = preload_modules(spec)
    assert isinstance(preload, tuple) and all(isinstance(m, str) for m in preload)
    assert req.preload == (preload if get_source(key).uses_trial_resources else ())


def test_a_loaded_spec_loads_to_itself(key: str, tmp_path: Path) -> None:
    """Resolving the paths of a resolved spec changes nothing (a stored spec, overrides on a loaded one)."""
    spec = _load(tmp_path, key, EXAMPLES[key][0])
    assert parse_spec_in("{}", tmp_path, overrides=spec.model_dump(mode="json")) == spec


def test_a_spec_that_cannot_run_is_refused_with_a_hint(key: str, tmp_path: Path) -> None:
    with pytest.raises(BadInputError) as e:
        check_spec_runnable(_load(tmp_path, key, EXAMPLES[key][1]))
    assert "\n" not in e.value.message and e.value.hint and e.value.exit_code == 2


def test_options_the_source_does_not_take_are_refused(key: str, tmp_path: Path) -> None:
    values: dict[str, Any] = {"model_path": ".", "dataset": "digits", "preload": ["json"]}
    for option in sorted(SOURCE_OPTIONS - SOURCE_KEYS[key].options):
        trial = EXAMPLES[key][0].replace("}", f", {option}: {values[option]!r}}}".replace("'", '"'))
        with pytest.raises(BadInputError, match=f"trial.{option} applies"):
            _load(tmp_path, key, trial)


def test_preload_follows_the_spec(key: str, tmp_path: Path) -> None:
    source = get_source(key)
    if "preload" not in SOURCE_KEYS[key].options:
        assert source.preload(_load(tmp_path, key, EXAMPLES[key][0]).trial) == ()
        return
    cold = _load(tmp_path, key, EXAMPLES[key][0].replace("}", ", preload: false}"))
    assert source.preload(cold.trial) == ()
    chosen = _load(tmp_path, key, EXAMPLES[key][0].replace("}", ", preload: [json, email.utils]}"))
    assert source.preload(chosen.trial) == ("json", "email.utils")
