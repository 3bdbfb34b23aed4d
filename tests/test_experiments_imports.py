"""The scripts under experiments/ still find every regress name they import.

They measure every figure in docs/results/ and import about 40 inner modules that only ruff
reads, so a module moved or a function renamed would break them silently. Checked from the
source, without running them (most load a model at the top of `main`): each `from regress.X
import name` must name a module of the package and a name defined at its top level (or a
submodule), each `import regress.X` a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "experiments").glob("*.py"))


def _module_file(name: str) -> Path | None:
    base = ROOT / Path(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try):  # TYPE_CHECKING blocks, fallbacks
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    names.update((a.asname or a.name).split(".")[0] for a in inner.names)
    return names


def _lazy_public(path: Path) -> set[str]:
    """Names `regress/__init__.py` re-exports lazily (its `_PUBLIC` table)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id == "_PUBLIC" and node.value:
                return set(ast.literal_eval(node.value))
    return set()


def test_there_are_scripts_to_check() -> None:
    assert len(SCRIPTS) >= 20


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_regress_import_of_an_experiment_resolves(script: Path) -> None:
    missing = []
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("regress") and _module_file(alias.name) is None:
                    missing.append(alias.name)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("regress"):
            module = node.module or ""
            path = _module_file(module)
            if path is None:
                missing.append(module)
                continue
            names = _top_level_names(path)
            if module == "regress":
                names |= _lazy_public(path)
            for alias in node.names:
                if alias.name not in names and _module_file(f"{module}.{alias.name}") is None:
                    missing.append(f"{module}.{alias.name}")
    assert missing == [], f"{script.name} imports what the package no longer has"
