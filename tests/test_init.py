"""`regress init` (issue #52): what it writes, what it infers, and that it never overwrites
without --force. No model runs (tests/test_init_gate.py takes a new repository to a green and
a red PR check)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from regress.checks.scaffold import (
    PLACEHOLDER_REPOSITORY,
    WORKFLOWS,
    Source,
    adapt_workflow,
    inspect_repository,
    read_starter,
)
from regress.cli import cli
from regress.gate.policy import load_policy

ROOT = Path(__file__).resolve().parents[1]


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def new_repo(path: Path, branch: str = "trunk") -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", branch)
    return path


def test_the_shipped_files_are_the_repositorys_own() -> None:
    """Package data, read from the installed package: the workflows are regress's own files
    (links into .github/workflows/), whole."""
    for name in WORKFLOWS:
        assert read_starter(name) == (ROOT / ".github" / "workflows" / name).read_text()
    assert (ROOT / "regress" / "checks" / "starter" / "policy.yaml").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"regress.checks" = ["starter/*"]' in pyproject


def test_init_writes_a_policy_and_workflows_that_load(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    (repo / "sub").mkdir()
    result = CliRunner().invoke(cli, ["init", str(repo / "sub")])  # any folder inside it
    assert result.exit_code == 0, result.output
    written = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file())
    assert [p for p in written if not p.startswith(".git/")] == [
        ".github/workflows/accuracy-gate.yml",
        ".github/workflows/comment.yml",
        ".github/workflows/drift.yml",
        "policy.yaml",
    ]
    policy = load_policy(repo / "policy.yaml")  # regress's own reader accepts it
    assert (policy.alpha, policy.max_drop, policy.notices) == (0.05, 0.02, ())
    gate = yaml.safe_load((repo / ".github/workflows/accuracy-gate.yml").read_text())
    (step,) = [s for s in gate["jobs"]["gate"]["steps"] if "with" in s and "model" in s["with"]]
    assert step["uses"] == Source(PLACEHOLDER_REPOSITORY, "v0.1.0").action
    assert step["with"]["model"] == "smollm2-135m"  # no model file in the repository
    assert step["with"]["store"] == ".trusted-gate/baselines"
    assert step["with"]["policy"] == ".trusted-gate/policy.yaml"
    said = " ".join(result.output.split())
    assert "then commit, push to trunk, and open a pull request" in said  # its branch
    assert "regress baseline create --name main --store baselines -m smollm2-135m" in said
    assert "replace YOUR-ORG/regress" in said


def test_init_refuses_to_overwrite_saying_what_exists(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    (repo / "policy.yaml").write_text("max_drop: 0.05\n")
    result = CliRunner().invoke(cli, ["init", str(repo)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"regress: error: policy.yaml already exists in {repo}; --force replaces them"
    ]
    assert (repo / "policy.yaml").read_text() == "max_drop: 0.05\n"
    assert not (repo / ".github").exists()  # nothing written
    assert CliRunner().invoke(cli, ["init", str(repo), "--force"]).exit_code == 0
    assert (repo / "policy.yaml").read_text() == read_starter("policy.yaml")


def test_outside_a_repository_is_bad_input(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert result.exit_code == 2 and "is not inside a git repository" in result.output


def test_it_infers_the_store_baseline_model_and_branch(tmp_path: Path) -> None:
    origin = new_repo(tmp_path / "origin", "develop")
    git(origin, "commit", "-q", "--allow-empty", "-m", "start")
    repo = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(repo))
    (repo / "gate" / "release").mkdir(parents=True)
    (repo / "gate" / "release" / "manifest.json").write_text("{}")
    (repo / "models").mkdir()
    (repo / "models" / "candidate.gguf").write_bytes(b"GGUF")
    layout = inspect_repository(repo)
    assert (layout.root, layout.default_branch) == (repo.resolve(), "develop")
    assert (layout.store, layout.baseline, layout.model) == (
        "gate",
        "release",
        "models/candidate.gguf",
    )
    text = adapt_workflow("drift.yml", read_starter("drift.yml"), layout, Source("u", "r"))
    assert "regress drift --baseline release --store gate " in text


def test_a_github_install_pins_its_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip's direct_url.json names the repository and commit regress came from: the
    workflows use that action and install that commit."""
    from regress.checks import scaffold

    sha = "a" * 40
    direct = {"url": "https://github.com/acme/regress.git", "vcs_info": {"commit_id": sha}}

    class Dist:
        def read_text(self, name: str) -> str:
            assert name == "direct_url.json"
            return json.dumps(direct)

    monkeypatch.setattr(scaffold.metadata, "distribution", lambda name: Dist())
    source = scaffold.installed_source()
    assert source.action == f"acme/regress@{sha}" and not source.is_placeholder
    assert (
        source.pip_spec("[llama]")
        == f"regress-gate[llama] @ git+https://github.com/acme/regress@{sha}"
    )
