"""GitHub Actions glue for the gate: step summary, step outputs, the one PR comment, the verdict.

The composite action (action.yml) and the `workflow_run` commenter (comment.yml) run this as
`python -m regress.report.github SUBCOMMAND`. It uses only the standard library, so the
commenter can run it from a checkout of the default branch without installing anything, and it
never runs code from the pull request.

Subcommands:
  summary FILE                 append a Markdown report to $GITHUB_STEP_SUMMARY (1 MiB cap)
  outputs [--report-json F] K=V ...
                               write step outputs to $GITHUB_OUTPUT (adds `verdict` from F)
  comment --body-file F ...    create or update the PR comment carrying the hidden marker
                               (only one written by this token's user or the Actions bot)
  flag --changed-files F --protected P ... --report-md R
                               warn in the report when the PR changes the gate's own inputs
  gate --exit-code N --verdict V --fail-on X
                               exit nonzero when the job must fail
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from regress.core.errors import BadInput, ExitCode, RegressError, RunFailed

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_MARKER = "<!-- regress-report -->"
ACTIONS_BOT = "github-actions[bot]"
"""Who posts with an Actions token (which cannot read GET /user)."""
SUMMARY_LIMIT_BYTES = 1024 * 1024
"""GitHub rejects a step summary above 1 MiB."""
COMMENT_LIMIT = 65536
"""GitHub's maximum comment body, in characters; counted here in UTF-8 bytes (never more)."""
VERDICTS = ("PASS", "REGRESSION", "INCONCLUSIVE", "ERROR")
_PER_PAGE = 100
_TIMEOUT_S = 30
_TRUNCATED_NOTE = (
    "\n\n> **Note:** this report was cut to fit GitHub's size limit; the full report is in "
    "the workflow run's artifact.\n"
)
_NEXT_LINK = re.compile(r'<[^>]*>;\s*rel="next"')
# Every pattern stays on one line: a tag or image a cut left open must not swallow the
# report's following lines (it once erased every section after a `<video` in an answer).
# An @ that GitHub would turn into a mention: after no ASCII word character (GitHub's word
# characters are ASCII, so `@@name` and `café@name` ping too; `a@b.example` does not).
_MENTION = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9])")
_MD_IMAGE = re.compile(r"!\[[^\]\r\n]*\][ \t]?(?:\([^)\r\n]*\)|\[[^\]\r\n]*\])")
# An unterminated tag is removed to the end of its line only.
_HTML_MEDIA = re.compile(
    r"<[ \t]*/?[ \t]*(?:img|image|picture|source|video|audio|svg)\b[^>\r\n]*>?", re.I
)
_IMAGE_REMOVED = "[image removed]"
_FLAG_LIMIT = 20
"""Changed protected files listed in the report; the rest are counted."""


class FailOn(StrEnum):
    """Which verdicts fail the job, beyond a nonzero exit code of `regress check`."""

    REGRESSION = "regression"
    """Fail on a regression or an error (exit code 1, 2 or 3)."""
    INCONCLUSIVE = "inconclusive"
    """Also fail when the verdict is INCONCLUSIVE (exit code 0 under the default policy)."""


class CommentAction(StrEnum):
    """What `upsert_comment` did."""

    CREATED = "created"
    UPDATED = "updated"


@dataclass(frozen=True)
class CommentResult:
    """The comment `upsert_comment` left on the pull request."""

    action: CommentAction
    id: int
    url: str
    """The comment's page (html_url)."""


def truncate_utf8(text: str, limit: int) -> str:
    """Return `text` cut to at most `limit` UTF-8 bytes at a line end, with a note if cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    budget = max(0, limit - len(_TRUNCATED_NOTE.encode()))
    # errors="ignore" drops a multi-byte character split by the cut.
    head = data[:budget].decode(errors="ignore")
    # Cut at a line end so a Markdown table row is never left half-written.
    head = head[: head.rfind("\n")] if "\n" in head else head
    return head + _TRUNCATED_NOTE if budget else ""


def sanitize_markdown(text: str) -> str:
    """Report text made safe to post: no @mention notifies anyone, no image loads from outside.

    The report quotes model output (answers, flips), which a crafted model or dataset can fill
    with `@org/team` pings or tracking images. A zero-width space after `@` keeps the text
    readable and stops the mention; every Markdown or HTML image becomes a placeholder. Each
    pattern matches within one line, so hostile text never costs the report more than its line.
    """
    text = _MD_IMAGE.sub(_IMAGE_REMOVED, text)
    # An image split over lines (or using a reference defined elsewhere) keeps its `![`:
    # escaping the bracket leaves plain text.
    text = text.replace("![", "!\\[")
    text = _HTML_MEDIA.sub(_IMAGE_REMOVED, text)
    return _MENTION.sub("@\u200b", text)


def append_step_summary(markdown: str, path: Path, limit: int = SUMMARY_LIMIT_BYTES) -> int:
    """Append `markdown` (sanitized) to the step summary file at `path`, within `limit` bytes.

    Returns the number of bytes written. Text already in the file counts against the limit.
    """
    used = path.stat().st_size if path.exists() else 0
    markdown = sanitize_markdown(markdown)
    text = truncate_utf8(markdown if markdown.endswith("\n") else markdown + "\n", limit - used)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)
    return len(text.encode())


def write_outputs(outputs: Mapping[str, str], path: Path) -> None:
    """Append step outputs to the $GITHUB_OUTPUT file at `path`.

    A single-line value is written as `name=value`; a multiline one between heredoc delimiters
    chosen so that no line of the value can end it early.
    """
    lines: list[str] = []
    for name, value in outputs.items():
        if not name or "=" in name or "<<" in name or any(c.isspace() for c in name):
            raise BadInput(f"invalid output name {name!r}")
        if "\n" not in value and "\r" not in value:
            lines.append(f"{name}={value}\n")
            continue
        delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
        while delimiter in value:
            delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
        lines.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    with path.open("a", encoding="utf-8") as fh:
        fh.writelines(lines)


def pr_number_from_event(event_path: Path) -> int | None:
    """The pull request number in a `pull_request` or `workflow_run` event payload, if any.

    A `workflow_run` event lists no pull request when the PR comes from a fork: the caller
    then needs the number from the gate's artifact (see `comment` and `--pr-file`).
    """
    try:
        event = json.loads(event_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInput(f"cannot read the event payload {event_path}: {exc}") from exc
    if isinstance(event.get("pull_request"), dict):
        return int(event["pull_request"]["number"])
    pulls = (event.get("workflow_run") or {}).get("pull_requests") or []
    return int(pulls[0]["number"]) if pulls else None


def comment_body(
    report_md: str, marker: str = DEFAULT_MARKER, run_url: str = "", limit: int = COMMENT_LIMIT
) -> str:
    """The PR comment for a report: the marker line, the report (sanitized, cut to fit), a run
    link."""
    footer = f"\n\n[Workflow run, full report and records]({run_url})\n" if run_url else "\n"
    head = f"{marker}\n"
    room = limit - len(head.encode()) - len(footer.encode())
    report = sanitize_markdown(report_md).rstrip("\n")
    return head + truncate_utf8(report, room).rstrip("\n") + footer


def protected_changes(changed: Sequence[str], protected: Sequence[str]) -> list[str]:
    """The changed files (repository paths) that are the gate's own inputs.

    `protected` holds folders (ending in `/`: the baseline store) and files (the policy): a PR
    that changes them changes what it is judged against, which a reviewer must see.
    """
    folders = [_repo_path(p).rstrip("/") + "/" for p in protected if p.endswith("/")]
    files = {_repo_path(p) for p in protected if p and not p.endswith("/")}
    hits = {
        _repo_path(path)
        for path in changed
        if path.strip()
        and (_repo_path(path) in files or any(_repo_path(path).startswith(f) for f in folders))
    }
    return sorted(hits)


def _repo_path(path: str) -> str:
    path = path.strip()
    while path.startswith("./"):
        path = path[2:]
    return path


def protected_note(paths: Sequence[str]) -> str:
    """The report's warning that a PR changes the gate's own inputs (empty when it does not)."""
    if not paths:
        return ""
    shown = ", ".join(f"`{p}`" for p in paths[:_FLAG_LIMIT])
    more = f" and {len(paths) - _FLAG_LIMIT} more" if len(paths) > _FLAG_LIMIT else ""
    return (
        "> [!WARNING]\n"
        f"> **This pull request changes the gate's own inputs:** {shown}{more}. A PR can pass "
        "the gate by editing its baseline or loosening its policy: review these changes; a "
        'protected gate reads both from the base branch (docs/ci.md, "Protected setup").\n'
    )


def insert_note(report_md: str, note: str) -> str:
    """`report_md` with `note` after its first line (the verdict heading stays first)."""
    if not note:
        return report_md
    head, _, rest = report_md.partition("\n")
    rest = rest.lstrip("\n")
    # A blank line after the note, so the report's next line does not join the quote.
    return f"{head}\n\n{note}\n{rest}"


class _Api:
    """A minimal GitHub REST client: JSON in and out, errors as one clear line."""

    def __init__(self, api_url: str, token: str) -> None:
        if not token:
            raise BadInput("no GitHub token: set GITHUB_TOKEN (the action passes github-token)")
        self.base = api_url.rstrip("/")
        self.headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "regress",
        }

    def call(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> tuple[Any, Mapping[str, str]]:
        """Send one request; return the decoded JSON body and the response headers."""
        url = self.base + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = json.dumps(payload).encode() if payload is not None else None
        headers = {**self.headers, **({"Content-Type": "application/json"} if data else {})}
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
                return json.loads(response.read() or b"null"), response.headers
        except urllib.error.HTTPError as exc:
            raise RunFailed(f"GitHub API {method} {path}: {_describe(exc)}") from exc
        except (urllib.error.URLError, TimeoutError) as exc:
            raise RunFailed(f"GitHub API {method} {path}: cannot reach {self.base}: {exc}") from exc


def _describe(exc: urllib.error.HTTPError) -> str:
    """`403 Resource not accessible by integration (hint)` from an HTTP error response."""
    try:
        message = json.loads(exc.read()).get("message", "")
    except (ValueError, AttributeError):
        message = ""
    text = f"{exc.code} {message or exc.reason}".strip()
    if exc.code == 403:
        text += (
            " (the token needs `pull-requests: write`; a pull request from a fork gets a "
            "read-only token, so comment from the workflow_run workflow instead)"
        )
    return text


def _own_logins(api: _Api) -> set[str]:
    """Logins whose comments this token posted: its user, or the Actions bot for an Actions
    token (GET /user refuses an installation token)."""
    try:
        user, _ = api.call("GET", "/user")
    except RunFailed:
        return {ACTIONS_BOT}
    login = user.get("login") if isinstance(user, dict) else None
    return {login} if isinstance(login, str) and login else {ACTIONS_BOT}


def _find_marked_comment(
    api: _Api, repo: str, pr: int, marker: str, authors: set[str]
) -> dict[str, Any] | None:
    """The first comment on `pr` by one of `authors` whose body contains `marker`.

    Anyone can paste the marker into a comment; only our own comment is ever edited.
    """
    page = 1
    while True:
        comments, headers = api.call(
            "GET", f"/repos/{repo}/issues/{pr}/comments", {"per_page": _PER_PAGE, "page": page}
        )
        for comment in comments:
            author = (comment.get("user") or {}).get("login")
            if marker in (comment.get("body") or "") and author in authors:
                return comment
        if not _NEXT_LINK.search(headers.get("Link", "")):
            return None
        page += 1


def upsert_comment(
    api_url: str,
    repo: str,
    pr: int,
    body: str,
    token: str,
    marker: str = DEFAULT_MARKER,
    authors: set[str] | None = None,
) -> CommentResult:
    """Keep one comment on pull request `pr` of `repo` (`owner/name`) up to date.

    Finds the comment written by `authors` (default: the token's own login, else the Actions
    bot) whose body contains `marker` and replaces its body, or creates the comment if there
    is none. `body` gets the marker prepended if it lacks it, so the next run finds it again.
    """
    if marker not in body:
        body = f"{marker}\n{body}"
    api = _Api(api_url, token)
    existing = _find_marked_comment(api, repo, pr, marker, authors or _own_logins(api))
    if existing is None:
        made, _ = api.call("POST", f"/repos/{repo}/issues/{pr}/comments", payload={"body": body})
        return CommentResult(CommentAction.CREATED, int(made["id"]), made.get("html_url", ""))
    path = f"/repos/{repo}/issues/comments/{existing['id']}"
    made, _ = api.call("PATCH", path, payload={"body": body})
    return CommentResult(CommentAction.UPDATED, int(made["id"]), made.get("html_url", ""))


def pr_head_sha(api_url: str, repo: str, pr: int, token: str) -> str:
    """The commit at the head of pull request `pr` now."""
    pull, _ = _Api(api_url, token).call("GET", f"/repos/{repo}/pulls/{pr}")
    return str(pull["head"]["sha"])


def workflow_changed(api_url: str, repo: str, path: str, head: str, base: str, token: str) -> bool:
    """Whether commit `head` holds another copy of the workflow file `path` than `base` (the
    default branch) does. A pull request's run executes the PR's own copy, so a changed one
    could have written any report: the commenter must not post it as the gate's."""
    api = _Api(api_url, token)
    ours, _ = api.call("GET", f"/repos/{repo}/contents/{path}", query={"ref": base})
    theirs, _ = api.call("GET", f"/repos/{repo}/contents/{path}", query={"ref": head})
    return bool(ours["sha"] != theirs["sha"])


def withheld_body(path: str, marker: str, run_url: str = "") -> str:
    """The comment that stands in for a report the commenter will not post."""
    run = f" ([the run]({run_url}))" if run_url else ""
    return (
        f"{marker}\n## regress: report withheld\n\n"
        f"This pull request changes `{path}`, the workflow that ran the gate{run}, so that run "
        "executed the pull request's own copy and its report cannot be trusted as the gate's. "
        "Review the workflow change; the gate runs as configured once it is merged.\n"
    )


def verdict_from_report(path: Path) -> str:
    """The top-level verdict of a JSON report; ERROR when the run wrote no report."""
    if not path.exists():
        return "ERROR"
    try:
        verdict = json.loads(path.read_text(encoding="utf-8"))["verdict"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"{path}: not a regress JSON report with a verdict ({exc})") from exc
    if verdict not in VERDICTS:
        raise BadInput(f"{path}: unknown verdict {verdict!r}")
    return str(verdict)


def should_fail(exit_code: int, verdict: str, fail_on: FailOn) -> bool:
    """Whether the job fails: any nonzero exit, or INCONCLUSIVE when failing on it."""
    if exit_code != ExitCode.OK:
        return True
    return fail_on is FailOn.INCONCLUSIVE and verdict == "INCONCLUSIVE"


def _env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise BadInput(f"${name} is not set: run this inside GitHub Actions or set it")
    return value


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from exc


def _cmd_summary(args: argparse.Namespace) -> int:
    written = append_step_summary(_read(args.report), Path(_env("GITHUB_STEP_SUMMARY")), args.limit)
    print(f"step summary: {written} bytes from {args.report}")
    return ExitCode.OK


def _cmd_outputs(args: argparse.Namespace) -> int:
    pairs: dict[str, str] = {}
    for item in args.pairs:
        name, sep, value = item.partition("=")
        if not sep:
            raise BadInput(f"expected NAME=VALUE, got {item!r}")
        pairs[name] = value
    if args.report_json is not None:
        pairs["verdict"] = verdict_from_report(args.report_json)
    write_outputs(pairs, Path(_env("GITHUB_OUTPUT")))
    print("outputs: " + ", ".join(f"{k}={v}" for k, v in pairs.items()))
    return ExitCode.OK


def _resolve_pr(args: argparse.Namespace, api_url: str, repo: str, token: str) -> int | None:
    """The PR to comment on; None when the PR's head has moved past the commit the gate ran on.

    Order: --pr, then the event payload, then --pr-file (from the gate's artifact, which a
    fork's run could write: it is used only with --head-sha to check it against).
    """
    number = args.pr
    if number is None and os.environ.get("GITHUB_EVENT_PATH"):
        number = pr_number_from_event(Path(os.environ["GITHUB_EVENT_PATH"]))
    if number is None:
        if args.pr_file is None:
            raise BadInput("no pull request number in the event: pass --pr or --pr-file")
        if not args.head_sha:
            raise BadInput("--pr-file needs --head-sha to check the number against the PR's head")
        text = _read(args.pr_file).strip()
        if not text.isdigit():
            raise BadInput(f"{args.pr_file}: not a pull request number: {text[:40]!r}")
        number = int(text)
    if args.head_sha:
        head = pr_head_sha(api_url, repo, number, token)
        if head != args.head_sha:
            # A newer push (whose own run will comment), or a number that is not this run's PR.
            print(f"PR #{number} is at {head[:12]}, not {args.head_sha[:12]}: not commenting")
            return None
    return number


def _cmd_comment(args: argparse.Namespace) -> int:
    api_url = os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL
    repo = args.repo or _env("GITHUB_REPOSITORY")
    token = _env("GITHUB_TOKEN")
    pr = _resolve_pr(args, api_url, repo, token)
    if pr is None:
        return ExitCode.OK
    body = comment_body(_read(args.body_file), args.marker, args.run_url)
    if args.workflow_path:
        if not (args.head_sha and args.base_ref):
            raise BadInput("--workflow-path needs --head-sha and --base-ref to compare the file")
        path = args.workflow_path
        if workflow_changed(api_url, repo, path, args.head_sha, args.base_ref, token):
            print(f"{path} differs at {args.head_sha[:12]}: the report is withheld")
            body = withheld_body(path, args.marker, args.run_url)
    result = upsert_comment(api_url, repo, pr, body, token, args.marker)
    print(f"PR #{pr}: {result.action} comment {result.id} {result.url}".rstrip())
    return ExitCode.OK


def _cmd_flag(args: argparse.Namespace) -> int:
    changed = _read(args.changed_files).splitlines()
    paths = protected_changes(changed, args.protected)
    if not paths:
        print("flag: the PR changes no protected path")
        return ExitCode.OK
    report = _read(args.report_md)
    try:
        args.report_md.write_text(insert_note(report, protected_note(paths)), encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot write {args.report_md}: {exc.strerror}") from exc
    # One workflow-command line per run, so the warning also shows on the run's page.
    print(f"::warning::this PR changes the gate's own inputs: {', '.join(paths[:_FLAG_LIMIT])}")
    return ExitCode.OK


def _cmd_gate(args: argparse.Namespace) -> int:
    if not should_fail(args.exit_code, args.verdict, args.fail_on):
        print(f"regress: verdict {args.verdict}, exit code {args.exit_code}: the gate passes")
        return ExitCode.OK
    print(
        f"regress: verdict {args.verdict}, exit code {args.exit_code}, fail-on {args.fail_on}: "
        "failing the job"
    )
    return args.exit_code or ExitCode.REGRESSION


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m regress.report.github",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    summary = sub.add_parser("summary", help="append a Markdown report to the step summary")
    summary.add_argument("report", type=Path)
    summary.add_argument("--limit", type=int, default=SUMMARY_LIMIT_BYTES)
    summary.set_defaults(run=_cmd_summary)

    outputs = sub.add_parser("outputs", help="write step outputs")
    outputs.add_argument("pairs", nargs="*", metavar="NAME=VALUE")
    outputs.add_argument("--report-json", type=Path, help="add `verdict` from this report")
    outputs.set_defaults(run=_cmd_outputs)

    comment = sub.add_parser("comment", help="create or update the PR comment")
    comment.add_argument("--body-file", type=Path, required=True)
    comment.add_argument("--pr", type=int, help="default: from $GITHUB_EVENT_PATH")
    comment.add_argument("--pr-file", type=Path, help="PR number written by the gate run")
    comment.add_argument("--head-sha", default="", help="comment only if the PR is still here")
    comment.add_argument("--repo", help="owner/name; default $GITHUB_REPOSITORY")
    comment.add_argument("--marker", default=DEFAULT_MARKER)
    comment.add_argument("--run-url", default="", help="link to the run with the artifact")
    comment.add_argument(
        "--workflow-path", help="the gate's workflow file: withhold the report if the PR changed it"
    )
    comment.add_argument("--base-ref", help="the default branch, with --workflow-path")
    comment.set_defaults(run=_cmd_comment)

    flag = sub.add_parser("flag", help="warn in the report about changed protected paths")
    flag.add_argument("--changed-files", type=Path, required=True, help="one path per line")
    flag.add_argument(
        "--protected", nargs="+", required=True, help="folders (ending in /) and files"
    )
    flag.add_argument("--report-md", type=Path, required=True)
    flag.set_defaults(run=_cmd_flag)

    gate = sub.add_parser("gate", help="exit nonzero when the job must fail")
    gate.add_argument("--exit-code", type=int, required=True)
    gate.add_argument("--verdict", choices=VERDICTS, required=True)
    gate.add_argument("--fail-on", type=FailOn, choices=list(FailOn), required=True)
    gate.set_defaults(run=_cmd_gate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; a RegressError becomes one line on stderr and its exit code."""
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except RegressError as exc:
        print(f"regress.report.github {args.command}: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)


if __name__ == "__main__":
    sys.exit(main())
