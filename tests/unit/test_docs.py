"""The documentation: the README's links and anchors resolve, and the docs site
(docs/, mkdocs.yml) builds in strict mode, where a broken link or anchor, or a
page missing from the nav, fails the build."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    text = FENCE.sub("", md.read_text(encoding="utf-8"))
    return {github_slug(m.group(1).replace("`", "")) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def relative_links(md: Path) -> list[str]:
    text = FENCE.sub("", md.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


def broken_links(md: Path) -> list[str]:
    broken = []
    for target in relative_links(md):
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.name}")
    return broken


def test_every_relative_link_and_anchor_in_the_readme_resolves() -> None:
    readme = ROOT / "README.md"
    assert relative_links(readme), "the README links to its docs"
    assert broken_links(readme) == []


def test_the_link_check_finds_a_broken_file_and_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Some `code` here\n")
    md = tmp_path / "README.md"
    md.write_text("[ok](docs/a.md#some-code-here) [bad](docs/a.md#nope) [gone](docs/b.md)\n"
                  "`[not a link](nowhere.md)`\n```\n[nor this](nowhere.md)\n```\n")
    assert broken_links(md) == ["docs/a.md#nope: no heading with that anchor in a.md", "docs/b.md: no such file"]


def test_the_readme_is_a_guide_of_at_most_400_lines() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 400
    first = "\n".join(lines[:120])
    assert "make demo" in first and "make test" in first and "NASCTL_LOG_DIR" in first


def build_site(root: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                           "-d", str(out)], capture_output=True, text=True, timeout=300, cwd=root)


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    proc = build_site(ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "install.html").exists() and (tmp_path / "site" / "img" / "web-experiment.png").exists()


def test_the_strict_build_fails_on_a_broken_anchor_and_an_unlisted_page(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    spec = tmp_path / "docs" / "spec.md"
    spec.write_text(spec.read_text() + "\nSee [resuming](resume.md#no-such-heading).\n")
    proc = build_site(tmp_path, tmp_path / "site")
    assert proc.returncode == 1 and "no-such-heading" in proc.stderr
    spec.write_text(spec.read_text().replace("resume.md#no-such-heading", "resume.md"))
    (tmp_path / "docs" / "orphan.md").write_text("# Not in the nav\n")
    proc = build_site(tmp_path, tmp_path / "site")
    assert proc.returncode == 1 and "orphan.md" in proc.stderr
