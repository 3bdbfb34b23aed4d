"""Issue #52's "done when": a new repository goes from `regress init` to a green PR check and a
red one by following docs/ci.md alone ("Start a new repository"), the workflow's steps run as
a script.

The repository is a local git repository holding SmolLM2-135M's packaged GGUF as its model.
docs/ci.md's commands make the gate (`regress init`, a baseline, a commit); then each pull
request replaces the model with a `regress quantize` of it, and the job that
`.github/workflows/accuracy-gate.yml` (as `regress init` wrote it) defines runs as the runner
would: the pull request's merge commit checked out, the base branch's copy beside it in
.trusted-gate/, the changed files listed, and the Action's shell steps (this checkout's
action.yml, with the real `regress` on PATH) in order. A Q8_0 of the model is the green PR
(PASS); a TQ1_0 (ternary weights) the red one: not shown within the docs' 5-point limit, exit
1 at the last step.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_workflows import ActionRun

from regress.backends.models import resolve_model_path

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "ci.md"
BIN = Path(sys.executable).parent
ACTION_STEPS = ("check", "result", "page", "summary", "gate")
"""The Action's shell steps that gate (install, caches, upload and comment need GitHub)."""


def docs_commands(section: str) -> list[str]:
    """The shell commands of a ```sh block of docs/ci.md's "Start a new repository" section,
    `section` naming the block's first comment."""
    text = DOCS.read_text()
    part = text[text.index("## Start a new repository") :]
    blocks = re.findall(r"```sh\n(.*?)```", part, flags=re.S)
    (block,) = [b for b in blocks if b.startswith(f"# {section}")]
    lines = [line.split(" #")[0].strip() for line in block.splitlines()]
    # `git push`: the repository here is the remote itself.
    return [line for line in lines if line and not line.startswith(("#", "git push"))]


def sh(cwd: Path, command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-eo", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


class Job:
    """The gate job of accuracy-gate.yml on one pull request: its `run` steps with bash, its
    `uses: actions/checkout` steps as git commands, its gate step as action.yml's shell steps
    (test_workflows' ActionRun: its shims record pip instead of running it) with the step's
    `with:` as inputs and the real `regress`."""

    def __init__(self, tmp: Path, origin: Path, base: str, head: str, env: dict[str, str]):
        tmp.mkdir()
        # The merge commit a pull_request run checks out: the base, then the PR's head merged.
        merging = (
            f"git checkout -q -B merge-{head[:8]} {base} && git merge -q --no-ff -m merge {head}"
            " && git rev-parse HEAD && git checkout -q main"
        )
        done = sh(origin, merging, env)
        assert done.returncode == 0, done.stderr
        self.merge, self.origin = done.stdout.strip(), origin
        github = {
            "event": {"pull_request": {"number": 7, "base": {"sha": base}}},
            "repository": "acme/model",
            "server_url": "https://github.com",
            "run_id": "1",
        }
        self.runner = ActionRun(tmp, {}, github)
        self.runner.timeout = 600
        (tmp / "bin" / "regress").unlink()  # the real one, next on PATH
        self.runner.env |= env | {"PATH": f"{tmp / 'bin'}{os.pathsep}{env['PATH']}"}
        self.workspace = self.runner.workspace

    def sh(self, cwd: Path, command: str) -> None:
        done = sh(cwd, command, self.runner.env)
        assert done.returncode == 0, f"{command}: {done.stderr}"

    def checkout(self, step: dict[str, Any]) -> None:
        with_ = step.get("with", {})
        ref = self.runner.resolve(str(with_.get("ref", self.merge)))
        where = self.workspace / with_.get("path", ".")
        self.sh(self.workspace.parent, f"git clone -q --no-checkout {self.origin} {where}")
        self.sh(where, f"git -c advice.detachedHead=false checkout -q {ref}")

    def run(self, workflow: Path) -> dict[str, int]:
        """Every step of the gate job; the Action's step codes."""
        (job,) = yaml.safe_load(workflow.read_text())["jobs"].values()
        codes: dict[str, int] = {}
        for step in job["steps"]:
            uses = str(step.get("uses", ""))
            if uses.startswith("actions/checkout@"):
                self.checkout(step)
            elif "run" in step:
                self.sh(self.workspace, self.runner.resolve(step["run"]))
            else:  # the gate: regress's action, pinned by `regress init`
                assert re.fullmatch(r"[\w-]+/regress@v\d+\.\d+\.\d+", uses), uses
                # `with:` values are expressions too (`${{ runner.temp }}/...`)
                with_ = {k: self.runner.resolve(str(v)) for k, v in step["with"].items()}
                self.runner.inputs |= with_
                codes = self.runner.run(*ACTION_STEPS)
        return codes

    @property
    def outputs(self) -> dict[str, dict[str, str]]:
        return self.runner.outputs


def test_init_to_a_green_and_a_red_pull_request(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "OMP_WAIT_POLICY")}
    env |= {
        # the venv's regress and python first, as `pip install` puts them on a runner's PATH
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "REGRESS_CACHE_DIR": str(tmp_path / "cache"),  # every answer computed here
        "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
    }
    # Model files stored as they are: zlib over 100 MB per commit is time, not coverage.
    (tmp_path / "gitconfig").write_text(
        "[user]\n\tname = dev\n\temail = dev@example.com\n[core]\n\tcompression = 0\n"
    )
    origin = tmp_path / "origin"
    (origin / "models").mkdir(parents=True)
    shutil.copyfile(resolve_model_path("smollm2-135m"), origin / "models" / "model.gguf")
    assert (
        sh(origin, "git init -q -b main && git add models && git commit -qm model", env).returncode
        == 0
    )

    # docs/ci.md, step by step: the gate made and committed on main.
    for command in docs_commands("Make the gate"):
        done = sh(origin, command, env)
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    base = sh(origin, "git rev-parse main", env).stdout.strip()
    assert "baselines/main/manifest.json" in sh(origin, "git ls-files", env).stdout

    verdicts = {}
    for pr, qtype in (("green", "Q8_0"), ("red", "TQ1_0")):
        commands = [c.replace("Q8_0", qtype) for c in docs_commands("A pull request")]
        commands = [c.replace("new-model", f"pr-{pr}") for c in commands]
        for command in commands:
            done = sh(origin, command, env)
            assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
        head = sh(origin, "git rev-parse HEAD", env).stdout.strip()
        job = Job(tmp_path / pr, origin, base, head, env)
        codes = job.run(origin / ".github" / "workflows" / "accuracy-gate.yml")
        verdicts[pr] = (job.outputs["result"].get("verdict"), codes["gate"])
        assert codes["check"] == codes["summary"] == codes["page"] == 0, codes
        report = Path(job.outputs["check"]["dir"])
        assert (report / "report.html").stat().st_size > 0  # the page, for the artifact
        # The report names the PR's model file, ran against the base branch's baseline.
        data = json.loads((report / "report.json").read_text())
        assert data["candidate"]["model"].endswith("model.gguf")
        assert data["candidate"]["quantization"] == qtype
    # Green: the drop shown within max_drop. Red: not shown within it, so the job fails,
    # whether the drop is shown beyond it (REGRESSION) or the check cannot decide
    # (INCONCLUSIVE, blocking under the docs' `inconclusive: fail`).
    assert verdicts["green"] == ("PASS", 0)
    assert verdicts["red"][0] in ("REGRESSION", "INCONCLUSIVE") and verdicts["red"][1] == 1
