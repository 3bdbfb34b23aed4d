"""The pairwise judge against a scripted judge server on 127.0.0.1.

The server speaks OpenAI's chat API and judges by rules, with a position bias and
unparseable replies on purpose: a `+` in an answer makes it better; between equals it always
names the answer shown first; `GARBLE` gets a reply with no verdict and `TWICE` one with two.
Every expected count below follows from those rules by hand, and every p-value is checked
against the gate's own accuracy test on the same counts.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from test_compare import run

from regress.checks import CandidateModel, CheckOptions, check
from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.core.manifest import TaskInfo
from regress.core.records import Record
from regress.core.store import write_run
from regress.gate.compare import compare
from regress.gate.policy import Metric, Policy, Requirement, parse_policy
from regress.gate.results import UnitKind, Verdict
from regress.run.judge import JudgeSpec, Outcome, judge_id, outcome_of
from regress.stats import PairedCounts, Rule, Side, accuracy_n, mcnemar_pvalue, regression
from regress.stats import Test as McNemar
from regress.tasks import get_tasks
from regress.tasks.base import DataSource, doc_hash
from regress.tasks.judge_templates import BUILTIN, judge_template

SHA = "a" * 64
_ANSWERS = re.compile(r"\[Answer A\]\n(.*?)\n\n\[Answer B\]\n(.*?)\n\nVerdict:", re.S)
_GRADED = re.compile(r"\[Answer(?: to grade)?\]\n(.*?)\n\n(?:Rating|Feedback): ", re.S)


def _grade(prompt: str, answer: str) -> str:
    """The scripted grader: 3 of 5 (rubric) or 5 of 10 (single), a point more per "+"."""
    if "GARBLE" in answer:
        return "Hard to say."
    if "Rating: " in prompt:
        return f"Clear enough. [[{min(10, 5 + answer.count('+'))}]]"
    return f"Mostly right. [RESULT] {min(5, 3 + answer.count('+'))}"


class _Judge(BaseHTTPRequestHandler):
    """The scripted judge (see the module docstring); counts the judgements it is asked."""

    calls = 0
    prompts: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._send({"data": [{"id": "scripted-judge"}]})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self.path.endswith("/chat/completions"):
            # A chat-only server, as many judges are: the backend's batch probe
            # (regress.backends.batch_probe) finds no completions endpoint and is not counted.
            self.send_error(404)
            return
        type(self).calls += 1
        prompt = body["messages"][-1]["content"]
        type(self).prompts.append(prompt)
        graded = _GRADED.search(prompt)
        if graded:
            self._reply(prompt, _grade(prompt, graded.group(1)))
            return
        a, b = _ANSWERS.search(prompt).groups()
        if "GARBLE" in a + b:
            reply = "Both answers have merit; I cannot say."
        elif "TWICE" in a + b:
            reply = "A is clearer. [[A]] On reflection, [[B]]."
        elif a.count("+") != b.count("+"):
            reply = "A is better. [[A]]" if a.count("+") > b.count("+") else "B wins. [[B]]"
        else:
            reply = "The first answer is better. [[A]]"  # position bias between equals
        self._reply(prompt, reply)

    def _reply(self, prompt: str, reply: str) -> None:
        usage = {"prompt_tokens": len(prompt) // 4, "completion_tokens": 7}
        choice = {"message": {"content": reply}, "finish_reason": "stop", "index": 0}
        self._send({"choices": [choice], "usage": usage})

    def _send(self, answer: dict) -> None:
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def judge_server() -> Iterator[tuple[str, type[_Judge]]]:
    handler = type("Judge", (_Judge,), {"calls": 0, "prompts": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()


def _spec(url: str, **changes: object) -> JudgeSpec:
    args = {"base_url": url, "model_sha256": SHA, "concurrency": 2}
    return replace(JudgeSpec("scripted-judge", backend="openai", model_args=args), **changes)


def _runs(candidate_answers: dict[int, str]) -> tuple:
    """open_answers runs whose baseline answers every item "answer k" and whose candidate
    answers as given (default: the same), with the real items' hashes."""
    task = get_tasks(["open_answers"])[0]
    examples = task.examples(DataSource())
    info = TaskInfo(
        "open_answers", None, len(examples), 0, "judged", "generate_until", "d" * 64, "p" * 64
    )

    def records(answers: dict[int, str]) -> list[Record]:
        return [
            Record(
                "open_answers",
                e.doc_id,
                doc_hash(e.doc),
                "x",
                None,
                answers.get(e.doc_id, f"answer {e.doc_id}"),
                None,
                {"answer_chars": 8.0},
            )
            for e in examples
        ]

    return (
        run("base", {"open_answers": records({})}, [info]),
        run("cand", {"open_answers": records(candidate_answers)}, [info]),
    )


def _policy(spec: JudgeSpec, **changes: object) -> Policy:
    return replace(Policy(min_examples=30, judge=spec), **changes)


def _mixed() -> dict[int, str]:
    """Candidate answers: 30 better (wins), 2 garbled (judge errors), 8 equal (ties: the
    position-biased judge names A in both orders, which are opposite sides)."""
    answers = {k: f"answer {k} +" for k in range(30)}
    answers |= {30: "answer 30 GARBLE", 31: "answer 31 GARBLE"}
    return answers


def test_orders_combine_as_fastchat_does() -> None:
    assert outcome_of("candidate", "candidate") == (Outcome.WIN, True)
    assert outcome_of("baseline", "baseline") == (Outcome.LOSS, True)
    assert outcome_of("candidate", "baseline") == (Outcome.TIE, False)
    assert outcome_of("tie", "tie") == (Outcome.TIE, True)
    assert outcome_of("tie", "candidate") == (Outcome.TIE, False)
    assert outcome_of(None, "candidate") == (Outcome.JUDGE_ERROR, None)


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("B is better.\n[[B]]", "B"),
        ("[[C]]", "C"),
        ("[[A]] and again [[A]]", "A"),  # the same verdict twice is one verdict
        ("[[A]] no, [[B]]", None),
        ("Answer A is better.", None),
        ("[[D]]", None),
    ],
)
def test_a_reply_names_exactly_one_verdict_or_none(reply: str, verdict: str | None) -> None:
    assert BUILTIN["pairwise"].read(reply) == verdict


def test_scores_are_read_strictly() -> None:
    assert BUILTIN["single"].read("Good. [[7]]") == "7"
    assert BUILTIN["single"].read("[[10.0]]") == "10"
    assert BUILTIN["single"].read("[[11]]") is None
    assert BUILTIN["rubric"].read("Feedback: fine [RESULT] 4") == "4"
    assert BUILTIN["rubric"].read("[RESULT] 6") is None


def test_a_template_renders_braces_in_answers_literally() -> None:
    text = BUILTIN["pairwise"].render("Q {x}?", answer_a="{answer_b}", answer_b="b {0}")
    assert "[Answer A]\n{answer_b}\n\n[Answer B]\nb {0}\n" in text


def test_a_template_file_needs_its_placeholders(tmp_path: Path) -> None:
    path = tmp_path / "mine.txt"
    path.write_text("Judge {question}: {answer_a}\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"needs \{answer_b\}"):
        judge_template(str(path))
    with pytest.raises(BadInput, match="neither built in"):
        judge_template("no-such-template")


def test_wins_losses_ties_and_errors_are_gated_as_paired_counts(judge_server) -> None:
    url, server = judge_server
    base, cand = _runs(_mixed())
    result = check(base, cand, CheckOptions(policy=_policy(_spec(url))))
    (unit,) = result.comparison.units
    judged = unit.judged
    assert (judged.wins, judged.losses, judged.ties, judged.judge_errors) == (30, 0, 8, 2)
    # Every example asked in both orders, the garbled ones too; the 8 equal answers make
    # both orders one prompt, asked once.
    assert server.calls == judged.calls == 72
    # The 8 equal pairs: A in both orders, so opposite sides: none consistent.
    assert judged.consistency == pytest.approx(30 / 38)
    assert judged.win_rate == pytest.approx((30 + 4) / 38)
    low, high = judged.win_rate_ci
    assert low < judged.win_rate < high
    assert unit.candidate_failures == {"judge_error": 2}
    assert unit.error_rate == pytest.approx(2 / 40)
    # The same test as an accuracy unit with b = losses, c = wins on the examples judged.
    oracle = _accuracy_oracle(n=38, b=0, c=30, policy=_policy(_spec(url)))
    assert (unit.n, unit.b, unit.c) == (38, 0, 30)
    assert unit.pvalue == oracle.pvalue and unit.pass_pvalue == oracle.pass_pvalue
    assert unit.verdict is oracle.verdict
    lines = [j.to_dict() for j in result.judgements]
    garbled = next(line for line in lines if line["doc_id"] == 30)
    assert garbled["outcome"] == "judge_error" and garbled["verdicts"] == [None, None]
    assert garbled["replies"][0] == "Both answers have merit; I cannot say."


def _accuracy_oracle(n: int, b: int, c: int, policy: Policy):
    """The gate's plain accuracy unit on the same counts (no judge involved)."""
    from test_compare import info, record

    ours = [1] * b + [0] * c + [0] * (n - b - c)
    theirs = [0] * b + [1] * c + [0] * (n - b - c)
    base = run("b", {"t": [record("t", i, x) for i, x in enumerate(ours)]}, [info("t")])
    cand = run("c", {"t": [record("t", i, y) for i, y in enumerate(theirs)]}, [info("t")])
    (unit,) = compare(base, cand, replace(policy, judge=None)).units
    assert unit.kind is UnitKind.ACCURACY
    return unit


def test_a_worse_candidate_is_a_regression_with_its_losses_listed(judge_server) -> None:
    url, _ = judge_server
    worse = {k: f"answer {k}" for k in range(40)}
    base, cand = _runs(worse)
    # The baseline is the better side on 25 items: give its answers the "+" instead.
    base = replace(
        base,
        records={
            "open_answers": [
                replace(r, pred=f"{r.pred} +") if r.doc_id < 25 else r
                for r in base.records["open_answers"]
            ]
        },
    )
    result = check(base, cand, CheckOptions(policy=_policy(_spec(url)))).comparison
    (unit,) = result.units
    assert (unit.judged.wins, unit.judged.losses, unit.judged.ties) == (0, 25, 15)
    oracle = _accuracy_oracle(n=40, b=25, c=0, policy=_policy(_spec(url)))
    assert unit.verdict is Verdict.REGRESSION is oracle.verdict
    assert result.exit_code is ExitCode.REGRESSION
    assert unit.adjusted_pvalue == oracle.adjusted_pvalue
    regressed = [f for f in result.flips if f.regressed]
    assert len(regressed) == 25 and regressed[0].baseline_pred == "answer 0 +"


def test_an_inconsistent_judge_leaves_the_unit_inconclusive(judge_server) -> None:
    url, _ = judge_server
    base, cand = _runs({})  # equal answers: the biased judge names A in both orders
    lenient = _policy(_spec(url, min_consistency=0.0), max_drop=0.2)
    (unit,) = check(base, cand, CheckOptions(policy=lenient)).comparison.units
    assert unit.judged.consistency == 0.0 and unit.verdict is Verdict.PASS
    strict = _policy(_spec(url, min_consistency=0.6), max_drop=0.2)
    (unit,) = check(base, cand, CheckOptions(policy=strict)).comparison.units
    assert unit.verdict is Verdict.INCONCLUSIVE
    assert "same side in both orders on 0% of pairs (min_consistency 60%)" in unit.reason


def test_a_judge_that_cannot_answer_is_an_error_not_a_regression(judge_server) -> None:
    url, _ = judge_server
    base, cand = _runs({k: f"answer {k} GARBLE" for k in range(10)})
    result = check(base, cand, CheckOptions(policy=_policy(_spec(url)))).comparison
    (unit,) = result.units
    assert unit.verdict is Verdict.ERROR and result.exit_code is ExitCode.RUN_FAILED
    assert unit.error_rate == pytest.approx(10 / 40)


def test_a_failed_answer_loses_without_asking_the_judge(judge_server) -> None:
    url, server = judge_server
    base, cand = _runs({})
    failed = [
        replace(r, status="timeout", pred=None, error="slow") if r.doc_id == 0 else r
        for r in cand.records["open_answers"]
    ]
    cand = replace(cand, records={"open_answers": failed})
    result = check(base, cand, CheckOptions(policy=_policy(_spec(url))))
    first = result.judgements[0]
    assert first.outcome is Outcome.LOSS and first.consistent is None
    assert first.replies[0].startswith("not judged: the candidate's run failed")
    assert server.calls == 39  # the other 39: equal answers, both orders one prompt


def test_verdicts_are_cached_under_the_judges_identity(judge_server, tmp_path: Path) -> None:
    url, server = judge_server
    base, cand = _runs(_mixed())
    options = CheckOptions(policy=_policy(_spec(url)), cache_dir=tmp_path)
    first = check(base, cand, options)
    asked = server.calls
    # Failed results are not cached (a timeout deserves a retry); the garbled replies are
    # answers, so they are.
    again = check(base, cand, options)
    assert server.calls == asked == 72
    assert again.comparison.units == first.comparison.units
    (use,) = [u for u in again.comparison.cache if u.run == "judge"]
    # The 8 equal answers make both orders one prompt: 72 distinct verdicts replayed.
    assert (use.replayed, use.computed) == (72, 0)
    # A new seed is another judge: nothing replays.
    reseeded = replace(options, policy=_policy(_spec(url, seed=1)))
    check(base, cand, reseeded)
    assert server.calls == 144
    # So is an edited template.
    path = tmp_path / "mine.txt"
    path.write_text(BUILTIN["pairwise"].text.replace("impartial", "fair"), encoding="utf-8")
    edited = replace(options, policy=_policy(_spec(url, template=str(path))))
    result = check(base, cand, edited).comparison
    assert server.calls == 216
    assert result.units[0].judged.identity["template_sha256"] != BUILTIN["pairwise"].sha256


def test_without_a_judge_the_unit_is_left_out_and_said_so() -> None:
    base, cand = _runs(_mixed())
    result = compare(base, cand, Policy())
    assert result.units == ()
    assert "unit open_answers: only a judge can score it, and none did" in result.warnings[0]


def test_a_conversation_is_judged_whole_every_turn_and_each_reply(judge_server) -> None:
    """A conversation unit named in `judge.units` is judged pairwise on whole conversations:
    the judge reads every user turn and each side's reply to each (the scripted judge prefers
    the side whose replies hold more "+": here the candidate's last reply)."""
    url, server = judge_server
    examples = get_tasks(["conversations"])[0].examples(DataSource())
    info = TaskInfo(
        "conversations", None, len(examples), 0, "conv_pass", "generate_until", "d" * 64, "p" * 64
    )

    def records(last: str) -> list[Record]:
        out = []
        for e in examples:
            turns = len(e.doc["turns"])
            replies = [f"reply {t + 1}" + (last if t == turns - 1 else "") for t in range(turns)]
            out.append(
                Record(
                    "conversations",
                    e.doc_id,
                    doc_hash(e.doc),
                    "x",
                    None,
                    replies,
                    1,
                    {"conv_pass": 1.0},
                )  # fmt: skip
            )
        return out

    base = run("base", {"conversations": records("")}, [info])
    cand = run("cand", {"conversations": records(" +")}, [info])
    policy = _policy(replace(_spec(url), units=("conversations",)), min_examples=10)
    result = check(base, cand, CheckOptions(policy=policy))
    (unit,) = result.comparison.units
    assert (unit.judged.wins, unit.judged.losses) == (len(examples), 0)
    assert server.calls == 2 * len(examples)
    first = examples[0].doc
    n = len(first["turns"])
    [prompt, _] = [p for p in server.prompts if first["turns"][0]["user"] in p]
    for i, turn in enumerate(first["turns"], 1):
        assert f"User, turn {i} of {n}: {turn['user']}" in prompt
        assert f"Assistant, turn {i}: reply {i}" in prompt
    assert f"(System message: {first['system']})" in prompt


def test_the_same_weights_under_another_path_or_name_are_the_same_judge() -> None:
    spec = _spec("http://127.0.0.1:9/v1")
    renamed = replace(spec, model="another-alias")
    assert judge_id(renamed.identity()) == judge_id(spec.identity())
    assert "model" not in spec.identity() and spec.identity()["model_sha256"] == SHA
    # Without the weights' sha256, the name is all that tells two judges apart.
    unpinned = replace(spec, model_args={"base_url": "http://127.0.0.1:9/v1"})
    other = replace(unpinned, model="another-alias")
    assert judge_id(unpinned.identity()) != judge_id(other.identity())
    assert judge_id(replace(spec, seed=1).identity()) != judge_id(spec.identity())


def test_a_misspelt_judged_unit_is_reported(judge_server) -> None:
    url, _ = judge_server
    base, cand = _runs({})
    policy = _policy(_spec(url, units=("open_answer",), min_consistency=0.0))
    result = check(base, cand, CheckOptions(policy=policy)).comparison
    assert "the judge's units name 'open_answer', which is not in this suite" in result.warnings


def test_the_policy_block_is_read_and_checked() -> None:
    policy = parse_policy(
        {"judge": {"model": "judge.gguf", "template": "pairwise_reference", "seed": 3}}
    )
    assert policy.judge.template == "pairwise_reference" and policy.judge.seed == 3
    assert policy.to_dict()["judge"]["min_consistency"] == 0.6
    with pytest.raises(BadInput, match="unknown policy key 'judge.temprature'"):
        parse_policy({"judge": {"model": "j", "temprature": 0}})
    with pytest.raises(BadInput, match="judge.model must be a model"):
        parse_policy({"judge": {"template": "pairwise"}})
    assert parse_policy({"judge": {"model": "j", "template": "rubric"}}).judge.template == "rubric"
    with pytest.raises(BadInput, match="asks in single mode, not rubric"):
        parse_policy({"judge": {"model": "j", "template": "single", "mode": "rubric"}})


def _cli_check(url: str, tmp_path: Path, *extra: str) -> str:
    """`regress check` of the mixed candidate's stored run under the scripted judge."""
    base, cand = _runs(_mixed())
    write_run(base, tmp_path / "store" / "main")
    write_run(cand, tmp_path / "cand")
    policy = tmp_path / "policy.yaml"
    block = {"model": "scripted-judge", "backend": "openai", "model_args": _spec(url).model_args}
    policy.write_text(json.dumps({"min_examples": 30, "judge": block}), encoding="utf-8")
    result = CliRunner().invoke(
        cli,
        [
            "check", "--baseline", "main", "--store", str(tmp_path / "store"),
            "--candidate-run", str(tmp_path / "cand"), "--policy", str(policy), "--no-cache",
            *extra,
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output


def test_check_writes_the_judgements_file(judge_server, tmp_path: Path) -> None:
    url, _ = judge_server
    out = tmp_path / "judgements.jsonl"
    assert "### Judged units" in _cli_check(url, tmp_path, "--judgements", str(out))
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 40 and {line["judge"] for line in lines} == {lines[0]["judge"]}
    outcomes = [line["outcome"] for line in lines]
    assert outcomes.count("win") == 30 and outcomes.count("judge_error") == 2


def test_the_report_prices_the_judges_calls_at_the_judges_own_prices(
    judge_server, tmp_path: Path
) -> None:
    url, server = judge_server
    gate = tmp_path / "gate.json"
    _cli_check(url, tmp_path, "--report-json", str(gate))
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "input_per_1k: 9\ncurrency: EUR\njudge: {input_per_1k: 0.5, output_per_1k: 2}\n"
    )
    page = tmp_path / "exec.html"
    args = ["report", str(gate), "--view", "exec", "--prices", str(prices), "-o", str(page)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    [judged] = [u["judged"] for u in json.loads(gate.read_text())["units"]]
    prompt, completion = judged["tokens"]["prompt"], judged["tokens"]["completion"]
    # What the scripted server said it used: 7 generated tokens a call, 72 calls (both orders
    # of 40 examples, but one for each of the 8 whose answers are equal).
    assert judged["calls"] == server.calls == 72 and completion == 7 * 72
    cost = prompt / 1000 * 0.5 + completion / 1000 * 2
    text = page.read_text()
    row = re.search(r"<h3>Judge calls</h3><table>.*?</table>", text, re.S)
    assert row and f"{prompt:,} + {completion:,}" in row.group()
    assert f"{cost:.6f} EUR" in row.group() and f"{cost / 40:.6f} EUR" in row.group()
    assert judged["judge"] in row.group()


@pytest.mark.parametrize("bias", [0.3, 0.8])
def test_the_judged_gate_holds_alpha_with_a_biased_inconsistent_judge(bias: float) -> None:
    """No change (each side's answer equally likely the better), a judge that names the
    answer shown first with probability `bias` whatever it says, else the better one:
    P(REGRESSION) of the change rule (H0: no drop) stays at most alpha."""
    rng = np.random.default_rng(7)
    runs_, alpha = 2000, 0.05
    found = [_regressed(rng, 150, 0.5, bias, Rule.CHANGE, alpha) for _ in range(runs_)]
    # Three Monte Carlo standard errors above alpha: a leak of alpha would show.
    assert np.mean(found) <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / runs_)


def test_the_judged_gate_finds_a_ten_point_win_rate_shift_at_the_planned_n() -> None:
    """The candidate's answer is the better one on 40% of examples: a true win rate ten
    points under even. The judge (position bias 0.3) says so in both orders on 70% of each
    side's: wins 0.7 x 0.4, losses 0.7 x 0.6, the rest ties. The gate's planner gives the n
    for 80% power against that drop (margin rule, max_drop 0.05); simulated at that n, the
    judged gate finds the drop 80% of the time, to Monte Carlo error."""
    wins, losses = 0.7 * 0.4, 0.7 * 0.6
    n = accuracy_n(wins + losses, losses - wins, 0.05, Rule.MARGIN, 0.05, 0.8)
    rng = np.random.default_rng(11)
    found = [_regressed(rng, n, 0.4, 0.3, Rule.MARGIN, 0.05) for _ in range(500)]
    assert abs(np.mean(found) - 0.8) <= 3 * np.sqrt(0.8 * 0.2 / 500)


def _regressed(
    rng: np.random.Generator, n: int, p_candidate_better: float, bias: float, rule: Rule,
    alpha: float,
) -> bool:  # fmt: skip
    """One simulated judged unit: each example's better side, the judge's two orders,
    combined by `outcome_of` into losses (b) and wins (c), and the rule's test as the gate
    runs it for a lone accuracy unit (the scripted-judge tests above show a judged unit's
    p-values are exactly that unit's)."""
    b = c = 0
    for cand_better in rng.random(n) < p_candidate_better:
        truth = "candidate" if cand_better else "baseline"
        first = (
            "baseline" if rng.random() < bias else truth,  # order 1 shows the baseline first
            "candidate" if rng.random() < bias else truth,
        )
        outcome, _ = outcome_of(*first)
        b += outcome is Outcome.LOSS
        c += outcome is Outcome.WIN
    max_drop = 0.05
    if rule is Rule.CHANGE:
        p = mcnemar_pvalue(b, c, McNemar.MIDP)
    else:
        p = PairedCounts(b, c, n).pvalue(max_drop, Side.BEYOND)
    return bool(regression(rule, alpha, p, (b - c) / n, max_drop))


def _score_oracle(before: list[float], after: list[float], policy: Policy):
    """The gate's plain score unit on the same per-example values (no judge involved)."""
    from test_compare import info

    def records(values: list[float]) -> list[Record]:
        return [
            Record("t", i, f"t-{i}", "x", None, None, None, {"quality": v})
            for i, v in enumerate(values)
        ]

    infos = [info("t", metric="quality", output_type="generate_until")]
    base, cand = run("b", {"t": records(before)}, infos), run("c", {"t": records(after)}, infos)
    (unit,) = compare(base, cand, replace(policy, judge=None)).units
    assert unit.kind is UnitKind.SCORE
    return unit


def test_a_rubric_judge_gates_the_mean_score(judge_server) -> None:
    url, server = judge_server
    base, cand = _runs({k: f"answer {k} +" for k in range(20)})
    policy = _policy(_spec(url, template="rubric"), max_drop=0.05)
    result = check(base, cand, CheckOptions(policy=policy))
    (unit,) = result.comparison.units
    judged = unit.judged
    # Each answer graded once: 3 of 5, or 4 with a "+" (scaled: 0.5 and 0.75); the 20 equal
    # pairs are one prompt each.
    assert server.calls == judged.calls == 60
    assert judged.mode == "rubric" and judged.scores == (3.0, 3.5)
    assert (judged.wins, judged.losses, judged.ties, judged.consistency) == (20, 0, 20, None)
    assert judged.quality_ci[0] < 3.5 < judged.quality_ci[1]
    assert unit.kind is UnitKind.SCORE and unit.delta == pytest.approx(0.125)
    oracle = _score_oracle([0.5] * 40, [0.75] * 20 + [0.5] * 20, policy)
    assert (unit.pvalue, unit.pass_pvalue, unit.verdict) == (
        oracle.pvalue,
        oracle.pass_pvalue,
        oracle.verdict,
    )
    assert result.judgements[0].verdicts == ("3", "4")
    assert result.judgements[0].replies[1] == "Mostly right. [RESULT] 4"


def test_a_single_grade_drop_is_a_regression_and_a_garbled_grade_an_error(judge_server) -> None:
    url, _ = judge_server
    base, cand = _runs({k: f"answer {k} GARBLE" if k == 39 else f"answer {k}" for k in range(40)})
    base = replace(
        base,
        records={
            "open_answers": [
                replace(r, pred=f"{r.pred} ++") if r.doc_id < 30 else r
                for r in base.records["open_answers"]
            ]
        },
    )
    policy = _policy(_spec(url, template="single"), max_drop=0.05)
    result = check(base, cand, CheckOptions(policy=policy)).comparison
    (unit,) = result.units
    # Baseline 7 of 10 on 30 items (scaled 6/9), 5 elsewhere (4/9); the candidate 5 (4/9).
    assert unit.judged.scores == pytest.approx(((30 * 7 + 9 * 5) / 39, 5.0))
    assert unit.judged.judge_errors == 1 and unit.candidate_failures == {"judge_error": 1}
    oracle = _score_oracle([6 / 9] * 30 + [4 / 9] * 9, [4 / 9] * 39, policy)
    assert unit.verdict is Verdict.REGRESSION is oracle.verdict
    assert unit.pvalue == oracle.pvalue


def test_a_grader_that_gives_every_answer_one_score_decides_nothing(judge_server) -> None:
    url, _ = judge_server
    base, cand = _runs({})  # every answer alike: the scripted grader gives each a 3
    policy = _policy(_spec(url, template="rubric"), max_drop=0.2)
    (unit,) = check(base, cand, CheckOptions(policy=policy)).comparison.units
    assert unit.judged.distinct_scores == 1 and unit.delta == 0.0
    # The same zero change from a grader that tells answers apart passes (the oracle).
    assert _score_oracle([0.5] * 40, [0.5] * 40, policy).verdict is Verdict.PASS
    assert unit.verdict is Verdict.INCONCLUSIVE
    assert unit.reason.startswith("the judge gave every answer the same score (3)")


def test_a_quality_gate_tests_the_candidates_mean_grade(judge_server) -> None:
    """`gates: quality: {min: ...}` with the rubric grader: its value and tests are the
    betting tests of the candidate's own grades in the judgements, on the 1-10 range of every
    grading scale (the oracle: regress.stats on them, in the order their names hash to); a
    bound under the grades is shown met, one over them shown failing; a pairwise judge, or a
    grader that gives every answer one score, leaves it not evaluated."""
    from regress.gate.betting_order import betting_order, judgement_key
    from regress.stats import Direction, bounded_mean_pvalue

    url, _ = judge_server
    base, cand = _runs({k: f"answer {k} +" for k in range(20)})
    policy = _policy(_spec(url, template="rubric"), max_drop=0.05)
    for bound, verdict, code in ((3.0, Verdict.PASS, 0), (4.5, Verdict.REGRESSION, 1)):
        gated = replace(policy, gates=(Requirement(Metric.QUALITY, bound),))
        result = check(base, cand, CheckOptions(policy=gated))
        order = betting_order([judgement_key(j) for j in result.judgements])
        grades = [float(result.judgements[i].verdicts[1]) for i in order]
        assert sorted(set(grades)) == [3.0, 4.0]  # 4 of 5 with a "+", else 3
        (gate,) = result.comparison.requirements
        assert (gate.n, gate.value) == (40, pytest.approx(np.mean(grades)))
        assert gate.fail_pvalue == pytest.approx(
            bounded_mean_pvalue(grades, bound, Direction.BELOW, 1, 10)
        )
        assert gate.pass_pvalue == pytest.approx(
            bounded_mean_pvalue(grades, bound, Direction.ABOVE, 1, 10)
        )
        assert gate.verdict is verdict and result.comparison.exit_code == code
        assert gate.reason.startswith("3.50 on 40 examples (95% CI ")
    gated = replace(policy, gates=(Requirement(Metric.QUALITY, 3.0),))
    pairwise = replace(gated, judge=_spec(url))
    (gate,) = check(base, cand, CheckOptions(policy=pairwise)).comparison.requirements
    assert gate.value is None and gate.verdict is Verdict.INCONCLUSIVE
    assert "no unit was scored by a grading judge" in gate.reason
    same, alike = _runs({})
    (gate,) = check(same, alike, CheckOptions(policy=gated)).comparison.requirements
    assert gate.value is None and "gave every answer of open_answers one score" in gate.reason


def test_a_missing_judge_model_is_refused_before_the_candidate_runs(tmp_path: Path) -> None:
    base, cand = _runs({})
    policy = _policy(JudgeSpec(str(tmp_path / "no-such-judge.gguf")))
    with pytest.raises(BadInput, match="no-such-judge.gguf"):
        # A model that does not exist: were the judge resolved after the run, this would
        # fail loading the candidate instead.
        check(base, CandidateModel(str(tmp_path / "candidate.gguf")), CheckOptions(policy=policy))
