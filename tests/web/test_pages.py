"""The dashboard's pages: one shell, each page's entry module and the modules it imports served
from /static, and the report's bundler (nasctl/web/bundle.py), which refuses what it cannot translate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nasctl.store import Store
from nasctl.web import create_app
from nasctl.web.bundle import BundleError, bundle_modules
from nasctl.web.pages import PAGES, STATIC
from tests.helpers.synthetic import add_synthetic

IMPORT = re.compile(r'^import\s*\{[^}]*\}\s*from\s*"\./([\w.-]+\.js)";', re.M)


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    store = Store(f"sqlite:///{tmp_path / 'pages.db'}", create=True)
    add_synthetic(store, "syn", 3)
    return TestClient(create_app(store))


def _modules(entry: str) -> set[str]:
    """`entry` and every module it imports, transitively."""
    seen: set[str] = set()
    todo = [entry]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += IMPORT.findall((STATIC / name).read_text(encoding="utf-8"))
    return seen


def test_every_page_is_the_shell_with_its_body_and_entry_module(client: TestClient) -> None:
    paths = {"experiments": "/", "experiment": "/experiments/syn", "trial": "/experiments/syn/trials/0",
             "diagnostics": "/experiments/syn/diagnostics", "compare": "/compare"}
    assert set(paths) == set(PAGES)
    for kind, path in paths.items():
        text = client.get(path).text
        assert text.count("<head>") == 1 and text.count('<link rel="stylesheet" href="/static/style.css">') == 1
        assert text.count('<header><a class="brand" href="/">nasctl</a><nav id="nav"></nav>') == 1
        assert f'<body data-page="{kind}">' in text and f"<title>{PAGES[kind].title}</title>" in text
        # plotly.js, a classic script, then the page's entry module: the only scripts
        assert re.findall(r"<script[^>]*>", text) == [
            '<script src="/static/plotly.min.js">', f'<script type="module" src="/static/{PAGES[kind].entry}">']
        assert "{{" not in text


def test_each_pages_modules_are_served_as_javascript(client: TestClient) -> None:
    for page in PAGES.values():
        for name in _modules(page.entry):
            r = client.get("/static/" + name)
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript"), name
            assert "script-src 'self'" in r.headers["content-security-policy"]
    assert client.get("/static/shell.html").status_code == 404  # the shell and bodies are pages' parts, not files


def test_no_module_writes_a_global() -> None:
    """Modules share nothing through window: no `window.X =` (their only global is plotly's `Plotly`)."""
    for path in STATIC.glob("*.js"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"window\.\w+\s*=", text), path.name


def test_the_bundle_keeps_each_modules_scope_and_translates_imports(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text('const hidden = 1;\nexport function one() { return hidden; }\nexport const TWO = 2;\n')
    (tmp_path / "b.js").write_text('import { one, TWO as two } from "./a.js";\nconst hidden = 3;\nexport class C {}\n')
    (tmp_path / "main.js").write_text('import { one } from "./a.js";\nimport { C } from "./b.js";\none(); new C();\n')
    text = bundle_modules(tmp_path, "main.js")
    assert text.index("// a.js") < text.index("// b.js") < text.index("// main.js")
    assert text.count("// a.js") == 1  # imported twice, included once
    assert "const { one, TWO: two } = __nasctl_a;" in text and "return { one, TWO };" in text
    assert "import" not in text.replace("// ", "") and "export" not in text


@pytest.mark.parametrize(("source", "says"), [
    ("export default function f() {}\n", "does not translate"),
    ("export let n = 1;\n", "does not translate"),
    ("const f = 1;\nexport { f };\n", "does not translate"),
    ('import * as m from "./dep.js";\n', "does not translate"),
    ('import { missing } from "./dep.js";\n', "does not export"),
    ('import { f } from "./loop.js";\nexport function g() {}\n', "cycle"),
    ('const s = "</script>";\n', "</script"),
])
def test_the_bundler_refuses_what_it_cannot_translate(tmp_path: Path, source: str, says: str) -> None:
    (tmp_path / "dep.js").write_text("export function f() {}\n")
    (tmp_path / "loop.js").write_text('import { g } from "./main.js";\nexport function f() {}\n')
    (tmp_path / "main.js").write_text(source)
    with pytest.raises(BundleError, match=re.escape(says)):
        bundle_modules(tmp_path, "main.js")


def test_every_page_bundles() -> None:
    """The bundler translates every page's modules (the report uses the experiment page's)."""
    for page in PAGES.values():
        assert "// " + page.entry in bundle_modules(STATIC, page.entry)
