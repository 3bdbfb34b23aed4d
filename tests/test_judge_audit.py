"""The judge audit: agreement, kappa and the confusion matrix by hand and against statsmodels,
PPI++ by hand and by seeded coverage, the blind stratified sample, and `regress judge` end to
end on files written here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.proportion import proportion_confint

from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.gate.judge_audit import (
    AGREEMENT_WARNING,
    RESAMPLES,
    SEED,
    Judgement,
    audit,
    cohens_kappa,
    mean_interval,
    ppi_lambda,
    ppi_mean,
    read_judgements,
    read_labels,
    sample,
    write_sample,
)
from regress.report.judge_audit import render_audit

JUDGE = "0123456789abcdef"
VERDICTS = {
    "win": (["candidate", "candidate"], True),
    "loss": (["baseline", "baseline"], True),
    "tie": (["tie", "tie"], True),
    "split": (["baseline", "candidate"], False),  # the orders disagree: a tie, inconsistent
    "judge_error": ([None, "candidate"], None),
}


def judgement_line(doc_id: int, kind: str, judge: str = JUDGE, task: str = "open") -> dict:
    verdicts, consistent = VERDICTS[kind]
    return {
        "task": task,
        "doc_id": doc_id,
        "unit": task,
        "mode": "pairwise",
        "judge": judge,
        "question": f"question {doc_id}",
        "reference": None,
        "baseline": f"baseline answer {doc_id}",
        "candidate": f"candidate answer {doc_id}",
        "verdicts": verdicts,
        "replies": ["A is better", "B is better"],
        "outcome": "tie" if kind == "split" else kind,
        "consistent": consistent,
    }


def write_lines(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


# The hand-worked audit: judge rows by people's columns, in (win, tie, loss) order.
TABLE = [[20, 2, 1], [1, 5, 2], [0, 1, 18]]
CATEGORIES = ("win", "tie", "loss")


def hand_worked(tmp_path: Path) -> tuple[Path, Path]:
    """50 labelled examples laid out as TABLE, 2 labelled judge_errors (both people's wins),
    and 48 unlabelled examples: 30 wins, 10 ties (4 of them split orders), 8 judge_errors."""
    judgements, labels = [], []
    doc = 0
    for judge_row, counts in zip(CATEGORIES, TABLE, strict=True):
        for human, count in zip(CATEGORIES, counts, strict=True):
            for _ in range(count):
                judgements.append(judgement_line(doc, judge_row))
                labels.append({"task": "open", "doc_id": doc, "label": human})
                doc += 1
    for _ in range(2):
        judgements.append(judgement_line(doc, "judge_error"))
        labels.append({"task": "open", "doc_id": doc, "label": "win"})
        doc += 1
    for kind, count in (("win", 30), ("tie", 6), ("split", 4), ("judge_error", 8)):
        for _ in range(count):
            judgements.append(judgement_line(doc, kind))
            doc += 1
    return (
        write_lines(tmp_path / "judgements.jsonl", judgements),
        write_lines(tmp_path / "labels.jsonl", labels),
    )


def test_agreement_kappa_confusion_and_swap_consistency_by_hand(tmp_path):
    judgements_path, labels_path = hand_worked(tmp_path)
    result = audit(read_judgements(judgements_path), read_labels(labels_path))
    assert (result.judged, result.judge_errors) == (100, 10)
    assert (result.labelled, result.agreed, result.labelled_errors) == (52, 43, 2)
    assert result.confusion == ((20, 2, 1), (1, 5, 2), (0, 1, 18))
    # Agreement counts the judge_errors as disagreements: 43 of 52, Wilson's interval.
    low, high = proportion_confint(43, 52, method="wilson")
    assert result.agreement.value == 43 / 52
    assert result.agreement.low == pytest.approx(low, abs=1e-12)
    assert result.agreement.high == pytest.approx(high, abs=1e-12)
    # Kappa over the 50 with a verdict: p_o = 43/50; margins judge (23, 8, 19), people
    # (21, 8, 21); p_e = (23*21 + 8*8 + 19*21) / 2500 = 946/2500; kappa = 1204/1554.
    assert result.kappa is not None
    assert result.kappa.value == pytest.approx(602 / 777, abs=1e-12)
    assert result.kappa == cohens_kappa(TABLE)
    # Swap consistency over the whole file: 90 lines with a verdict, 4 split.
    assert (result.consistent, result.swap_consistency) == (86, 86 / 90)
    assert result.warning is None  # 82.7% agreement
    rate = result.win_rate
    assert (rate.labelled, rate.unlabelled) == (50, 40)
    assert rate.human_only.value == pytest.approx((21 + 8 * 0.5) / 50)
    assert rate.judge_only.value == pytest.approx((23 + 30 + (8 + 10) * 0.5) / 90)


@pytest.mark.parametrize(
    "table",
    [[[12, 3, 0], [4, 9, 2], [1, 2, 7]], [[30, 1, 0], [0, 2, 1], [5, 0, 11]], [[5, 5], [5, 5]]],
)
def test_kappa_matches_statsmodels_and_its_interval_is_bca(table):
    """The value is statsmodels'; the interval scipy's BCa bootstrap of the same pairs with
    the audit's seed (the oracle: kappa from each resample's table, one resample at a time)."""
    from scipy.stats import bootstrap

    ours = cohens_kappa(table)
    reference = sm_cohens_kappa(np.array(table))
    assert ours is not None
    assert ours.value == pytest.approx(reference.kappa, abs=1e-12)
    counts = np.array(table)
    rows, cols = np.nonzero(counts)
    first = np.repeat(rows, counts[rows, cols])
    second = np.repeat(cols, counts[rows, cols])
    size = counts.shape[0]

    def one(a, b):
        # Kappa from the resample's table of whole counts.
        t = np.zeros((size, size), dtype=np.int64)
        np.add.at(t, (a, b), 1)
        n, chance = t.sum(), t.sum(axis=1) @ t.sum(axis=0)
        return 0.0 if n * n == chance else (n * np.trace(t) - chance) / (n * n - chance)

    def kappa(a, b, axis=-1):
        # scipy hands over resamples in batches; each is one table.
        rows = zip(a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1]), strict=True)
        return np.array([one(x, y) for x, y in rows]).reshape(a.shape[:-1])

    ci = bootstrap((first, second), kappa, paired=True, vectorized=True, n_resamples=RESAMPLES,
                   method="BCa", random_state=SEED).confidence_interval  # fmt: skip
    assert ours.low == pytest.approx(max(-1.0, ci.low), abs=1e-9)
    assert ours.high == pytest.approx(min(1.0, ci.high), abs=1e-9)


def test_kappa_is_undefined_when_both_sides_use_one_category():
    assert cohens_kappa([[7, 0, 0], [0, 0, 0], [0, 0, 0]]) is None
    perfect = cohens_kappa([[7, 0, 0], [0, 3, 0], [0, 0, 2]])
    assert perfect is not None and (perfect.value, perfect.low, perfect.high) == (1.0, 1.0, 1.0)


def test_ppi_mean_by_hand():
    y, f_lab, f_unl = [1, 0, 1, 0.5], [1, 0.5, 1, 0.5], [1, 0, 0.5, 1]
    # s(y, f_lab) = 0.375/3 = 1/8; s²(f_lab) = 0.25/3 = 1/12; s²(f_unl) = 0.6875/3 = 11/48;
    # lambda = (1/8) / (1/12 + (4/4) * 11/48) = (1/8) / (15/48) = 0.4.
    assert ppi_lambda(y, f_lab, f_unl) == pytest.approx(0.4, abs=1e-12)
    # Estimate: mean(y - 0.4 f_lab) + 0.4 mean(f_unl) = 0.625 - 0.3 + 0.25 = 0.575.
    # Variance: y - 0.4 f_lab = (0.6, -0.2, 0.6, 0.3), sum of squared deviations 0.4275; the
    # fitted lambda spends a second degree of freedom: s² over n - 2, over n = 4, plus
    # 0.4² (11/48) / 4, and t with n - 2 = 2.
    variance = 0.4275 / 2 / 4 + 0.16 * (11 / 48) / 4
    t = stats.t.isf(0.025, 2)
    tuned = ppi_mean(y, f_lab, f_unl)
    assert tuned.value == pytest.approx(0.575, abs=1e-12)
    assert tuned.low == pytest.approx(0.575 - t * math.sqrt(variance), abs=1e-12)
    assert tuned.high == pytest.approx(0.575 + t * math.sqrt(variance), abs=1e-12)
    # Plain PPI (lambda 1): mean(y - f_lab) + mean(f_unl) = -0.125 + 0.625.
    assert ppi_mean(y, f_lab, f_unl, lam=1.0).value == pytest.approx(0.5, abs=1e-12)
    # Lambda 0 is the labels' own mean and interval.
    assert ppi_mean(y, f_lab, f_unl, lam=0.0) == mean_interval(y)
    assert mean_interval(y).value == 0.625
    # The tuned lambda gives the narrowest interval of any lambda.
    intervals = {lam: ppi_mean(y, f_lab, f_unl, lam=lam) for lam in np.linspace(0, 1, 21)}
    narrowest = min(intervals, key=lambda lam: intervals[lam].high - intervals[lam].low)
    assert narrowest == pytest.approx(0.4)


def test_small_sample_intervals_cover_at_least_94_percent():
    """Seeded coverage where the normal intervals fell short: PPI++ at 20 labels (+ 200 judge
    verdicts; normal quantile 92.7%) and kappa at 30 labels (asymptotic 93.1%). People's
    outcomes win .5, tie .2, loss .3; the judge gives people's outcome 70% of the time and
    otherwise any of the three."""
    rng = np.random.default_rng(20261206)
    share = np.array([0.3, 0.2, 0.5])  # loss, tie, win
    scores = np.array([0.0, 0.5, 1.0])
    joint = share[:, None] * (0.7 * np.eye(3) + 0.1)  # people rows, judge columns

    def draw(n):
        people = rng.choice(3, p=share, size=n)
        judge = np.where(rng.random(n) < 0.7, people, rng.choice(3, size=n))
        return people, judge

    truth = float(share @ scores)
    runs, covered = 4000, 0
    for _ in range(runs):
        people, judge = draw(20)
        estimate = ppi_mean(scores[people], scores[judge], scores[draw(200)[1]])
        covered += estimate.low <= truth <= estimate.high
    assert covered / runs >= 0.94
    observed, expected = np.trace(joint), joint.sum(axis=1) @ joint.sum(axis=0)
    kappa_truth = (observed - expected) / (1 - expected)
    runs, covered = 300, 0
    for _ in range(runs):
        people, judge = draw(30)
        table = np.zeros((3, 3))
        np.add.at(table, (judge, people), 1)
        estimate = cohens_kappa(table)
        covered += estimate.low <= kappa_truth <= estimate.high
    assert covered / runs >= 0.94


def test_ppi_lambda_is_clipped_and_ignores_a_useless_judge():
    assert ppi_lambda([1, 0, 1, 0], [0, 1, 0, 1], [0, 1, 1, 0]) == 0.0  # negative covariance
    assert ppi_lambda([1, 0, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]) == 0.0  # the judge never varies
    assert ppi_lambda([1, 0, 1, 0], [1, 0, 1, 0], [1]) == 0.0  # too few unlabelled
    # A judge that equals the labels, with many unlabelled: s(y, f) = s²(f) = 1/3 and
    # s²(f_unl) = 250/999, so lambda = (1/3) / (1/3 + (4/1000) 250/999), just below 1.
    expected = (1 / 3) / (1 / 3 + 4 / 1000 * 250 / 999)
    assert ppi_lambda([1, 0, 1, 0], [1, 0, 1, 0], [1, 0] * 500) == pytest.approx(expected)


def test_ppi_covers_peoples_win_rate_where_a_biased_judge_does_not():
    """2,000 seeded replications: 1,000 examples, people's outcomes win .45, tie .20, loss .35
    (win rate 0.55); a judge that gives people's outcome 75% of the time and otherwise leans
    to the candidate (win .6, tie .25, loss .15: its win rate is 0.594). 100 labelled."""
    rng = np.random.default_rng(20261201)
    truth, replications = 0.55, 2000
    covered = {"ppi": 0, "people": 0, "judge": 0}
    widths = {"ppi": 0.0, "people": 0.0}
    for _ in range(replications):
        people = rng.choice([0.0, 0.5, 1.0], size=1000, p=[0.35, 0.2, 0.45])
        leaning = rng.choice([0.0, 0.5, 1.0], size=1000, p=[0.15, 0.25, 0.6])
        judge = np.where(rng.random(1000) < 0.75, people, leaning)
        estimates = {
            "ppi": ppi_mean(people[:100], judge[:100], judge[100:]),
            "people": mean_interval(people[:100]),
            "judge": mean_interval(judge),
        }
        for name, estimate in estimates.items():
            covered[name] += estimate.low <= truth <= estimate.high
        for name in widths:
            widths[name] += estimates[name].high - estimates[name].low
    assert abs(covered["ppi"] / replications - 0.95) <= 0.015
    assert abs(covered["people"] / replications - 0.95) <= 0.015
    assert covered["judge"] / replications < 0.2  # its interval is narrow and off by 4 points
    assert widths["ppi"] / widths["people"] < 0.75  # what the judge's verdicts buy


def outcomes_file(tmp_path: Path, counts: dict[str, int]) -> list[Judgement]:
    lines, doc = [], 0
    for kind, count in counts.items():
        for _ in range(count):
            lines.append(judgement_line(doc, kind))
            doc += 1
    return read_judgements(write_lines(tmp_path / "judgements.jsonl", lines))


def drawn(judgements: list[Judgement], forms: list[dict]) -> dict[str, int]:
    outcome = {j.doc_id: j.outcome for j in judgements}
    counts: dict[str, int] = {}
    for form in forms:
        counts[outcome[form["doc_id"]]] = counts.get(outcome[form["doc_id"]], 0) + 1
    return counts


def test_sample_is_proportional_by_outcome_with_every_outcome_present(tmp_path):
    judgements = outcomes_file(tmp_path, {"win": 50, "tie": 30, "loss": 18, "judge_error": 2})
    # Quotas of 20: 10, 6, 3.6, 0.4 -> 10, 6, 4, 0 by largest remainder; judge_error then
    # takes one from loss, the stratum most above its share.
    assert drawn(judgements, sample(judgements, 20)) == {
        "win": 10,
        "tie": 6,
        "loss": 3,
        "judge_error": 1,
    }
    # 3 cannot cover 4 outcomes: quotas 1.5, 0.9, 0.54, 0.06 -> win, tie, loss one each.
    assert drawn(judgements, sample(judgements, 3)) == {"win": 1, "tie": 1, "loss": 1}
    simple = sample(judgements, 20, stratify=None, seed=3)
    assert len({form["doc_id"] for form in simple}) == 20
    assert len(sample(judgements, 500)) == 100


def test_sample_is_seeded_blind_and_in_example_order(tmp_path):
    judgements = outcomes_file(tmp_path, {"win": 60, "tie": 20, "loss": 20})
    forms = sample(judgements, 40, seed=7)
    assert forms == sample(judgements, 40, seed=7)
    assert forms != sample(judgements, 40, seed=8)
    assert [form["doc_id"] for form in forms] == sorted(form["doc_id"] for form in forms)
    sides = [form["a_is"] for form in forms]
    assert 10 <= sides.count("baseline") <= 30
    for form in forms:
        other = "candidate" if form["a_is"] == "baseline" else "baseline"
        assert form["answer_a"] == f"{form['a_is']} answer {form['doc_id']}"
        assert form["answer_b"] == f"{other} answer {form['doc_id']}"
        assert set(form) == {
            "task",
            "doc_id",
            "question",
            "reference",
            "answer_a",
            "answer_b",
            "a_is",
            "preferred",
        }
        assert form["preferred"] is None


def test_write_sample_keeps_an_existing_file_unless_forced(tmp_path):
    out = tmp_path / "to_label.jsonl"
    write_sample([{"task": "open", "doc_id": 1}], out)
    with pytest.raises(BadInput, match="exists"):
        write_sample([{"task": "open", "doc_id": 2}], out)
    write_sample([{"task": "open", "doc_id": 2}], out, force=True)
    assert out.read_text() == '{"task": "open", "doc_id": 2}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["to_label.jsonl"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"outcome": "draw"}, ':2: outcome "draw" is not one of win, tie, loss, judge_error'),
        ({"extra": 1}, ':2: unknown key "extra"'),
        ({"outcome": "loss"}, ":2: outcome 'loss' and consistent true do not follow"),
        ({"consistent": False}, ":2: outcome 'win' and consistent false do not follow"),
        ({"mode": "pointwise"}, ':2: mode "pointwise": only pairwise'),
        ({"doc_id": 0}, ":2: open doc 0 judged twice (also"),
        ({"doc_id": -1}, ":2: doc_id must be an integer >= 0, got -1"),
        ({"verdicts": ["candidate"]}, ":2: verdicts must be a list of two"),
        ({"judge": "fedcba9876543210"}, ":2: judge 'fedcba9876543210', but"),
    ],
)
def test_a_bad_judgements_line_is_one_line_naming_file_and_line(tmp_path, change, message):
    path = write_lines(
        tmp_path / "j.jsonl", [judgement_line(0, "win"), {**judgement_line(1, "win"), **change}]
    )
    with pytest.raises(BadInput) as error:
        read_judgements(path)
    assert f"{path}{message}" in str(error.value) and "\n" not in str(error.value)


def test_an_example_the_judge_was_not_asked_about_reads_and_leaves_swap_consistency(tmp_path):
    """A failed candidate answer loses without a judge: its line has consistent null."""
    unasked = {**judgement_line(2, "loss"), "candidate": "", "consistent": None}
    lines = [judgement_line(0, "win"), judgement_line(1, "split"), unasked]
    lines += [judgement_line(3, "judge_error"), judgement_line(4, "tie")]
    judgements = read_judgements(write_lines(tmp_path / "j.jsonl", lines))
    assert [j.consistent for j in judgements] == [True, False, None, None, True]
    labels = [{"task": "open", "doc_id": doc, "label": "win"} for doc in (0, 1, 2)]
    result = audit(judgements, read_labels(write_lines(tmp_path / "labels.jsonl", labels)))
    assert (result.consistent, result.asked, result.swap_consistency) == (2, 3, 2 / 3)


def test_mixed_judges_are_named_both(tmp_path):
    path = write_lines(
        tmp_path / "j.jsonl",
        [judgement_line(0, "win"), judgement_line(1, "win", judge="fedcba9876543210")],
    )
    with pytest.raises(BadInput, match=f"fedcba9876543210.*{path}:1 has judge '{JUDGE}'"):
        read_judgements(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"task": "open", "doc_id": 0, "label": "draw"}, 'label "draw" is not one of win'),
        ({"task": "open", "doc_id": 0, "label": "win", "note": "x"}, 'unknown key "note"'),
        ({"task": "open", "doc_id": 0, "a_is": "baseline", "preferred": None}, "not labelled yet"),
        ({"task": "open", "doc_id": 0, "a_is": "baseline", "preferred": "C"}, 'preferred "C"'),
        ({"task": "open", "doc_id": 0, "a_is": "model", "preferred": "A"}, 'a_is "model"'),
        ({"task": "open", "doc_id": 0, "preferred": "A"}, "missing key 'a_is'"),
    ],
)
def test_a_bad_label_is_one_line_naming_file_and_line(tmp_path, line, message):
    path = write_lines(tmp_path / "labels.jsonl", [line])
    with pytest.raises(BadInput, match=f"{path}:1: .*{message}"):
        read_labels(path)


def test_labels_must_match_the_judgements_once(tmp_path):
    judgements = outcomes_file(tmp_path, {"win": 3})
    cases = [
        ([{"task": "open", "doc_id": 9, "label": "win"}], ":1: no judgement of open doc 9"),
        ([{"task": "other", "doc_id": 0, "label": "win"}], ":1: no judgement of other doc 0"),
        (
            [{"task": "open", "doc_id": 1, "label": "win"}] * 2,
            ":2: open doc 1 labelled twice",
        ),
        (
            [
                {
                    "task": "open",
                    "doc_id": 1,
                    "answer_a": "baseline answer 2",
                    "answer_b": "candidate answer 1",
                    "a_is": "baseline",
                    "preferred": "A",
                }
            ],
            ":1: the answers shown differ",
        ),
    ]
    for lines, message in cases:
        path = write_lines(tmp_path / "labels.jsonl", lines)
        with pytest.raises(BadInput, match=message):
            audit(judgements, read_labels(path))


def test_audit_needs_two_labelled_examples_with_a_verdict(tmp_path):
    judgements = outcomes_file(tmp_path, {"judge_error": 3, "win": 3})
    lines = [{"task": "open", "doc_id": doc, "label": "win"} for doc in (0, 1, 2, 3)]
    labels = read_labels(write_lines(tmp_path / "labels.jsonl", lines))
    with pytest.raises(BadInput, match="1 labelled example.s. with a judge verdict: .* at least 2"):
        audit(judgements, labels)


def test_the_filled_form_reads_as_the_candidates_side(tmp_path):
    forms = [
        {"task": "open", "doc_id": 0, "a_is": "candidate", "preferred": "A"},
        {"task": "open", "doc_id": 1, "a_is": "baseline", "preferred": "A"},
        {"task": "open", "doc_id": 2, "a_is": "candidate", "preferred": "B"},
        {"task": "open", "doc_id": 3, "a_is": "baseline", "preferred": "B"},
        {"task": "open", "doc_id": 4, "a_is": "baseline", "preferred": "tie"},
    ]
    labels = read_labels(write_lines(tmp_path / "labels.jsonl", forms))
    assert [label.label for label in labels] == ["win", "loss", "loss", "win", "tie"]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_sample_fill_in_and_audit_round_trip(tmp_path):
    """People disagree with the judge on the first 5 of 40 sampled examples only."""
    judgements = [judgement_line(i, ("win", "loss", "tie")[i % 3]) for i in range(90)]
    judgements_path = write_lines(tmp_path / "judgements.jsonl", judgements)
    forms = tmp_path / "to_label.jsonl"
    code, text = run(
        "judge", "sample", "--judgements", str(judgements_path), "-n", "40", "-o", str(forms)
    )
    assert code == 0, text
    assert f"40 forms to label written to {forms} (seed 0)" in text
    code, text = run(
        "judge", "sample", "--judgements", str(judgements_path), "-n", "40", "-o", str(forms)
    )
    assert code == ExitCode.BAD_INPUT and "--force replaces it" in text
    everything = tmp_path / "all.jsonl"
    code, text = run(
        "judge", "sample", "--judgements", str(judgements_path), "-n", "500", "-o", str(everything)
    )
    assert code == 0 and "holds only 90 judgements: all taken" in text
    assert len(everything.read_text().splitlines()) == 90
    outcome = {line["doc_id"]: line["outcome"] for line in judgements}
    filled = []
    for number, line in enumerate(forms.read_text().splitlines()):
        form = json.loads(line)
        judged = outcome[form["doc_id"]]
        human = {"win": "loss", "loss": "win", "tie": "win"}[judged] if number < 5 else judged
        if human == "tie":
            form["preferred"] = "tie"
        else:
            form["preferred"] = "A" if (form["a_is"] == "candidate") == (human == "win") else "B"
        filled.append(form)
    labels = write_lines(tmp_path / "labels.jsonl", filled)
    out = tmp_path / "audit.json"
    code, text = run(
        "judge", "audit", str(labels), "--judgements", str(judgements_path), "--json", str(out)
    )
    assert code == 0, text
    assert "agreement: 87.5%" in text and "(35/40; Wilson)" in text
    assert "warning" not in text
    data = json.loads(out.read_text())
    assert (data["labelled"], data["agreed"], data["warning"]) == (40, 35, None)
    assert data["categories"] == ["win", "tie", "loss"]
    assert sum(map(sum, data["confusion"])) == 40


def test_audit_warns_below_80_percent_agreement_with_kappa_beside(tmp_path):
    judgements = [judgement_line(i, "win") for i in range(10)]
    judgements += [judgement_line(i, "loss") for i in range(10, 20)]
    labels = [{"task": "open", "doc_id": i, "label": "win"} for i in range(7)]
    labels += [{"task": "open", "doc_id": i, "label": "loss"} for i in range(7, 10)]
    labels += [{"task": "open", "doc_id": i, "label": "loss"} for i in range(10, 14)]
    judgements_path = write_lines(tmp_path / "judgements.jsonl", judgements)
    labels_path = write_lines(tmp_path / "labels.jsonl", labels)
    code, text = run("judge", "audit", str(labels_path), "--judgements", str(judgements_path))
    assert code == 0, text
    # 11 of 14 agree (78.6%); kappa: p_o = 11/14, p_e = (10*7 + 4*7) / 196 = 0.5, so 4/7.
    assert f"warning: {AGREEMENT_WARNING} (agreement 78.6%, kappa 0.57)" in text


def test_audit_refuses_a_file_of_two_judges(tmp_path):
    judgements = [judgement_line(0, "win"), judgement_line(1, "tie", judge="fedcba9876543210")]
    judgements_path = write_lines(tmp_path / "judgements.jsonl", judgements)
    labels_path = write_lines(
        tmp_path / "labels.jsonl", [{"task": "open", "doc_id": 0, "label": "win"}]
    )
    code, text = run("judge", "audit", str(labels_path), "--judgements", str(judgements_path))
    assert code == ExitCode.BAD_INPUT
    assert text.count("\n") == 1 and "fedcba9876543210" in text and JUDGE in text


def test_the_report_reads(tmp_path):
    judgements_path, labels_path = hand_worked(tmp_path)
    result = audit(read_judgements(judgements_path), read_labels(labels_path))
    rate = result.win_rate
    assert render_audit(result) == (
        f"judge {JUDGE}: 100 judged examples, 10 judge_error\n"
        "labelled: 52 (2 judge_error, counted as disagreements)\n"
        "agreement: 82.7%, 95% CI 70.3% to 90.6% (43/52; Wilson)\n"
        "Cohen's kappa: 0.77, 95% CI 0.59 to 0.90 (BCa bootstrap over the labelled examples)\n"
        "confusion (rows: judge, columns: people):\n"
        "           win   tie  loss\n"
        "  win       20     2     1\n"
        "  tie        1     5     2\n"
        "  loss       0     1    18\n"
        "swap consistency: 95.6% (86/90 examples got the same verdict in both orders)\n"
        "candidate's win rate as people judge it (a tie counts half):\n"
        f"  PPI++ (50 labels + 40 judge verdicts, λ {rate.lam:.2f}): "
        f"{rate.ppi.value:.1%}, 95% CI {rate.ppi.low:.1%} to {rate.ppi.high:.1%}\n"
        "  people only (50 labels): 50.0%, 95% CI 36.8% to 63.2%\n"
        "  judge only (90 verdicts; its bias unknown): 68.9%, 95% CI 60.4% to 77.4%\n"
        "  the 10 judge_error examples are left out of all three\n"
    )
