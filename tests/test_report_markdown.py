"""The Markdown and JSON reports of a small fixed comparison, to the character."""

import dataclasses
import json
import math
import re

from conftest import REPO

from regress.core.errors import ExitCode
from regress.gate.policy import Policy, UnitPolicy
from regress.gate.results import (
    CacheUse,
    Comparison,
    DropBounds,
    Fingerprint,
    Flip,
    SubjectResult,
    UnitKind,
    UnitResult,
    Verdict,
)
from regress.report.github import sanitize_markdown
from regress.report.json_report import render_json
from regress.report.markdown import MARKER, QUESTION_CHARS, render_markdown
from regress.stats import PassRequires, Rule


def unit(name, **fields):
    base = dict(
        name=name,
        kind=UnitKind.ACCURACY,
        metric="acc",
        tasks=(name,),
        gated=True,
        rule=Rule.MARGIN,
        n=300,
        baseline=0.5,
        candidate=0.5,
        delta=0.0,
        ci=(-0.03, 0.03),
        b=0,
        c=0,
        discordance=0.0,
        pvalue=1.0,
        adjusted_pvalue=1.0,
        change_pvalue=1.0,
        change_adjusted_pvalue=1.0,
        threshold=0.02,
        verdict=Verdict.PASS,
        reason=(
            "Δ +0.0 pts: the drop is at most 1.0 pts (95% one-sided, adjusted), "
            "within max_drop 2.0 pts"
        ),
        pass_pvalue=0.003,
        pass_adjusted_pvalue=0.003,
        bounds=DropBounds(at_least=-0.01, at_least_level=0.05, at_most=0.01, at_most_level=0.05),
        mde=0.0547,
        n_needed=None,
        plan_drop=None,
        kl_divergence=0.0,
        top1_agreement=1.0,
        baseline_failures={},
        candidate_failures={},
        error_rate=0.0,
    )
    return UnitResult(**{**base, **fields})


ARC = unit(
    "arc_easy",
    candidate=0.45,
    delta=-0.05,
    ci=(-0.0871, -0.0128),
    b=30,
    c=15,
    discordance=0.15,
    pvalue=0.0901,
    adjusted_pvalue=0.1802,
    change_pvalue=0.0123,
    change_adjusted_pvalue=0.0246,
    verdict=Verdict.INCONCLUSIVE,
    reason=(
        "Δ -5.0 pts: the drop may be up to 8.1 pts (98.75% one-sided, adjusted), not shown "
        "within max_drop 2.0 pts; a new sequential check over about 2,440 or more examples "
        "(`regress check --sequential`) could show an unchanged model within it; rerunning "
        "this one on more would test twice"
    ),
    pass_pvalue=0.97,
    pass_adjusted_pvalue=1.0,
    bounds=DropBounds(at_least=0.016, at_least_level=0.025, at_most=0.081, at_most_level=0.0125),
    mde=0.0738,
    n_needed=2305,
    n_to_pass=2440,
    plan_drop=0.04,
    kl_divergence=0.1812,
    top1_agreement=0.8433,
    candidate_failures={"timeout": 1, "truncated": 2},
    error_rate=1 / 300,
)
MMLU = unit(
    "mmlu",
    tasks=("mmlu_anatomy", "mmlu_virology"),
    n=200,
    baseline=0.3,
    candidate=0.2,
    delta=-0.1,
    ci=(-0.15, -0.055),
    b=25,
    c=5,
    discordance=0.15,
    pvalue=0.0002,
    adjusted_pvalue=0.0004,
    change_pvalue=0.00001,
    change_adjusted_pvalue=0.00003,
    verdict=Verdict.REGRESSION,
    reason=(
        "drop of 10.0 pts > max_drop 2.0 pts: at least 5.2 pts (98.75% one-sided, adjusted); "
        "adj. p 0.0004 < alpha 0.05 (H0: within max_drop 2.0 pts)"
    ),
    pass_pvalue=1.0,
    pass_adjusted_pvalue=1.0,
    bounds=DropBounds(at_least=0.052, at_least_level=0.0125, at_most=0.146, at_most_level=0.0167),
    mde=0.0701,
    kl_divergence=0.25,
    top1_agreement=0.85,
    subjects=(
        SubjectResult("mmlu_anatomy", 100, 0.3, 0.15, -0.15, 18, 3),
        SubjectResult("mmlu_virology", 100, 0.3, 0.25, -0.05, 7, 2),
    ),
)
TQA = unit(
    "truthfulqa_mc2",
    kind=UnitKind.SCORE,
    n=817,
    baseline=0.4012,
    candidate=0.3958,
    delta=-0.0054,
    ci=(-0.0101, -0.0007),
    b=450,
    c=367,
    discordance=1.0,
    pvalue=0.9999,
    adjusted_pvalue=1.0,
    change_pvalue=0.0123,
    change_adjusted_pvalue=0.0369,
    reason=(
        "Δ -0.5 pts: the drop is at most 0.9 pts (98.33% one-sided, adjusted), "
        "within max_drop 2.0 pts"
    ),
    bounds=DropBounds(at_least=0.0002, at_least_level=0.0167, at_most=0.0095, at_most_level=0.0167),
    mde=0.0263,
    kl_divergence=0.0912,
    top1_agreement=0.9021,
)
WIKI = unit(
    "wikitext",
    kind=UnitKind.PERPLEXITY,
    metric="word_perplexity",
    n=62,
    baseline=30.125,
    candidate=30.4,
    delta=0.00913,
    ci=(-0.0021, 0.0204),
    b=None,
    c=None,
    discordance=None,
    pvalue=0.7312,
    adjusted_pvalue=1.0,
    change_pvalue=0.0312,
    change_adjusted_pvalue=0.0624,
    mde=0.0388,
    threshold=0.02,
    reason=(
        "word_perplexity +0.91%: the word_perplexity increase is at most +1.95% "
        "(97.5% one-sided, adjusted), within max_relative_increase 2.00%"
    ),
    bounds=DropBounds(at_least=-0.0011, at_least_level=0.05, at_most=0.0195, at_most_level=0.025),
    kl_divergence=None,
    top1_agreement=None,
)
SIDES = {
    "baseline": Fingerprint(
        "q4_1", "smollm2-135m", "ab" * 32, "Q4_1", "llama_cpp", "0.3.36", {"n_ctx": 2048}, "t0"
    ),
    "candidate": Fingerprint(
        "candidate",
        "models/q4_0.gguf",
        "cd" * 32,
        "Q4_0",
        "llama_cpp",
        "0.3.36",
        {"n_ctx": 2048},
        "t1",
        label="q4_0.gguf",
    ),
}
COMPARISON = Comparison(
    verdict=Verdict.REGRESSION,
    exit_code=ExitCode.REGRESSION,
    units=(ARC, MMLU, TQA, WIKI),
    flips=(
        Flip(
            "mmlu_anatomy",
            4,
            2,
            1,
            2,
            True,
            "ok",
            question="Which of the following bones is found in the upper arm, between the shoulder "
            "and the elbow?",
            baseline_answer="C. Humerus",
            candidate_answer="B. Radius",
            target_answer="C. Humerus",
        ),
        Flip("arc_easy", 17, 0, None, 0, True, "timeout"),
        Flip("arc_easy", 9, "a | b", "c", "c", False, "ok"),
    ),
    n_flips=3,
    unpaired=0,
    warnings=("policy names unit 'piqa', which is not in this suite",),
    policy=Policy(units={"piqa": UnitPolicy(max_drop=0.05)}),
    suite="default",
    command="regress check --baseline q4_1 --model q4_0.gguf",
    **SIDES,
)

EXPECTED = """\
## regress: ❌ REGRESSION: mmlu dropped 10.0 pts (25 broke, 5 fixed); the drop is at least 5.2 \
pts, beyond the 2.0-pt limit

**q4_0.gguf** vs baseline **q4_1**, suite `default`: 2 passed, 1 regressed, 1 inconclusive \
(1,379 paired examples). Exit code 1.

| unit | examples | baseline | candidate | change | broke / fixed | verdict |
| --- | ---: | ---: | ---: | ---: | ---: | --- |
| arc_easy | 300 | 50.0% | 45.0% | -5.0 pts | 30 / 15 | ⚠️ INCONCLUSIVE |
| mmlu | 200 | 30.0% | 20.0% | -10.0 pts | 25 / 5 | ❌ REGRESSION |
| truthfulqa_mc2 | 817 | 40.1% | 39.6% | -0.5 pts | 450 / 367 | ✅ PASS |
| wikitext (word_perplexity) | 62 | 30.125 | 30.400 | +0.91% | – | ✅ PASS |

- ⚠️ **arc_easy** dropped 5.0 pts (30 broke, 15 fixed); the drop may be up to 8.1 pts, more \
than the 2.0-pt limit; a new check over about 2,300 examples would detect a 4.0-pt drop; \
rerunning this one on more would test twice
- ❌ **mmlu** dropped 10.0 pts (25 broke, 5 fixed); the drop is at least 5.2 pts, beyond the \
2.0-pt limit
- ⚠️ policy names unit 'piqa', which is not in this suite

### Answers that changed (first 3 of 3)

| task | doc | question | baseline | candidate | expected |  |
| --- | ---: | --- | --- | --- | --- | --- |
| mmlu_anatomy | 4 | Which of the following bones is found in the upper arm, between the \
shoulder an… | C. Humerus | B. Radius | C. Humerus | ❌ broke |
| arc_easy | 17 | – | 0 | – (timeout) | 0 | ❌ broke |
| arc_easy | 9 | – | a \\| b | c | c | ✅ fixed |

_Broke / fixed: examples the baseline got right and the candidate wrong, and the reverse; in a \
score unit, examples whose score fell and rose. pts: accuracy points (a score unit's: points of \
its mean score). Limit: the policy's max_drop. Every term: docs/gate.md, "Glossary"._

<details><summary>Statistics: bounds, p-values, detectable drops (MDE), how the answers moved \
(KL), calibration (ECE, Brier)</summary>

| unit | n | baseline | candidate | Δ pts [95% CI] | drop bound | b / c | p | adj. p | MDE pts \
| verdict |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |
| arc_easy | 300 | 50.0% | 45.0% | -5.0 [-8.7, -1.3] | ≤ 8.1 (98.75%) | 30 / 15 | 0.090 | \
0.180 | 7.4 | ⚠️ INCONCLUSIVE |
| mmlu | 200 | 30.0% | 20.0% | -10.0 [-15.0, -5.5] | ≥ 5.2 (98.75%) | 25 / 5 | <0.001 | <0.001 \
| 7.0 | ❌ REGRESSION |
| truthfulqa_mc2 | 817 | 40.1% | 39.6% | -0.5 [-1.0, -0.1] | ≤ 0.9 (98.33%) | 450 / 367 | \
1.000 | 1.000 | 2.6 | ✅ PASS |

| unit | documents | metric | baseline | candidate | change [95% CI] | increase bound | p | \
adj. p | MDE | verdict |
| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |
| wikitext | 62 | word_perplexity | 30.125 | 30.400 | +0.91% [-0.21%, +2.04%] | ≤ +1.95% \
(97.5%) | 0.731 | 1.000 | +3.88% | ✅ PASS |

Bound: the one-sided bound the verdict rests on (≥: the drop is at least this, shown for a \
REGRESSION, at the confidence the family's correction set; ≤: at most this, at the full alpha, \
which must lie within the threshold for a PASS: every unit must show it, so alpha bounds a false \
PASS of the gate uncorrected). 95% CI: two-sided and unadjusted, a description, not the decision. \
p: one-sided, rule `margin` (H0: drop within the threshold). MDE: the smallest true drop \
(perplexity: increase) a unit flags as a regression with 80% power at its n and observed \
spread. What each verdict means: docs/gate.md, "What the verdicts mean".

### Notes

- ⚠️ **arc_easy**: Δ -5.0 pts: the drop may be up to 8.1 pts (98.75% one-sided, adjusted), not \
shown within max_drop 2.0 pts; a new sequential check over about 2,440 or more examples \
(`regress check --sequential`) could show an unchanged model within it; rerunning this one on \
more would test twice; n≈2,305 would give 80% power against a drop of 4.0 pts at the observed \
discordance (15.0% flipped)
- ❌ **mmlu**: drop of 10.0 pts > max_drop 2.0 pts: at least 5.2 pts (98.75% one-sided, \
adjusted); adj. p 0.0004 < alpha 0.05 (H0: within max_drop 2.0 pts)

### How the answers moved

| unit | outcomes changed | mean KL over choices | top-1 agreement |
| --- | ---: | ---: | ---: |
| arc_easy | 15.0% | 0.1812 | 84.3% |
| mmlu | 15.0% | 0.2500 | 85.0% |
| truthfulqa_mc2 | 100.0% | 0.0912 | 90.2% |

### Most-regressed subjects

| unit | subject | n | baseline | candidate | Δ pts | b / c |
| --- | --- | ---: | ---: | ---: | ---: | ---: |
| mmlu | mmlu_anatomy | 100 | 30.0% | 15.0% | -15.0 | 18 / 3 |
| mmlu | mmlu_virology | 100 | 30.0% | 25.0% | -5.0 | 7 / 2 |

</details>

### Failures

| unit | baseline | candidate | candidate error rate |
| --- | --- | --- | ---: |
| arc_easy | – | timeout 1, truncated 2 | 0.3% |

<details><summary>Models, runtime and policy</summary>

### Policy

`alpha: 0.05` · `rule: margin` · `correction: holm` · `test: midp` · `max_drop: 0.02` · \
`pass_requires: evidence` · `inconclusive: warn` · `max_error_rate: 0.05` · `min_examples: \
100` · `power: 0.8` · `perplexity.max_relative_increase: 0.02` · `units.piqa.max_drop: 0.05` · \
`units.piqa.gate: true`

</details>

### Reproduce

```sh
regress check --baseline q4_1 --model q4_0.gguf
```

<!-- regress-report -->
"""


HEADLINE = (
    "## regress: ❌ REGRESSION: mmlu dropped 10.0 pts (25 broke, 5 fixed); the drop is at least "
    "5.2 pts, beyond the 2.0-pt limit"
)


def without_models(text):
    """The report without its Models section, which the hardware report's tests cover."""
    start = text.index("### Models")
    return text[:start] + text[text.index("### ", start + 1) :]


def test_markdown_is_exactly_the_expected_report():
    assert without_models(render_markdown(COMPARISON)) == EXPECTED


def test_the_report_links_the_page_that_explains_its_verdicts():
    url = "https://github.com/o/regress/blob/v1/docs"
    text = render_markdown(COMPARISON, docs_url=url + "/")
    assert f"[What the verdicts mean]({url}/gate.md#what-the-verdicts-mean)" in text
    anchors = (REPO / "docs" / "gate.md").read_text(encoding="utf-8")
    assert "\n## What the verdicts mean\n" in anchors


def test_pass_headline_and_no_failures():
    passing = dataclasses.replace(
        COMPARISON,
        verdict=Verdict.PASS,
        exit_code=ExitCode.OK,
        units=(unit("arc_easy"),),
        flips=(),
        n_flips=0,
        warnings=(),
    )
    text = render_markdown(passing)
    assert text.splitlines()[0] == (
        "## regress: ✅ PASS: arc_easy unchanged; the drop is at most 1.0 pts, within the 2.0-pt "
        "limit"
    )
    assert "No failed example and no truncated prompt on either side." in text
    assert "### Answers that changed" not in text and "### Notes" not in text
    # A baseline made from tasks alone names no suite, and the report shows none.
    unnamed = render_markdown(dataclasses.replace(passing, suite=""))
    assert "vs baseline **q4_1**: 1 passed (" in unnamed and "suite" not in unnamed.split("\n")[2]


def many_flips(count):
    flips = tuple(Flip("arc_easy", i, 0, 1, 0, True, "ok") for i in range(count))
    return dataclasses.replace(COMPARISON, flips=flips, n_flips=count + 50)


def test_flips_are_truncated_first_to_fit():
    comparison = many_flips(200)
    full = render_markdown(comparison)
    assert "### Answers that changed (first 5 of 250)" in full
    assert "<summary>20 more answers that changed</summary>" in full
    assert "_(truncated: 225 more)_" in full
    limit = len(full.encode()) - 200
    text = render_markdown(comparison, max_bytes=limit)
    assert len(text.encode()) <= limit
    assert "### Answers that changed (first 5 of 250)" in text
    assert "<summary>7 more answers that changed</summary>" in text
    assert "_(truncated: 238 more)_" in text
    assert "| mmlu | mmlu_virology |" in text  # subjects untouched while flips can shrink
    assert text.splitlines()[0] == HEADLINE
    assert text.endswith(f"\n{MARKER}\n")


def test_subjects_are_cut_after_the_flips_then_the_tail():
    subjects = tuple(SubjectResult(f"mmlu_s{i:02d}", 5, 0.4, 0.2, -0.2, 1, 0) for i in range(40))
    comparison = dataclasses.replace(
        many_flips(200), units=(ARC, dataclasses.replace(MMLU, subjects=subjects), TQA, WIKI)
    )
    assert "_(truncated: 30 more)_" in render_markdown(comparison)
    without_flips = dataclasses.replace(comparison, flips=(), n_flips=0)
    stub = "\n\n_(truncated: 250 more answers that changed)_"
    budget = len(render_markdown(without_flips).encode()) + len(stub.encode())
    text = render_markdown(comparison, max_bytes=budget)
    assert stub in text and "_(truncated: 30 more)_" in text
    assert len(text.encode()) == budget
    text = render_markdown(comparison, max_bytes=budget - 1)
    assert stub in text and "_(truncated: 35 more)_" in text
    tiny = render_markdown(comparison, max_bytes=600)
    assert len(tiny.encode()) <= 600
    assert tiny.splitlines()[0] == HEADLINE
    assert tiny.endswith(f"_(truncated: the report exceeded 600 bytes)_\n\n{MARKER}\n")


def test_json_is_sorted_stable_and_strict():
    text = render_json(COMPARISON)
    assert text == render_json(COMPARISON)
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["verdict"] == "REGRESSION" and data["exit_code"] == 1
    assert data["units"][0]["n_needed"] == 2305 and data["units"][0]["mde"] == 0.0738
    assert data["units"][0]["rule"] == "margin" and data["policy"]["rule"] == "margin"
    assert data["units"][1]["subjects"][0]["task"] == "mmlu_anatomy"
    assert data["policy"]["units"] == {"piqa": {"gate": True, "max_drop": 0.05}}
    broken = dataclasses.replace(COMPARISON, units=(unit("arc_easy", kl_divergence=math.nan),))
    assert json.loads(render_json(broken))["units"][0]["kl_divergence"] is None


def test_a_pass_beyond_max_drop_says_what_the_unit_could_detect():
    reason = (
        "drop of 4.0 pts > max_drop 2.0 pts is not significant "
        "(adj. p 0.204 >= alpha 0.05, H0: no drop)"
    )
    piqa = unit("piqa", candidate=0.46, delta=-0.04, b=18, c=10, reason=reason, mde=0.0689)
    text = render_markdown(dataclasses.replace(COMPARISON, units=(piqa,)))
    assert f"- ✅ **piqa**: {reason}; this unit detects only drops of 6.9 pts or more (MDE)" in text
    mixed = dataclasses.replace(
        COMPARISON, units=(piqa, dataclasses.replace(ARC, rule=Rule.CHANGE))
    )
    assert (
        "p: one-sided, rule `margin` (H0: drop within the threshold) for piqa; "
        "rule `change` (H0: no drop) for arc_easy."
    ) in render_markdown(mixed)


HOSTILE = (
    "<video",
    "<img src=x",
    '<img src="https://evil.example/pixel.gif" onerror=alert(1)>',  # cut mid-tag at 40
    "<svg onload=alert(1)>",
    "![x](http://evil.example/p.png)",
    "![x](\nhttp://evil.example/split.png)",
    "a `b | c` d ``` e",
    "x\\| ✅ fixed \\| ✅ fixed",  # a backslash before a pipe must not split the cell
    "ask @octocat",
    "ask @@octocat, café@octocat",
    "line one\nline two <video src=x\n>",
    "</video><audio src=x>",
)
# An active mention: `@name` not after an ASCII word character (GitHub's rule).
ACTIVE_MENTION = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9])")
MEDIA_TAG = re.compile(r"<\s*/?\s*(?:img|image|picture|source|video|audio|svg)", re.I)


def hostile_report():
    flips = tuple(
        Flip(
            "arc_easy",
            i,
            answer,
            HOSTILE[-1 - i],
            HOSTILE[(i + 3) % 12],
            i % 2 == 0,
            "ok",
            # Questions and answers' texts come from the dataset: as hostile as the answers.
            question=HOSTILE[(i + 5) % 12] * 9,
            candidate_answer=HOSTILE[(i + 7) % 12] if i % 3 else None,
        )
        for i, answer in enumerate(HOSTILE)
    )
    comparison = dataclasses.replace(COMPARISON, flips=flips, n_flips=len(flips))
    return render_markdown(comparison)


def cells(row):
    """A table row's cells, split at unescaped pipes as GitHub does."""
    return [c.strip() for c in re.findall(r"(?:\\.|[^|\\])+", row.strip().strip("|"))]


def test_hostile_answers_keep_every_row_and_section_of_the_sanitized_report():
    raw = hostile_report()
    text = sanitize_markdown(raw)
    flips = text[text.index("### Answers that changed") : text.index("### Failures")]
    rows = [line for line in flips.splitlines() if line.startswith("| arc_easy | ")]
    rows = [r for r in rows if cells(r)[-1] in ("❌ broke", "✅ fixed")]
    assert [cells(r)[1] for r in rows] == [str(i) for i in range(len(HOSTILE))]
    # Seven cells each (the question's too), the verdict column last: no text shifts the columns.
    assert [cells(r)[-1] for r in rows] == ["❌ broke", "✅ fixed"] * 6
    assert all(len(cells(r)) == 7 for r in rows)
    # Every text cell is escaped and cut before the sanitizer runs on its line.
    assert all(len(cells(r)[2]) <= 2 * QUESTION_CHARS for r in rows)
    headings = [line for line in raw.splitlines() if line.startswith("#")]
    sections = ("### Answers that changed", "### Failures", "### Models", "### Policy")
    for section in (*sections, "### Reproduce"):
        assert any(h.startswith(section) for h in headings)
    assert [line for line in text.splitlines() if line.startswith("#")] == headings
    assert text.endswith(f"\n{MARKER}\n")


def test_hostile_answers_leave_no_mention_media_tag_or_image():
    text = sanitize_markdown(hostile_report())
    assert ACTIVE_MENTION.search(text) is None
    assert MEDIA_TAG.search(text) is None
    assert "![" not in text
    assert "@\u200b@\u200boctocat" not in text and "@@\u200boctocat" in text


def test_a_cell_is_cut_between_escapes_never_inside_one():
    flip = Flip("arc_easy", 1, "x" * 38 + "<<<", "|" * 50, "<img src=x>", True, "ok")
    text = render_markdown(dataclasses.replace(COMPARISON, flips=(flip,), n_flips=1))
    assert "| " + "x" * 38 + "&lt;… | " + "\\|" * 39 + "… | &lt;img src=x> |" in text
    question = Flip("arc_easy", 1, 0, 1, 0, True, "ok", question="<" * 100)
    text = render_markdown(dataclasses.replace(COMPARISON, flips=(question,), n_flips=1))
    assert "| arc_easy | 1 | " + "&lt;" * (QUESTION_CHARS - 1) + "… | 0 | 1 | 0 |" in text


def test_the_report_says_how_many_results_came_from_the_cache():
    uses = (
        CacheUse("candidate", True, 1200, 600, 3),
        CacheUse("baseline rerun", False, 0, 0, 0),
    )
    text = render_markdown(dataclasses.replace(COMPARISON, cache=uses))
    assert (
        "- Result cache, candidate: 1,200 results replayed, 600 computed; 3 cached rows refused "
        "(corrupt or failing their digest) and computed again.\n"
        "- Result cache off for the baseline rerun: every result computed here."
    ) in text
    assert "Result cache" not in render_markdown(COMPARISON)


def test_an_error_and_a_pass_without_evidence_say_why_in_the_first_line():
    reason = "12.0% of the candidate's examples failed (max_error_rate 5.0%)"
    failed = unit("arc_easy", verdict=Verdict.ERROR, reason=reason)
    errored = dataclasses.replace(COMPARISON, verdict=Verdict.ERROR, units=(failed, TQA))
    assert render_markdown(errored).splitlines()[0] == f"## regress: 🛑 ERROR: arc_easy: {reason}"
    lenient = dataclasses.replace(
        COMPARISON,
        verdict=Verdict.PASS,
        units=(TQA, WIKI),
        policy=Policy(pass_requires=PassRequires.NO_EVIDENCE_OF_HARM),
    )
    assert render_markdown(lenient).splitlines()[0] == (
        "## regress: ✅ PASS: no drop shown beyond a limit; largest change: wikitext "
        "word_perplexity rose 0.91%; no increase shown beyond the +2.00% limit; only increases "
        "of +3.88% or more would be caught"
    )
