"""ES modules as one inline script, for `nasctl report` (a file:// page cannot import modules).

The dashboard's modules (static/*.js) use one import form, `import { a, b as c } from "./m.js";`,
and exports written on declarations (`export function`, `export async function`,
`export const`, `export class`). `bundle_modules` orders an entry module's imports
depth first, wraps each module in a function that returns its exports (so modules keep
their own scopes: no shared globals, as in the browser's module graph), and turns each
import into a destructuring of the imported module's exports. Anything else (default
exports, `export let`, export lists, other import forms, cycles) is refused, so a
module the bundler cannot translate fails the report's build and tests, not a browser.
No npm, no build step at install: this runs when a report is written.
"""

from __future__ import annotations

import re
from pathlib import Path

_IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"\./([\w.-]+\.js)";[ \t]*$', re.M)
_EXPORT = re.compile(r"^export\s+((?:async\s+)?function\s+|const\s+|class\s+)([A-Za-z_$][\w$]*)", re.M)
_LEFT = re.compile(r"^\s*(import|export)\b", re.M)
_NAME = re.compile(r"^[A-Za-z_$][\w$]*$")


class BundleError(RuntimeError):
    """A module the bundler cannot translate (its message names the module and what it holds)."""


def _var(filename: str) -> str:
    return "__nasctl_" + re.sub(r"\W", "_", filename.removesuffix(".js"))


def _imported(names: str, module: str, source: str) -> list[tuple[str, str]]:
    """`a, b as c` as [(a, a), (b, c)]."""
    out = []
    for part in (p.strip() for p in names.split(",")):
        if not part:
            continue
        name, _, local = (x.strip() for x in part.partition(" as "))
        local = local or name
        if not (_NAME.match(name) and _NAME.match(local)):
            raise BundleError(f"{source}: cannot read the import {part!r} from {module}")
        out.append((name, local))
    return out


def bundle_modules(folder: Path, entry: str) -> str:
    """The module `entry` (a file in `folder`) and everything it imports, as the text of one
    `<script type="module">`.

    Raises:
        BundleError: a module uses a form the bundler does not translate, imports a name its
            module does not export, imports in a cycle, or holds `</script`.
    """
    exports: dict[str, list[str]] = {}
    parts: list[str] = []

    def add(filename: str, path: tuple[str, ...]) -> None:
        if filename in exports:
            return
        if filename in path:
            raise BundleError(f"modules import each other in a cycle: {' -> '.join(path + (filename,))}")
        text = (folder / filename).read_text(encoding="utf-8")
        for m in _IMPORT.finditer(text):
            add(m.group(2), path + (filename,))
            pairs = _imported(m.group(1), m.group(2), filename)
            missing = [name for name, _ in pairs if name not in exports[m.group(2)]]
            if missing:
                raise BundleError(f"{filename} imports {', '.join(missing)} that {m.group(2)} does not export")
        names = [m.group(2) for m in _EXPORT.finditer(text)]
        code = _EXPORT.sub(lambda m: m.group(1) + m.group(2), text)

        def destructure(m: re.Match[str]) -> str:
            pairs = _imported(m.group(1), m.group(2), filename)
            inner = ", ".join(name if name == local else f"{name}: {local}" for name, local in pairs)
            return f"const {{ {inner} }} = {_var(m.group(2))};"

        code = _IMPORT.sub(destructure, code)
        left = _LEFT.search(code)
        if left:
            line = code[left.start():].splitlines()[0].strip()
            raise BundleError(f"{filename}: the bundler does not translate {line!r}")
        exports[filename] = names
        parts.append(f"// {filename}\nconst {_var(filename)} = (() => {{\n{code}\nreturn {{ {', '.join(names)} }};\n}})();\n")

    add(entry, ())
    bundle = "\n".join(parts)
    if "</script" in bundle.lower():
        raise BundleError("a module holds '</script', which would end the report's inline script")
    return bundle
