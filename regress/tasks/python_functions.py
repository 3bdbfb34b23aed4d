"""python_functions: complete a small Python function from its signature and docstring, as
HumanEval (Chen et al. 2021, arXiv:2107.03374) does; hidden unit tests judge it.

Written for regress (30 items, `data/python_functions.jsonl`: `id`, `prompt` (the signature
and docstring), `tests` (assert statements) and `solution` (a reference completion, which the
tests check; never shown to the model)). The prompt is one worked exemplar function, then the
item's prompt with trailing whitespace stripped, as bigcode-evaluation-harness does for
HumanEval: given the docstring's final newline, SmolLM2 wrote no body for any of the 5 items
probed (a new `def`, or prose), and with it stripped a body for 6 of 6 (newline plus indent is
one token, which the newline alone would split). The generation continues the function and
stops at HumanEval's stop strings. The program run is the stripped prompt plus the
generation, in
`regress.tasks.scoring.sandbox` (bubblewrap: no network, no installed packages or task data
in reach, writes only in a throwaway tmpfs; CPU, memory, wall-clock and process limits), which
computes only the calls the hidden tests make; regress evaluates each assertion itself.

Metrics: `pass` (primary, 0/1: every test passed) and `tests_passed` (the fraction).
`scores["sandbox"]` holds the outcome (passed, failed, syntax_error, timeout, memory,
killed). A run the sandbox refuses (a containment layer missing) stops the evaluation with
RunFailed, never counts as a wrong answer.
"""

from __future__ import annotations

from regress.core.errors import RunFailed
from regress.tasks.base import Scored
from regress.tasks.generative import GenerativeTask, data_path, read_items
from regress.tasks.loaders import Doc
from regress.tasks.scoring.sandbox import (
    HINT,
    Outcome,
    SandboxLimits,
    optional_layers_from_env,
    run_python,
)

EXEMPLAR = (
    "def count_negatives(numbers):\n"
    '    """Return how many numbers in the list are below zero."""\n'
    "    count = 0\n"
    "    for x in numbers:\n"
    "        if x < 0:\n"
    "            count += 1\n"
    "    return count\n\n\n"
)
UNTIL = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#")
"""HumanEval's stop strings."""
MAX_TOKENS = 256
METRICS = ("pass", "tests_passed")
LIMITS = SandboxLimits(cpu_seconds=5, wall_seconds=10.0)


def load() -> list[Doc]:
    """The shipped items."""
    return read_items(
        data_path("python_functions.jsonl"),
        {"id": str, "prompt": str, "tests": list, "solution": str},
    )


def render(doc: Doc) -> str:
    """The exemplar function, then the item's signature and docstring (stripped)."""
    return EXEMPLAR + doc["prompt"].rstrip()


def judge(doc: Doc, text: str) -> Scored:
    """Run the prompt plus the completion against the hidden tests in the sandbox."""
    limits = SandboxLimits(
        cpu_seconds=LIMITS.cpu_seconds,
        wall_seconds=LIMITS.wall_seconds,
        optional_layers=optional_layers_from_env(),
    )
    result = run_python(doc["prompt"].rstrip() + text, doc["tests"], limits)
    if result.outcome is Outcome.SANDBOX_ERROR:
        reason = f"python_functions: the code sandbox refused to run: {result.reason} ({HINT})"
        raise RunFailed(reason)
    ran = result.outcome in (Outcome.PASSED, Outcome.FAILED, Outcome.MEMORY)
    passed_tests = result.n_tests - len(result.failed_tests) if ran else 0
    metrics = {"pass": float(result.passed), "tests_passed": passed_tests / result.n_tests}
    scores = {"sandbox": [result.outcome.value], "failed_tests": list(result.failed_tests)}
    return Scored(result.outcome.value, int(result.passed), metrics, scores)


def python_functions_task() -> GenerativeTask:
    """The built-in `python_functions` set."""
    return GenerativeTask(
        name="python_functions",
        load=load,
        render=render,
        judge=judge,
        until=UNTIL,
        max_tokens=MAX_TOKENS,
        primary_metric="pass",
        metric_names=METRICS,
        description="Complete a Python function from its signature and docstring (sandboxed).",
    )
