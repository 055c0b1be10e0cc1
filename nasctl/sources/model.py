"""`trial.model: pkg.module:build`: a user model trained by the built-in trainer.

The trial runs `python -m nasctl.search_spaces.model --model pkg.module:build`
with the model's folder (`trial.model_path`, default the spec's) first on
PYTHONPATH.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from nasctl.errors import BadInputError, SpecError
from nasctl.search_spaces import TRAINER_METRICS, USER_MODEL_MODULE
from nasctl.sources.trainer import TrainerSource

if TYPE_CHECKING:
    from nasctl.spec import ExperimentSpec, TrialSpec


class ModelSource(TrainerSource):
    """A function `build(params)` returning a torch module, for the built-in trainer."""

    key = "model"

    def check_runnable(self, spec: ExperimentSpec) -> None:
        """The model's function is defined where the spec file says (when the spec
        was read as a file: `trial.model_path` is set), the trainer logs every
        metric the spec reads, and knows the dataset.

        Raises:
            SpecError: the model's module or function is missing, or an unknown dataset.
            BadInputError: a metric the trainer does not log.
        """
        assert spec.trial.model is not None
        if spec.trial.model_path is not None:
            check_model_target(spec.trial.model, Path(spec.trial.model_path))
        missing = [m for m in spec.metric_names if m not in TRAINER_METRICS]
        if missing:
            raise BadInputError(
                f"the built-in trainer of trial.model does not log metrics {missing}",
                f"it logs: {', '.join(TRAINER_METRICS)}",
            )
        super().check_runnable(spec)

    def module(self, trial: TrialSpec) -> str:
        return USER_MODEL_MODULE

    def module_args(self, trial: TrialSpec) -> list[str]:
        assert trial.model is not None
        return ["--model", trial.model]

    def code_dir(self, trial: TrialSpec) -> str | None:
        return trial.model_path


def check_model_target(target: str, folder: Path) -> None:
    """Check that `pkg.module:function` exists under `folder` (or on sys.path)
    without importing it (importing would pull torch into the CLI): the module
    file is found and parsed, and must define or import `function` at top level.

    Raises:
        SpecError: the module file or the function is missing, or the file does not parse.
    """
    module, _, func = target.partition(":")
    rel = Path(*module.split("."))
    bases = [folder, *(Path(x) for x in sys.path if x)]
    candidates = [c for base in bases for c in (base / rel.with_suffix(".py"), base / rel / "__init__.py")]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise SpecError(
            f"trial.model {target!r}: module {module} not found (looked for {rel}.py in {folder})",
            "put the module next to the spec or set trial.model_path to its folder",
        )
    try:
        tree = ast.parse(found.read_text(encoding="utf-8"), filename=str(found))
    except (SyntaxError, UnicodeDecodeError, OSError) as e:
        raise SpecError(f"trial.model {target!r}: {found} cannot be parsed: {e}", "fix the module") from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    if func not in names:
        raise SpecError(f"trial.model {target!r}: {found} defines no {func}()", f"define def {func}(params) there")
