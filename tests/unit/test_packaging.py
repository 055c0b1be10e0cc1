"""Packaging: the wheel carries what nasctl needs at run time (the dashboard's
files, the migrations, the licence), its build warns about nothing in our own
metadata, and every module nasctl imports at run time comes with the runtime
install, not only with an extra."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import runpy
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# Imported only where present, with a fallback: NVIDIA's NVML bindings (else `nvidia-smi -L`).
OPTIONAL_MODULES = {"pynvml"}
# What a build backend says about a project's own metadata (deprecated or invalid keys).
BACKEND_WARNING = re.compile(r"\b(SetuptoolsDeprecationWarning|SetuptoolsWarning|BuildBackendWarning|"
                             r"_DeprecatedConfig|_MissingDynamic)\b")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(requirements: list[str]) -> set[str]:
    """The installed distributions these requirements pull in, extras left out."""
    seen: set[str] = set()
    stack = [Requirement(r).name for r in requirements]
    while stack:
        name = canonical(stack.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for r in reqs:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                stack.append(req.name)
    return seen


def imports(path: Path) -> list[tuple[str, bool]]:
    """(top-level module, imported at module level?) for every absolute import in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(n) for n in tree.body} | {
        id(s) for n in tree.body if isinstance(n, (ast.If, ast.Try)) for s in ast.walk(n)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name.split(".")[0], id(node) in top_level) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module.split(".")[0], id(node) in top_level))
    return found


def test_every_runtime_import_comes_with_the_runtime_install() -> None:
    runtime = closure(PYPROJECT["dependencies"])
    extras_only = closure([r for reqs in PYPROJECT["optional-dependencies"].values() for r in reqs]) - runtime
    providers = md.packages_distributions()
    problems = []
    for path in sorted((ROOT / "nasctl").rglob("*.py")):
        for module, at_module_level in imports(path):
            if module in sys.stdlib_module_names or module == "nasctl" or module in OPTIONAL_MODULES:
                continue
            dists = {canonical(d) for d in providers.get(module, [])}
            where = f"{path.relative_to(ROOT)}: {module}"
            if not dists:
                problems.append(f"{where} is not installed by anything")
            elif dists & runtime:
                continue
            elif dists & extras_only and not at_module_level:
                continue  # an extra's feature, imported where it is used
            else:
                problems.append(f"{where} comes from {sorted(dists)}, not a runtime dependency")
    assert problems == []


def test_the_wheel_carries_static_files_migrations_and_licence_and_builds_without_warnings(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    warnings = [line for line in (proc.stdout + proc.stderr).splitlines() if BACKEND_WARNING.search(line)]
    assert warnings == []
    (wheel,) = tmp_path.glob("nasctl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("nasctl/web/static", "nasctl/store/alembic", "nasctl/store/alembic/versions"):
        for f in (ROOT / folder).iterdir():
            if f.is_file() and f.suffix != ".pyc":
                assert f"{folder}/{f.name}" in names
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    assert f"{dist_info}/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata
    assert "Provides-Extra: saasbo" in metadata and "Provides-Extra: test" in metadata
    assert not any(n.startswith(("tests/", "benchmarks/", "docs/")) for n in names)


def test_an_extra_installed_beside_the_virtualenv_holds_only_what_it_lacks() -> None:
    """`make install-test` keeps the saasbo extra in .venv/saasbo: the extra's own pins
    come from nasctl's metadata, the folder adds nothing the virtualenv already has, and
    an extra nasctl does not have is refused in one line."""
    script = ROOT / "scripts" / "install_extra_beside.py"
    extra_requirements = runpy.run_path(str(script))["extra_requirements"]
    assert sorted(extra_requirements("saasbo")) == sorted(PYPROJECT["optional-dependencies"]["saasbo"])
    folder = ROOT / ".venv" / "saasbo"
    if folder.is_dir():  # what make install-test put there: nothing the virtualenv has
        beside = {canonical(p.name.split("-")[0]) for p in folder.glob("*.dist-info")}
        assert {"jax", "jaxlib", "numpyro"} <= beside
        installed = {canonical(d.metadata["Name"]) for d in md.distributions(path=[p for p in sys.path
                                                                                   if "site-packages" in p])}
        assert not beside & installed, f"{sorted(beside & installed)} are in the virtualenv and beside it"
    bad = subprocess.run([sys.executable, str(script), "no-such-extra", "/tmp/unused"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no extra 'no-such-extra'" in bad.stderr
