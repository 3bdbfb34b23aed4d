"""Policy files: defaults, every key, and one clear error per mistake."""

import pytest
from test_compare import runs

from regress.core.errors import BadInput, ExitCode
from regress.gate.compare import compare
from regress.gate.policy import Inconclusive, Policy, UnitPolicy, load_policy, parse_policy
from regress.stats import Correction, PassRequires, Rule
from regress.stats import Test as McNemar

FULL = """\
alpha: 0.01
rule: change
correction: bonferroni
test: exact
max_drop: 0.03
metric: acc_norm
inconclusive: fail
max_error_rate: 0.1
min_examples: 200
power: 0.9
perplexity:
  max_relative_increase: 0.05
units:
  arc_easy: {max_drop: 0.05, metric: acc, rule: margin}
  builtin: {gate: false}
  wikitext: {max_relative_increase: 0.1}
"""


def write(tmp_path, text):
    path = tmp_path / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_none_and_empty_file_give_the_defaults(tmp_path):
    assert load_policy(None) == Policy()
    assert load_policy(write(tmp_path, "")) == Policy()
    defaults = Policy()
    assert (defaults.alpha, defaults.max_drop, defaults.min_examples) == (0.05, 0.02, 100)
    assert defaults.correction is Correction.HOLM and defaults.test is McNemar.MIDP
    assert defaults.inconclusive is Inconclusive.WARN
    assert defaults.rule is Rule.MARGIN


def test_every_key_is_read(tmp_path):
    policy = load_policy(write(tmp_path, FULL))
    assert policy.alpha == 0.01
    assert policy.rule is Rule.CHANGE
    assert policy.correction is Correction.BONFERRONI
    assert policy.test is McNemar.EXACT
    assert policy.max_drop == 0.03
    assert policy.metric == "acc_norm"
    assert policy.inconclusive is Inconclusive.FAIL
    assert policy.max_error_rate == 0.1
    assert policy.min_examples == 200
    assert policy.power == 0.9
    assert policy.max_relative_increase == 0.05
    assert policy.units["arc_easy"] == UnitPolicy(max_drop=0.05, metric="acc", rule=Rule.MARGIN)
    assert policy.units["builtin"].gate is False


def test_for_unit_fills_overrides_with_defaults(tmp_path):
    policy = load_policy(write(tmp_path, FULL))
    assert policy.for_unit("arc_easy") == UnitPolicy(0.05, "acc", 0.05, True, Rule.MARGIN)
    assert policy.for_unit("mmlu") == UnitPolicy(0.03, "acc_norm", 0.05, True, Rule.CHANGE)
    assert policy.for_unit("wikitext").max_relative_increase == 0.1
    assert policy.for_unit("builtin").gate is False


def test_to_dict_reads_back_to_the_same_policy(tmp_path):
    policy = load_policy(write(tmp_path, FULL))
    data = policy.to_dict()
    assert data["correction"] == "bonferroni" and data["perplexity"] == {
        "max_relative_increase": 0.05
    }
    assert data["units"]["builtin"] == {"gate": False}
    assert data["rule"] == "change" and data["units"]["arc_easy"]["rule"] == "margin"
    assert parse_policy(data) == policy
    assert parse_policy(Policy().to_dict()) == Policy()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alpah: 0.1", "unknown policy key 'alpah'"),
        ("perplexity: {max_increase: 0.1}", "unknown policy key 'perplexity.max_increase'"),
        ("units: {arc_easy: {max_dorp: 0.1}}", "unknown policy key 'units.arc_easy.max_dorp'"),
        ("alpha: 1.5", "alpha must be a number in (0, 1), got 1.5"),
        ("alpha: 0", "alpha must be a number in (0, 1), got 0"),
        ("alpha: true", "alpha must be a number, got True"),
        ("max_drop: -0.01", "max_drop must be a number in [0, 1), got -0.01"),
        ("max_drop: '2%'", "max_drop must be a number, got '2%'"),
        ("correction: fdr", "correction must be one of holm, bonferroni, got 'fdr'"),
        ("test: chi2", "test must be one of midp, exact, asymptotic, got 'chi2'"),
        ("inconclusive: ignore", "inconclusive must be one of warn, fail, got 'ignore'"),
        ("min_examples: 2.5", "min_examples must be a whole number >= 1, got 2.5"),
        ("min_examples: 0", "min_examples must be a whole number >= 1, got 0"),
        ("rule: equivalence", "rule must be one of margin, change, got 'equivalence'"),
        ("units: {mmlu: {rule: 1}}", "units.mmlu.rule must be one of margin, change, got 1"),
        ("metric: 3", "metric must be a metric name, got 3"),
        ("units: [arc_easy]", "units must be a mapping of keys to values"),
        ("units: {builtin: {gate: 'no'}}", "units.builtin.gate must be true or false, got 'no'"),
        (
            "perplexity: {max_relative_increase: 0}",
            "perplexity.max_relative_increase must be a positive number, got 0",
        ),
        ("- alpha", "policy must be a mapping of keys to values"),
    ],
)
def test_bad_policy_is_one_line_naming_key_and_file(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as error:
        load_policy(path)
    text = str(error.value)
    assert text.startswith(f"policy file {path}: ")
    assert message in text
    assert "\n" not in text
    assert error.value.exit_code is ExitCode.BAD_INPUT


def test_unreadable_and_invalid_yaml(tmp_path):
    with pytest.raises(BadInput, match="cannot read"):
        load_policy(tmp_path / "missing.yaml")
    with pytest.raises(BadInput, match=r"not valid YAML \(line 2: "):
        load_policy(write(tmp_path, "alpha: 0.05\nmax_drop: : 1\n"))


def test_pass_requires_is_read_and_a_notice_only_where_its_default_turns_a_check_red(tmp_path):
    """A first policy file gets no migration notice; one whose INCONCLUSIVE fails and that
    leaves pass_requires to its default (changed before 0.1.0) is told what a PASS needs."""
    first = load_policy(write(tmp_path, "max_drop: 0.03\n"))
    assert first.pass_requires is PassRequires.EVIDENCE and first == Policy(max_drop=0.03)
    assert first.notices == ()
    old = load_policy(write(tmp_path, "max_drop: 0.03\ninconclusive: fail\n"))
    (notice,) = old.notices
    assert "sets inconclusive: fail but not pass_requires" in notice
    assert str(tmp_path / "policy.yaml") in notice
    chosen = "inconclusive: fail\npass_requires: evidence\n"
    assert load_policy(write(tmp_path, chosen)).notices == ()
    new = load_policy(write(tmp_path, "pass_requires: no_evidence_of_harm\n"))
    assert new.pass_requires is PassRequires.NO_EVIDENCE_OF_HARM and new.notices == ()
    assert Policy(pass_requires="evidence").pass_requires is PassRequires.EVIDENCE
    with pytest.raises(BadInput, match="pass_requires must be one of"):
        parse_policy({"pass_requires": "maybe"})
    # The notice reaches the report's warnings.
    base, cand = runs({"arc_easy": (300, 0, 0)})
    assert compare(base, cand, old).warnings == old.notices
