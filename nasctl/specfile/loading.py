"""YAML text and files -> a validated `ExperimentSpec`, with every validation
error on one line; the spec as the JSON the store keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from nasctl.errors import SpecError
from nasctl.specfile.experiment import ExperimentSpec
from nasctl.specfile.trial import SOURCE_KEYS

MAX_SPEC_BYTES = 1_000_000

#: Where a spec error sends the user: the reference of every key.
SPEC_DOCS_HINT = "see the spec format in docs/spec.md"


_UNION_MEMBERS = frozenset({"int", "float", "choice", "fixed"})
"""Names pydantic adds to an error's location for the union it went into: a
parameter's `type` tag, or the int and float members of a scalar."""


def _error_path(loc: tuple[int | str, ...], data: Any) -> str:
    """An error location as the spec's key path (`search_space.lr.high`).

    pydantic inserts the union member it validated against into the location
    (`search_space.lr.float.high`). Such a name is dropped only where the spec
    has no key of that name, so a parameter or objective called `int` or
    `float` stays in the path."""
    keys: list[str] = []
    node = data
    for x in loc:
        if isinstance(node, dict) and x in node:
            node = node[x]
        elif isinstance(node, list) and isinstance(x, int) and 0 <= x < len(node):
            node = node[x]
        elif str(x).startswith(("function-", "tagged-union")) or x in _UNION_MEMBERS:
            continue
        else:
            node = None
        keys.append(str(x))
    return ".".join(keys)


def _one_line_errors(e: ValidationError, source: str, data: Any) -> str:
    """The first errors of a validation of `data`, on one line."""
    parts = []
    for err in e.errors()[:5]:
        loc = _error_path(err["loc"], data)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling)"  # the error's hint names docs/spec.md
        elif err["type"] == "union_tag_invalid":
            msg = "type must be one of int, float, choice, fixed"
        elif err["type"] == "union_tag_not_found":
            msg = "missing 'type' (one of int, float, choice, fixed)"
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = len(e.errors()) - len(parts)
    tail = f" (and {more} more)" if more > 0 else ""
    return f"invalid spec {source}: " + "; ".join(parts) + tail


class _NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no type hints
    """Safe YAML without anchors/aliases: rules out "billion laughs" expansion."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise SpecError(
                f"YAML aliases are not allowed in specs (line {event.start_mark.line + 1})",
                "write the values out in full",
            )
        return super().compose_node(parent, index)


def parse_spec(text: str, source: str = "<spec>", overrides: dict[str, Any] | None = None) -> ExperimentSpec:
    """Parse YAML text into an `ExperimentSpec`.

    Raises:
        SpecError: the YAML is malformed or the spec is invalid; the message is one line.
    """
    if len(text.encode("utf-8", "replace")) > MAX_SPEC_BYTES:
        raise SpecError(f"spec {source} is larger than {MAX_SPEC_BYTES} bytes", "a spec is a small YAML file")
    try:
        data = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"spec {source} is not valid YAML{where}: {problem}", "fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise SpecError(
            f"spec {source} must be a YAML mapping with keys name, search_space, objectives, budget, trial",
            "see examples/digits_mlp.yaml",
        )
    if overrides:
        data = {**data, **overrides}
    return _validate(data, source)


def _validate(data: dict[str, Any], source: str) -> ExperimentSpec:
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(_one_line_errors(e, source, data), SPEC_DOCS_HINT) from None


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentSpec:
    """Read and validate a spec file. A relative `trial.script`, `trial.model_path`
    or `idx:` dataset is resolved against the spec's folder; `trial.model`'s module
    is looked up there (default `model_path`) without being imported."""
    p = Path(path)
    return parse_spec_in(read_spec_text(p), p.parent, source=str(path), overrides=overrides)


def read_spec_text(path: str | Path) -> str:
    """A spec file's text.

    Raises:
        SpecError: it does not exist or is not readable UTF-8.
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"spec file {path} does not exist", "check the path") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"spec file {path} cannot be read: {e}", "pass a UTF-8 YAML file") from None


def parse_spec_in(text: str, folder: str | Path, source: str = "<spec>",
                  overrides: dict[str, Any] | None = None) -> ExperimentSpec:
    """Parse a spec's YAML text as if it were a file in `folder`: relative paths
    (`trial.script`, `trial.model_path`, `idx:` datasets) resolve there, and
    `trial.function` / `trial.component` code is looked up there. What `nasctl
    serve` does with a submitted spec, on its own file system.

    Raises:
        SpecError: invalid YAML or spec, or a path that does not exist.
    """
    return _resolve_in(parse_spec(text, source=source, overrides=overrides), Path(folder))


def _resolve_in(spec: ExperimentSpec, folder: Path) -> ExperimentSpec:
    """The spec as a file in `folder`: its trial source's paths resolved there (`SourceKey.resolve`)."""
    trial = spec.trial
    resolve = SOURCE_KEYS[trial.source].resolve
    update = resolve(trial, folder) if resolve is not None else {}
    if update:
        spec = spec.model_copy(update={"trial": trial.model_copy(update=update)})
    return spec


def spec_to_dict(spec: ExperimentSpec) -> dict[str, Any]:
    """JSON-safe dict of the spec (what the store keeps)."""
    return spec.model_dump(mode="json")


def spec_from_dict(data: dict[str, Any]) -> ExperimentSpec:
    """Rebuild a spec stored by `spec_to_dict`."""
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(_one_line_errors(e, "stored in the database", data), "the stored spec is damaged") from None
