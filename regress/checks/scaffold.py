"""`regress init`: a starting policy and the shipped gate workflows, written into a repository.

Everything it needs is read from the repository or the installed package: the git root, the
default branch, a baseline store already there, a model file already committed, and where
this regress was installed from (pip's `direct_url.json`), which the workflows pin. The
workflows are regress's own (`.github/workflows/`, shipped as package data under `starter/`);
the few lines that only make sense inside regress's repository (its action at the checkout's
root, `pip install .`) are rewritten to install and use this release.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

from regress.core.errors import BadInput
from regress.core.files import write_text_atomic

DISTRIBUTION = "regress-gate"
PLACEHOLDER_REPOSITORY = "https://github.com/YOUR-ORG/regress"
PACKAGED_MODEL = "smollm2-135m"
WORKFLOWS = ("accuracy-gate.yml", "comment.yml", "drift.yml")


@dataclass(frozen=True)
class InitOptions:
    """Where to write and whether existing files may be replaced."""

    path: Path = Path(".")
    """Any folder inside the repository; the files go to its git root."""
    force: bool = False
    """Replace files that exist."""


@dataclass(frozen=True)
class Source:
    """Where the workflows install regress from and which action they use."""

    repository: str
    """The git URL of regress (`https://github.com/OWNER/regress`)."""
    ref: str
    """A commit sha or release tag of it."""

    def pip_spec(self, extras: str = "") -> str:
        """`pip install` argument for regress (with `extras`: `[llama]`) at exactly this ref."""
        return f"{DISTRIBUTION}{extras} @ git+{self.repository}@{self.ref}"

    @property
    def action(self) -> str:
        """The `uses:` of the gate's action: `OWNER/regress@REF`."""
        owner_repo = self.repository.removeprefix("https://github.com/").removesuffix(".git")
        return f"{owner_repo}@{self.ref}"

    @property
    def is_placeholder(self) -> bool:
        """True when the install source could not be inferred (YOUR-ORG in the files)."""
        return self.repository == PLACEHOLDER_REPOSITORY


@dataclass(frozen=True)
class Layout:
    """What was inferred from the repository."""

    root: Path
    default_branch: str
    store: str
    """The baseline store's folder, relative to the root."""
    baseline: str
    model: str
    """A model file in the repository (relative path), else the packaged model's name."""


@dataclass(frozen=True)
class InitResult:
    """What `init_repository` wrote and from what."""

    layout: Layout
    source: Source
    written: tuple[Path, ...]


def init_repository(options: InitOptions) -> InitResult:
    """Write policy.yaml and .github/workflows/{accuracy-gate,comment,drift}.yml into the git
    repository around `options.path`; BadInput (nothing written) outside a repository or when
    any of them exists without `force`."""
    layout = inspect_repository(options.path)
    source = installed_source()
    files = {layout.root / "policy.yaml": read_starter("policy.yaml")}
    for name in WORKFLOWS:
        text = adapt_workflow(name, read_starter(name), layout, source)
        files[layout.root / ".github" / "workflows" / name] = text
    existing = [path for path in files if path.exists()]
    if existing and not options.force:
        names = ", ".join(str(path.relative_to(layout.root)) for path in existing)
        verb = "exists" if len(existing) == 1 else "exist"
        raise BadInput(f"{names} already {verb} in {layout.root}; --force replaces them")
    for path, text in files.items():
        write_text_atomic(path, text)
    return InitResult(layout, source, tuple(files))


def read_starter(name: str) -> str:
    """A file regress ships for new repositories (package data)."""
    return (resources.files("regress.checks") / "starter" / name).read_text(encoding="utf-8")


def inspect_repository(path: Path) -> Layout:
    """The git root around `path`, its default branch, baseline store and model."""
    root = Path(_git(path, "rev-parse", "--show-toplevel") or "")
    if not root.parts:
        raise BadInput(f"{path} is not inside a git repository (git init, then regress init)")
    branch = _git(root, "symbolic-ref", "--short", "refs/remotes/origin/HEAD").removeprefix(
        "origin/"
    )
    branch = branch or _git(root, "branch", "--show-current") or "main"
    files = _git(root, "ls-files", "--cached", "--others", "--exclude-standard").split("\n")
    store, baseline = _store(files)
    models = sorted(p for p in files if p.endswith(".gguf"))
    return Layout(root, branch, store, baseline, models[0] if models else PACKAGED_MODEL)


def _store(files: list[str]) -> tuple[str, str]:
    """The folder holding baselines (`STORE/NAME/manifest.json`) and the one to gate against:
    `main` when there, else the only one; `baselines`/`main` when there is none yet."""
    found: dict[str, list[str]] = {}
    for parts in (Path(p).parts for p in files):
        if len(parts) >= 3 and parts[-1] == "manifest.json":
            found.setdefault("/".join(parts[:-2]), []).append(parts[-2])
    if not found:
        return "baselines", "main"
    store = "baselines" if "baselines" in found else min(found, key=lambda s: (s.count("/"), s))
    names = found[store]
    return store, "main" if "main" in names or len(names) != 1 else names[0]


def installed_source() -> Source:
    """Where pip installed regress from (a git URL and commit), else the placeholder
    repository at this version's release tag."""
    from regress import __version__

    fallback = Source(PLACEHOLDER_REPOSITORY, f"v{__version__.split('+')[0]}")
    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return fallback
    info = json.loads(text) if text else {}
    commit = info.get("vcs_info", {}).get("commit_id")
    url = str(info.get("url", ""))
    if not commit or not url.startswith("https://github.com/"):
        return fallback
    return Source(url.removesuffix(".git"), commit)


def adapt_workflow(name: str, text: str, layout: Layout, source: Source) -> str:
    """Regress's own workflow `name`, rewritten for another repository: the action and the
    install come from `source`, the model, store and baseline from `layout`."""
    store = f".trusted-gate/{layout.store}"
    edits: dict[str, list[tuple[str, str]]] = {
        "accuracy-gate.yml": [
            (
                "        uses: ./.trusted-gate\n",
                f"        uses: {source.action} # regress's action, pinned\n",
            ),
            ("          model: smollm2-135m\n", f"          model: {layout.model}\n"),
            ("          baseline: main\n", f"          baseline: {layout.baseline}\n"),
            ("          store: .trusted-gate/baselines\n", f"          store: {store}\n"),
            (
                "          # A policy file, when you use one, comes from the trusted copy too,"
                " e.g.\n"
                "          # policy: .trusted-gate/policy.yaml (and add policy.yaml to "
                "protected-paths).\n",
                "          # The policy comes from the trusted copy too.\n"
                "          policy: .trusted-gate/policy.yaml\n",
            ),
            (
                "          protected-paths: baselines/ action.yml",
                f"          protected-paths: {layout.store}/ policy.yaml",
            ),
        ],
        "comment.yml": [
            (
                '          python-version: "3.11"\n',
                '          python-version: "3.11"\n\n'
                "      - name: Install regress\n"
                "        shell: bash\n"
                f'        run: python -m pip install "{source.pip_spec()}"\n',
            ),
        ],
        "drift.yml": [
            (
                '          python -m pip install ".[llama]"\n',
                f'          python -m pip install "{source.pip_spec("[llama]")}"\n',
            ),
            (
                "          regress drift --baseline main",
                f"          regress drift --baseline {layout.baseline} --store {layout.store}",
            ),
        ],
    }
    for old, new in edits[name]:
        if old not in text:
            raise RuntimeError(f"the shipped {name} changed: no {old.strip()!r} to adapt")
        text = text.replace(old, new, 1)
    return text


def _git(cwd: Path, *args: str) -> str:
    """git's output, stripped; "" when git fails or is missing."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""
