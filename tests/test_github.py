"""regress.report.github: step summary, outputs, event parsing, and the PR comment upsert.

The comment upsert runs against a small GitHub stand-in on 127.0.0.1 (ephemeral port).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from regress.core.errors import BadInput, RunFailed
from regress.report.github import (
    DEFAULT_MARKER,
    CommentAction,
    FailOn,
    append_step_summary,
    comment_body,
    main,
    pr_number_from_event,
    protected_changes,
    sanitize_markdown,
    should_fail,
    truncate_utf8,
    upsert_comment,
    verdict_from_report,
    write_outputs,
)

REPO = "acme/models"
TOKEN = "t0ken"
ROOT = Path(__file__).resolve().parents[1]


def parse_github_output(text: str) -> dict[str, str]:
    """Read a $GITHUB_OUTPUT file the way the runner does (name=value and heredocs)."""
    outputs: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            for value_line in lines:
                if value_line == delimiter:
                    break
                body.append(value_line)
            else:
                raise AssertionError(f"no closing delimiter for {name}")
            outputs[name] = "\n".join(body)
        else:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


# --- step summary ---------------------------------------------------------------------------


def test_summary_appends_report(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    written = append_step_summary(
        "## Verdict: PASS\n\n| n | acc |\n|---|---|\n| 300 | 0.51 |", summary
    )
    text = summary.read_text()
    assert text == "# earlier step\n## Verdict: PASS\n\n| n | acc |\n|---|---|\n| 300 | 0.51 |\n"
    assert written == len(text) - len("# earlier step\n")


def test_summary_truncates_to_limit_at_a_line_with_a_note(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("x" * 100 + "\n")
    report = "".join(f"| row {i} | é |\n" for i in range(2000))  # about 30 kB, 2-byte chars
    append_step_summary(report, summary, limit=4000)
    data = summary.read_bytes()
    assert len(data) <= 4000
    text = data.decode("utf-8")  # no multi-byte character was split
    body, note = text.split("\n\n> **Note:**")
    rows = body.split("\n")[1:]
    assert rows == [f"| row {i} | é |" for i in range(len(rows))]  # whole rows, in order
    next_row = f"| row {len(rows)} | é |\n".encode()
    assert len(data) + len(next_row) > 4000  # it used the room it had
    assert note == (
        " this report was cut to fit GitHub's size limit; "
        "the full report is in the workflow run's artifact.\n"
    )


def test_truncate_keeps_short_text_unchanged() -> None:
    assert truncate_utf8("short\n", 100) == "short\n"
    assert truncate_utf8("x" * 50, 10) == ""  # not even the note fits


# --- outputs ---------------------------------------------------------------------------------


def test_outputs_single_and_multiline_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "output"
    out.write_text("earlier=1\n")
    report = "## Verdict\nline two\nEOF\n"
    write_outputs({"verdict": "PASS", "report": report, "path": "a=b.json"}, out)
    text = out.read_text()
    assert "verdict=PASS\n" in text and "path=a=b.json\n" in text
    assert re.search(r"^report<<ghadelimiter_[0-9a-f]{32}$", text, re.M)
    assert parse_github_output(text) == {
        "earlier": "1",
        "verdict": "PASS",
        "report": report,
        "path": "a=b.json",
    }


@pytest.mark.parametrize("name", ["", "a=b", "two words", "x<<y"])
def test_outputs_reject_bad_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(BadInput, match="invalid output name"):
        write_outputs({name: "v"}, tmp_path / "output")


# --- events ----------------------------------------------------------------------------------


def _event(tmp_path: Path, payload: dict) -> Path:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return path


def test_pr_number_from_pull_request_event(tmp_path: Path) -> None:
    event = {"action": "synchronize", "number": 42, "pull_request": {"number": 42}}
    assert pr_number_from_event(_event(tmp_path, event)) == 42


def test_pr_number_from_workflow_run_event(tmp_path: Path) -> None:
    run = {"workflow_run": {"id": 9, "pull_requests": [{"number": 7, "head": {"sha": "abc"}}]}}
    assert pr_number_from_event(_event(tmp_path, run)) == 7


def test_pr_number_absent_for_fork_workflow_run_and_push(tmp_path: Path) -> None:
    fork_run = {"workflow_run": {"id": 9, "pull_requests": []}}
    assert pr_number_from_event(_event(tmp_path, fork_run)) is None
    assert pr_number_from_event(_event(tmp_path, {"ref": "refs/heads/main"})) is None


def test_pr_number_unreadable_event(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="cannot read the event payload"):
        pr_number_from_event(tmp_path / "missing.json")


# --- verdict and gate ------------------------------------------------------------------------


def test_verdict_from_report(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    assert verdict_from_report(report) == "ERROR"  # the run wrote nothing
    report.write_text(json.dumps({"verdict": "INCONCLUSIVE", "exit_code": 0}))
    assert verdict_from_report(report) == "INCONCLUSIVE"
    report.write_text(json.dumps({"verdict": "MAYBE"}))
    with pytest.raises(BadInput, match="unknown verdict 'MAYBE'"):
        verdict_from_report(report)


@pytest.mark.parametrize(
    ("exit_code", "verdict", "fail_on", "fails"),
    [
        (0, "PASS", FailOn.REGRESSION, False),
        (0, "INCONCLUSIVE", FailOn.REGRESSION, False),
        (0, "INCONCLUSIVE", FailOn.INCONCLUSIVE, True),
        (0, "PASS", FailOn.INCONCLUSIVE, False),
        (1, "REGRESSION", FailOn.REGRESSION, True),
        (2, "ERROR", FailOn.REGRESSION, True),
        (3, "ERROR", FailOn.INCONCLUSIVE, True),
    ],
)
def test_should_fail(exit_code: int, verdict: str, fail_on: FailOn, fails: bool) -> None:
    assert should_fail(exit_code, verdict, fail_on) is fails


def test_gate_command_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["gate", "--verdict", "INCONCLUSIVE", "--exit-code", "0"]
    assert main([*args, "--fail-on", "regression"]) == 0
    assert main([*args, "--fail-on", "inconclusive"]) == 1
    assert "failing the job" in capsys.readouterr().out
    # A run failure keeps its own exit code.
    assert main(["gate", "--verdict", "ERROR", "--exit-code", "3", "--fail-on", "regression"]) == 3


# --- comment body ----------------------------------------------------------------------------


def test_comment_body_has_marker_first_and_run_link() -> None:
    body = comment_body("## Verdict: PASS\n", run_url="https://example.invalid/runs/1")
    assert body == (
        f"{DEFAULT_MARKER}\n## Verdict: PASS\n\n"
        "[Workflow run, full report and records](https://example.invalid/runs/1)\n"
    )


def test_comment_body_fits_github_limit() -> None:
    report = "".join(f"| task {i} | 0.5 |\n" for i in range(10000))
    body = comment_body(report, run_url="https://example.invalid/runs/1")
    assert len(body.encode()) <= 65536
    assert body.startswith(DEFAULT_MARKER + "\n| task 0 |")
    assert "cut to fit GitHub's" in body and body.endswith("(https://example.invalid/runs/1)\n")


# --- a GitHub stand-in -----------------------------------------------------------------------


class FakeGitHub:
    """Issue comments of one repository, served like the REST API (paginated, Link header)."""

    def __init__(self) -> None:
        self.comments: dict[int, list[dict]] = {}
        self.heads: dict[int, str] = {}
        self.requests: list[tuple[str, str]] = []
        self.next_id = 1000
        self.lock = threading.Lock()
        self.user: str | None = None
        """The token's login for GET /user; None: an Actions token, which /user refuses."""
        self.files: dict[tuple[str, str], str] = {}
        """(path, ref) -> the blob sha GET /contents/PATH?ref=REF answers."""

    def add(self, pr: int, body: str, login: str = "someone") -> dict:
        with self.lock:
            self.next_id += 1
            comment = {
                "id": self.next_id,
                "body": body,
                "user": {"login": login},
                "html_url": f"https://github.invalid/{REPO}/pull/{pr}#issuecomment-{self.next_id}",
            }
            self.comments.setdefault(pr, []).append(comment)
            return comment

    def marked(self, pr: int) -> list[dict]:
        return [c for c in self.comments.get(pr, []) if DEFAULT_MARKER in c["body"]]


def _handler(state: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    prefix = f"/repos/{REPO}"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep pytest output clean
            pass

        def _reply(self, status: int, payload: object, headers: dict | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _route(self, method: str) -> None:
            url = urlsplit(self.path)
            state.requests.append((method, self.path))
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._reply(401, {"message": "Bad credentials"})
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            if url.path == "/user" and method == "GET":
                if state.user is None:
                    return self._reply(403, {"message": "Resource not accessible by integration"})
                return self._reply(200, {"login": state.user})
            if m := re.fullmatch(rf"{prefix}/issues/(\d+)/comments", url.path):
                pr = int(m.group(1))
                if method == "GET":
                    return self._list(pr, parse_qs(url.query))
                if method == "POST":
                    author = state.user or "github-actions[bot]"
                    return self._reply(201, state.add(pr, body["body"], author))
            if (m := re.fullmatch(rf"{prefix}/issues/comments/(\d+)", url.path)) and (
                method == "PATCH"
            ):
                for comment in (c for cs in state.comments.values() for c in cs):
                    if comment["id"] == int(m.group(1)):
                        comment["body"] = body["body"]
                        return self._reply(200, comment)
            if (m := re.fullmatch(rf"{prefix}/contents/(.+)", url.path)) and method == "GET":
                ref = parse_qs(url.query).get("ref", [""])[0]
                if (m.group(1), ref) in state.files:
                    return self._reply(200, {"sha": state.files[m.group(1), ref]})
            if (m := re.fullmatch(rf"{prefix}/pulls/(\d+)", url.path)) and method == "GET":
                pr = int(m.group(1))
                if pr in state.heads:
                    return self._reply(200, {"number": pr, "head": {"sha": state.heads[pr]}})
            return self._reply(404, {"message": "Not Found"})

        def _list(self, pr: int, query: dict[str, list[str]]) -> None:
            per_page = int(query.get("per_page", ["30"])[0])
            page = int(query.get("page", ["1"])[0])
            comments = state.comments.get(pr, [])
            last = max(1, -(-len(comments) // per_page))
            links = []
            base = f"http://{self.headers['Host']}{prefix}/issues/{pr}/comments"
            if page < last:
                links.append(f'<{base}?per_page={per_page}&page={page + 1}>; rel="next"')
            links.append(f'<{base}?per_page={per_page}&page={last}>; rel="last"')
            chunk = comments[(page - 1) * per_page : page * per_page]
            self._reply(200, chunk, {"Link": ", ".join(links)})

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self._route("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._route("POST")

        def do_PATCH(self) -> None:  # noqa: N802
            self._route("PATCH")

    return Handler


@pytest.fixture
def github() -> Iterator[tuple[FakeGitHub, str]]:
    state = FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """urllib honours proxy variables; the stand-in is on loopback."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


def test_upsert_creates_then_updates_one_comment(github: tuple[FakeGitHub, str]) -> None:
    state, api = github
    state.add(7, "LGTM")
    first = upsert_comment(api, REPO, 7, "## Verdict: REGRESSION", TOKEN)
    assert first.action is CommentAction.CREATED
    second = upsert_comment(api, REPO, 7, "## Verdict: PASS", TOKEN)
    assert second.action is CommentAction.UPDATED and second.id == first.id
    assert [c["body"] for c in state.marked(7)] == [f"{DEFAULT_MARKER}\n## Verdict: PASS"]
    assert len(state.comments[7]) == 2  # the human's comment is untouched
    assert state.comments[7][0]["body"] == "LGTM"


def test_upsert_finds_the_marker_on_a_later_page(github: tuple[FakeGitHub, str]) -> None:
    state, api = github
    for i in range(130):
        state.add(7, f"comment {i}")
    marked = state.add(7, f"{DEFAULT_MARKER}\nold report", "github-actions[bot]")
    for i in range(90):
        state.add(7, f"later {i}")
    result = upsert_comment(api, REPO, 7, f"{DEFAULT_MARKER}\nnew report", TOKEN)
    assert (result.action, result.id) == (CommentAction.UPDATED, marked["id"])
    assert [c["body"] for c in state.marked(7)] == [f"{DEFAULT_MARKER}\nnew report"]
    lists = [path for method, path in state.requests if "/comments?" in path]
    assert lists == [
        f"/repos/{REPO}/issues/7/comments?per_page=100&page=1",
        f"/repos/{REPO}/issues/7/comments?per_page=100&page=2",
    ]


def test_upsert_reads_every_page_before_creating(github: tuple[FakeGitHub, str]) -> None:
    state, api = github
    for i in range(250):
        state.add(9, f"comment {i}")
    result = upsert_comment(api, REPO, 9, "report", TOKEN)
    assert result.action is CommentAction.CREATED
    assert sum(1 for method, path in state.requests if "/comments?" in path) == 3
    assert len(state.marked(9)) == 1 and len(state.comments[9]) == 251


def test_upsert_never_edits_someone_elses_marked_comment(github: tuple[FakeGitHub, str]) -> None:
    state, api = github
    planted = state.add(7, f"{DEFAULT_MARKER}\n## regress: ✅ PASS (forged)", "mallory")
    first = upsert_comment(api, REPO, 7, "## regress: ❌ REGRESSION", TOKEN)
    assert first.action is CommentAction.CREATED and first.id != planted["id"]
    second = upsert_comment(api, REPO, 7, "## regress: ❌ REGRESSION (rerun)", TOKEN)
    assert (second.action, second.id) == (CommentAction.UPDATED, first.id)
    assert planted["body"] == f"{DEFAULT_MARKER}\n## regress: ✅ PASS (forged)"
    assert ("PATCH", f"/repos/{REPO}/issues/comments/{planted['id']}") not in state.requests


def test_upsert_with_a_personal_token_edits_only_its_users_comment(
    github: tuple[FakeGitHub, str],
) -> None:
    state, api = github
    state.user = "release-bot"
    bots = state.add(7, f"{DEFAULT_MARKER}\nold", "github-actions[bot]")
    mine = state.add(7, f"{DEFAULT_MARKER}\nold", "release-bot")
    result = upsert_comment(api, REPO, 7, "new", TOKEN)
    assert (result.action, result.id) == (CommentAction.UPDATED, mine["id"])
    assert bots["body"] == f"{DEFAULT_MARKER}\nold"


def test_comment_body_defuses_mentions_and_images() -> None:
    report = (
        "| flip | answer |\n|---|---|\n"
        "| 3 | ask @octocat or @acme/security-team, mail a@b.example |\n"
        "| 4 | ![pixel](https://evil.example/t.png) <img src='https://evil.example/x'> |\n"
        "| 5 | ![ref][logo] <IMG\nSRC=x> |\n"
    )
    body = comment_body(report)
    assert "@\u200boctocat" in body and "@\u200bacme/security-team" in body
    assert "a@b.example" in body  # an e-mail address is no mention
    assert "evil.example" not in body and "<img" not in body.lower()
    assert body.count("[image removed]") == 4
    assert re.search(r"(?<![\w@])@(?=[A-Za-z0-9])", body) is None


def test_summary_defuses_mentions_and_images(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    append_step_summary("hi @octocat ![x](https://evil.example/p.gif)\n", path)
    assert path.read_text() == "hi @\u200boctocat [image removed]\n"


def test_an_unterminated_media_tag_is_cut_to_its_line_end_only() -> None:
    report = (
        "### Flips\n\n| 1 | <video | b |\n| 2 | <img src=x on… | c |\n| 3 | ok | d |\n\n"
        "### Failures\n\n> quoted\n\n### Policy\n\n<!-- regress-report -->\n"
    )
    assert sanitize_markdown(report) == (
        "### Flips\n\n| 1 | [image removed]\n| 2 | [image removed]\n| 3 | ok | d |\n\n"
        "### Failures\n\n> quoted\n\n### Policy\n\n<!-- regress-report -->\n"
    )


@pytest.mark.parametrize(
    "hostile",
    [
        "<img\nsrc=https://evil.example/x>",
        "</VIDEO\r\n>",
        "<svg onload=alert(1)>",
        "![x](\nhttps://evil.example/p.png)",
        "![x\ny](https://evil.example/p.png)",
        "![ref]\n\n[ref]: https://evil.example/p.png",
    ],
)
def test_no_media_tag_or_image_survives_a_split(hostile: str) -> None:
    text = sanitize_markdown(f"a {hostile} b\nnext line\n")
    assert "![" not in text
    assert re.search(r"<\s*/?\s*(?:img|svg|video)", text, re.I) is None
    assert text.endswith("\nnext line\n")  # the next line is never eaten


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@@octocat", "@@\u200boctocat"),
        ("x@@octocat", "x@@\u200boctocat"),
        ("(@octocat) -@acme/team", "(@\u200boctocat) -@\u200bacme/team"),
        ("café@octocat", "café@\u200boctocat"),  # GitHub's word characters are ASCII
        ("\u200b@octocat", "\u200b@\u200boctocat"),
        ("a@b.example snake_@x @\u200bdone", "a@b.example snake_@x @\u200bdone"),
    ],
)
def test_every_mention_is_defused(text: str, expected: str) -> None:
    assert sanitize_markdown(text) == expected
    assert sanitize_markdown(expected) == expected


def test_protected_changes_and_the_report_note(tmp_path: Path) -> None:
    changed = [
        "README.md",
        "baselines/main/records/arc_easy.jsonl",
        "./baselines/main/manifest.json",
        "policy.yaml",
        "baselines-old/x",
        "",
    ]
    protected = ["baselines/", "policy.yaml"]
    assert protected_changes(changed, protected) == [
        "baselines/main/manifest.json",
        "baselines/main/records/arc_easy.jsonl",
        "policy.yaml",
    ]
    assert protected_changes(["src/model.py"], protected) == []
    report = tmp_path / "report.md"
    report.write_text("## regress: ✅ PASS (1 unit)\n\ntable\n")
    (tmp_path / "changed.txt").write_text("\n".join(changed) + "\n")
    args = ["flag", "--changed-files", str(tmp_path / "changed.txt"), "--report-md", str(report)]
    done = _run([*args, "--protected", *protected], {})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("::warning::this PR changes the gate's own inputs: baselines/")
    text = report.read_text()
    assert text.startswith("## regress: ✅ PASS (1 unit)\n\n> [!WARNING]\n")
    assert "`baselines/main/manifest.json`, `baselines/main/records/arc_easy.jsonl`, " in text
    assert text.endswith('(docs/ci.md, "Protected setup").\n\ntable\n')
    report.write_text("## regress: ✅ PASS\n")
    done = _run([*args, "--protected", "other/"], {})
    assert done.returncode == 0 and report.read_text() == "## regress: ✅ PASS\n"


def test_upsert_api_error_is_one_clear_line(github: tuple[FakeGitHub, str]) -> None:
    _, api = github
    with pytest.raises(RunFailed) as err:
        upsert_comment(api, REPO, 7, "report", "wrong-token")
    assert str(err.value) == f"GitHub API GET /repos/{REPO}/issues/7/comments: 401 Bad credentials"


def test_upsert_unreachable_server() -> None:
    with pytest.raises(RunFailed, match="cannot reach http://127.0.0.1:9"):
        upsert_comment("http://127.0.0.1:9", REPO, 7, "report", TOKEN)


# --- the entry point, as the action and the workflow_run commenter run it ---------------------


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    return subprocess.run(
        [sys.executable, "-m", "regress.report.github", *args],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_summary_and_outputs(tmp_path: Path) -> None:
    report_md = tmp_path / "report.md"
    report_md.write_text(
        "## Verdict: REGRESSION\n\n| task | Δ |\n|---|---|\n| arc_easy | -0.05 |\n"
    )
    report_json = tmp_path / "report.json"
    report_json.write_text(json.dumps({"verdict": "REGRESSION", "exit_code": 1}))
    env = {
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
    }
    done = _run(["summary", str(report_md)], env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "summary").read_text() == report_md.read_text()

    pairs = ["exit-code=1", f"report-md={report_md}"]
    done = _run(["outputs", "--report-json", str(report_json), *pairs], env)
    assert done.returncode == 0, done.stderr
    assert parse_github_output((tmp_path / "output").read_text()) == {
        "exit-code": "1",
        "report-md": str(report_md),
        "verdict": "REGRESSION",
    }


def test_cli_missing_environment_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "r.md").write_text("x")
    env = {"GITHUB_STEP_SUMMARY": ""}
    done = _run(["summary", str(tmp_path / "r.md")], env)
    assert done.returncode == 2
    assert done.stderr == (
        "regress.report.github summary: error: $GITHUB_STEP_SUMMARY is not set: "
        "run this inside GitHub Actions or set it\n"
    )


def test_cli_comment_from_pull_request_event(
    tmp_path: Path, github: tuple[FakeGitHub, str]
) -> None:
    state, api = github
    report = tmp_path / "report.md"
    event = _event(tmp_path, {"pull_request": {"number": 12}})
    env = {
        "GITHUB_API_URL": api,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_EVENT_PATH": str(event),
    }
    for verdict in ("REGRESSION", "PASS"):
        report.write_text(f"## Verdict: {verdict}\n")
        done = _run(
            ["comment", "--body-file", str(report), "--run-url", "https://x.invalid/r"], env
        )
        assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("PR #12: updated comment ")
    assert [c["body"] for c in state.marked(12)] == [
        f"{DEFAULT_MARKER}\n## Verdict: PASS\n\n"
        "[Workflow run, full report and records](https://x.invalid/r)\n"
    ]


def test_cli_comment_from_fork_artifact_checks_head_sha(
    tmp_path: Path, github: tuple[FakeGitHub, str]
) -> None:
    """workflow_run for a fork lists no PR: the artifact's number is used once it matches."""
    state, api = github
    state.heads[5] = "a" * 40
    (tmp_path / "report.md").write_text("## Verdict: PASS\n")
    (tmp_path / "pr-number").write_text("5\n")
    event = _event(tmp_path, {"workflow_run": {"id": 1, "pull_requests": []}})
    env = {
        "GITHUB_API_URL": api,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_EVENT_PATH": str(event),
    }
    base = ["comment", "--body-file", str(tmp_path / "report.md")]
    base += ["--pr-file", str(tmp_path / "pr-number")]

    done = _run(base, env)  # an unverified number is refused
    assert done.returncode == 2 and "--pr-file needs --head-sha" in done.stderr

    done = _run([*base, "--head-sha", "b" * 40], env)  # stale or forged: nothing posted
    assert done.returncode == 0 and "not commenting" in done.stdout
    assert state.marked(5) == []

    done = _run([*base, "--head-sha", "a" * 40], env)
    assert done.returncode == 0, done.stderr
    assert [c["body"] for c in state.marked(5)] == [f"{DEFAULT_MARKER}\n## Verdict: PASS\n"]

    (tmp_path / "pr-number").write_text("5; rm -rf /\n")
    done = _run([*base, "--head-sha", "a" * 40], env)
    assert done.returncode == 2 and "not a pull request number" in done.stderr


def test_a_pr_that_changes_the_gate_workflow_gets_no_report(
    tmp_path: Path, github: tuple[FakeGitHub, str]
) -> None:
    """A fork's pull_request run executes the PR's own copy of the gate's workflow, which can
    write any artifact: the commenter compares the file at the PR's head with the default
    branch's and withholds the report when they differ."""
    state, api = github
    workflow = ".github/workflows/accuracy-gate.yml"
    state.heads[5] = "a" * 40
    state.files[workflow, "main"] = "1" * 40
    (tmp_path / "report.md").write_text("## regress: ✅ PASS (3 units)\n")
    (tmp_path / "pr-number").write_text("5\n")
    env = {"GITHUB_API_URL": api, "GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN}
    base = ["comment", "--body-file", str(tmp_path / "report.md"), "--run-url", "https://r.invalid"]
    base += ["--pr-file", str(tmp_path / "pr-number"), "--head-sha", "a" * 40]
    base += ["--workflow-path", workflow, "--base-ref", "main"]

    state.files[workflow, "a" * 40] = "2" * 40  # the PR edited the workflow
    done = _run(base, env)
    assert done.returncode == 0, done.stderr
    assert "the report is withheld" in done.stdout
    [comment] = state.marked(5)
    assert "## regress: report withheld" in comment["body"] and "PASS" not in comment["body"]
    assert f"changes `{workflow}`" in comment["body"]

    state.files[workflow, "a" * 40] = "1" * 40  # the same file: the report is posted
    assert _run(base, env).returncode == 0
    [comment] = state.marked(5)
    assert "## regress: ✅ PASS (3 units)" in comment["body"]

    del state.files[workflow, "a" * 40]  # unreadable at the PR's head: fail closed, post nothing
    (tmp_path / "report.md").write_text("## regress: ✅ PASS (4 units)\n")
    done = _run(base, env)
    assert done.returncode == 3 and "(4 units)" not in state.marked(5)[0]["body"]
    done = _run(base[:-2], env)
    assert done.returncode == 2 and "--workflow-path needs --head-sha and --base-ref" in done.stderr


def test_cli_comment_skips_a_stale_run(tmp_path: Path, github: tuple[FakeGitHub, str]) -> None:
    """A same-repo workflow_run lists its PR; --head-sha still keeps an old run from
    overwriting the report of a newer push."""
    state, api = github
    state.heads[8] = "c" * 40
    (tmp_path / "report.md").write_text("## Verdict: PASS\n")
    event = _event(tmp_path, {"workflow_run": {"id": 1, "pull_requests": [{"number": 8}]}})
    env = {
        "GITHUB_API_URL": api,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_EVENT_PATH": str(event),
    }
    base = ["comment", "--body-file", str(tmp_path / "report.md"), "--head-sha"]
    done = _run([*base, "d" * 40], env)
    assert done.returncode == 0 and done.stdout == (
        f"PR #8 is at {'c' * 12}, not {'d' * 12}: not commenting\n"
    )
    assert state.marked(8) == []
    done = _run([*base, "c" * 40], env)
    assert done.returncode == 0, done.stderr
    assert len(state.marked(8)) == 1
