"""The docs as a reader finds them: a short README, links that resolve, a command reference
that matches the commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = _slug(heading)
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_readme_is_short() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < 300, f"README.md has {lines} lines: move topics to docs/"


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in PAGES:
        text = FENCE.sub("", page.read_text(encoding="utf-8"))
        for match in LINK.finditer(text):
            target = match.group(1) or match.group(2)
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not ours to check offline
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_command_reference_is_current() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/cli_docs.py", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_code_cites_docs_pages_not_readme_sections() -> None:
    cited = [
        f"{path.relative_to(REPO)}:{n}"
        for path in (REPO / "regress").rglob("*.py")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"README[,:] ?[\"'A-Za-z]", line)
    ]
    assert not cited, cited


def test_the_architecture_page_names_every_module_in_its_wing() -> None:
    """docs/architecture.md's layout table has a row per wing naming each of its modules
    (a command's module is named by the command itself)."""
    from regress.cli import COMMANDS

    page = (REPO / "docs" / "architecture.md").read_text()
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `regress/(\w+)/` \|(.*)$", page, re.M)}
    wings = sorted(p.name for p in (REPO / "regress").iterdir() if (p / "__init__.py").exists())
    assert sorted(rows) == wings
    commands = {target.split(":")[0].rsplit(".", 1)[1] for target, _ in COMMANDS.values()}
    unnamed = [
        f"{wing}/{path.name}"
        for wing in wings
        for path in sorted((REPO / "regress" / wing).rglob("*.py"))
        if path.name != "__init__.py"
        and f"`{path.name}`" not in rows[wing]
        and not (wing == "cli" and path.stem in commands)
    ]
    assert unnamed == []
