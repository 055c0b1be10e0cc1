"""Install one of nasctl's extras into a folder beside the virtualenv, not into it.

    .venv/bin/python scripts/install_extra_beside.py saasbo .venv/saasbo

Only what the virtualenv lacks goes into the folder (pip resolves the extra
against the virtualenv, then installs exactly the packages it would have added,
without their dependencies), so putting the folder on PYTHONPATH adds the extra
and shadows nothing. `make install-test` keeps SAASBO's JAX and NumPyro there:
BoTorch imports JAX whenever it is importable, about a second of every
orchestrator's start, and only the tests marked `saasbo` need it
(scripts/test-suite.sh runs them with the folder on PYTHONPATH).
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from packaging.requirements import Requirement


def extra_requirements(extra: str) -> list[str]:
    requirements = [Requirement(r) for r in importlib.metadata.requires("nasctl") or []]
    found = [f"{r.name}{r.specifier}" for r in requirements
             if r.marker is not None and r.marker.evaluate({"extra": extra})]
    if not found:
        raise SystemExit(_bad(f"nasctl has no extra {extra!r}: name one of its extras in pyproject.toml"))
    return found


def _bad(message: str) -> int:
    print(message, file=sys.stderr)
    return 2


def missing(requirements: list[str]) -> list[str]:
    """name==version of each package pip would add to this environment."""
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--report", "-",
                          *requirements], check=True, capture_output=True, text=True).stdout
    report = json.loads(out)
    return [f"{item['metadata']['name']}=={item['metadata']['version']}" for item in report["install"]]


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(_bad("usage: python scripts/install_extra_beside.py EXTRA FOLDER (name an extra and a folder)"))
    extra, folder = sys.argv[1], sys.argv[2]
    packages = missing(extra_requirements(extra))
    if packages:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--upgrade",
                        "--target", folder, *packages], check=True)
    print(f"{extra}: {' '.join(packages) or 'nothing missing'} in {folder}")


if __name__ == "__main__":
    main()
