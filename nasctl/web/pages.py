"""The dashboard's HTML pages: one shell (static/shell.html) filled with each page's body and entry module.

The shell holds what every page shares: the head (charset, viewport, title, stylesheet),
the header with the nav and the token field, and `<main>`. A page adds its body
(static/KIND.body.html) and loads two scripts: plotly.min.js, a classic script that
defines `Plotly` (the one third-party global the dashboard's modules use), then its
entry module (static/page-KIND.js, `<script type="module">`), which imports the rest.
`nasctl report` fills the same shell with inlined styles and scripts (report.py).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from urllib.parse import quote

#: The dashboard's static files: the shell, page bodies, modules, stylesheet, icon.
STATIC = Path(str(files("nasctl.web").joinpath("static")))


@dataclass(frozen=True)
class Page:
    """One dashboard page: its title and its entry module (a file in static/)."""

    title: str
    entry: str


PAGES = {
    "experiments": Page("nasctl — experiments", "page-experiments.js"),
    "experiment": Page("nasctl — experiment", "page-experiment.js"),
    "trial": Page("nasctl — trial", "page-trial.js"),
    "diagnostics": Page("nasctl — model diagnostics", "page-diagnostics.js"),
    "compare": Page("nasctl — compare experiments", "page-compare.js"),
}

STYLESHEET = '<link rel="stylesheet" href="/static/style.css">'

_SLOT = re.compile(r"\{\{(title|styles|page|body|scripts)\}\}")


def fill_shell(*, title: str, page: str, body: str, styles: str = STYLESHEET, scripts: str = "") -> str:
    """The shell with its slots filled: `title` and `page` (the body's data-page) are escaped,
    `body`, `styles` and `scripts` are HTML inserted as they are (in one pass: what they
    hold is never read as a slot)."""
    values = {"title": html.escape(title), "page": html.escape(page), "body": body, "styles": styles, "scripts": scripts}
    shell = (STATIC / "shell.html").read_text(encoding="utf-8")
    return _SLOT.sub(lambda m: values[m.group(1)], shell)


def page_body(kind: str) -> str:
    """The body (inside `<main>`) of page `kind`."""
    return (STATIC / f"{kind}.body.html").read_text(encoding="utf-8")


def page_html(kind: str) -> str:
    """Page `kind` (a key of PAGES) as the server sends it: its scripts are loaded from /static."""
    page = PAGES[kind]
    scripts = ('<script src="/static/plotly.min.js"></script>\n'
               f'<script type="module" src="/static/{page.entry}"></script>')
    return fill_shell(title=page.title, page=kind, body=page_body(kind), scripts=scripts)


def not_found_html(message: str, back: str) -> str:
    """A plain page saying what was not found, with a link back (the message is escaped); no script."""
    link = quote(back, safe="/")
    body = (
        f'<h1>Not found</h1><p id="message" class="error">{html.escape(message, quote=False)}</p>\n'
        f'<p><a href="{html.escape(link)}">{"all experiments" if back == "/" else "back to the experiment"}</a></p>\n'
    )
    return fill_shell(title="nasctl — not found", page="not-found", body=body)
