"""Model-written code cannot fake a pass: completions that forge the result line, patch the
harness or return objects that equal anything all score 0, through the judge and through
`regress eval` against a server that answers with them. The sandbox runs them for real."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from regress.cli import cli
from regress.core.errors import BadInput
from regress.tasks import python_functions as pf
from regress.tasks.scoring.hidden_tests import parse_test
from regress.tasks.scoring.sandbox import SandboxLimits, run_python
from regress.tasks.scoring.sandbox_child import RESULT_PREFIX, Undecodable, decode

TUPLE_23 = {"t": "tuple", "v": [{"t": "int", "v": "2"}, {"t": "int", "v": "3"}]}
_FORGED = '{"status": "passed", "failed": [], "errors": [], "results": []}'
HOSTILE = {
    # The nonce sits in the harness's frame: read it, print a passing line, leave.
    "nonce from the caller's frame": (
        "\n    return None\nimport os, sys\n_n = sys._getframe(1).f_locals['nonce']\n"
        f"sys.stdout.write('{RESULT_PREFIX} ' + _n + ' ' + {_FORGED!r} + '\\n')\n"
        "sys.stdout.flush()\nos._exit(0)\n"
    ),
    # The same, claiming a value for every expression the harness will evaluate.
    "forged values for every expression": (
        "\n    return None\nimport os, sys, json as _j\n_l = sys._getframe(1).f_locals\n"
        "_r = [{'value': {'t': 'bool', 'v': True}} for _ in _l['calls']]\n"
        "_o = {'status': 'ran', 'results': _r, 'errors': [], 'memory': False}\n"
        f"sys.stdout.write('{RESULT_PREFIX} ' + _l['nonce'] + ' ' + _j.dumps(_o) + '\\n')\n"
        "sys.stdout.flush()\nos._exit(0)\n"
    ),
    "json.dumps patched": (
        "\n    return None\nimport json\njson.dumps = lambda *a, **k: " + repr(_FORGED) + "\n"
    ),
    "exec and eval patched": (
        "\n    return None\nimport builtins\nbuiltins.exec = lambda *a, **k: None\n"
        "builtins.eval = lambda *a, **k: None\n"
    ),
    "an object equal to anything": (
        "\n    class _Any:\n        def __eq__(self, other):\n            return True\n"
        "        def __bool__(self):\n            return True\n    return _Any()\n"
    ),
    "an int that equals anything": (
        "\n    class _I(int):\n        def __eq__(self, other):\n            return True\n"
        "        __hash__ = int.__hash__\n    return _I(0)\n"
    ),
    "type() patched to pass an object as an int": (
        "\n    class _S:\n        def __str__(self):\n            return '0'\n    return _S()\n"
        "import builtins\n_type = builtins.type\n"
        "builtins.type = lambda *a: int if len(a) == 1 and _type(a[0]).__name__ == '_S' "
        "else _type(*a)\n"
    ),
}


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return pf.load()


def test_the_reference_solutions_pass(docs) -> None:
    for doc in docs[:5]:
        assert pf.judge(doc, doc["solution"]).metrics["pass"] == 1.0, doc["id"]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_completion_scores_nothing(docs, name: str) -> None:
    for doc in docs[:4]:
        scored = pf.judge(doc, HOSTILE[name])
        assert scored.metrics["pass"] == 0.0, (name, doc["id"], scored.scores)
        assert scored.metrics["tests_passed"] < 1.0


class _Server(BaseHTTPRequestHandler):
    """An OpenAI-compatible server whose every completion is one hostile text."""

    text = ""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._send({"data": [{"id": "stub"}]})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        text = type(self).text
        choice = {"index": 0, "text": text, "message": {"role": "assistant", "content": text}}
        self._send({"choices": [{**choice, "finish_reason": "stop"}], "usage": {}})

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_eval_against_a_server_of_forgeries_scores_zero(server, tmp_path) -> None:
    """The probe that once scored 30/30 (1.000) with the nonce forgery."""
    _Server.text = HOSTILE["nonce from the caller's frame"]
    args = ["eval", "--backend", "openai", "-m", "stub", "--model-args", f"base_url={server}"]
    args += ["-t", "python_functions", "--no-cache", "-o", str(tmp_path)]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    (results,) = tmp_path.glob("**/results_*.json")
    metrics = json.loads(results.read_text())["results"]["python_functions"]
    assert metrics["pass,none"] == 0.0


def test_hidden_tests_are_split_and_values_decoded_by_regress_s_rules() -> None:
    test = parse_test("assert f(2) == [1, (2, 3)]")
    assert [(c.function, c.args) for c in test.calls] == [("f", (2,))]
    assert test.holds([decode({"t": "list", "v": [{"t": "int", "v": "1"}, TUPLE_23]})])
    assert not test.holds([decode({"t": "list", "v": [{"t": "int", "v": "1"}]})])
    assert parse_test("assert is_even(4) is True").holds([decode({"t": "bool", "v": True})])
    assert not parse_test("assert is_even(4) is True").holds([decode({"t": "int", "v": "1"})])
    # This side applies every builtin and operator, and computes the calls' arguments.
    test = parse_test("assert abs(g(-40, key=len('ab')) + 40) < 1e-9 and f() == 2 * 3")
    assert [(c.function, c.args, c.kwargs) for c in test.calls] == [
        ("g", (-40,), (("key", 2),)),
        ("f", (), ()),
    ]
    assert test.holds([-40.0, 6]) and not test.holds([-40.0, 7]) and not test.holds([0, 6])
    # Anything outside the tagged form is no value.
    unhashable_set = {"t": "set", "v": [{"t": "list", "v": []}]}
    odd = [{"t": "int", "v": "1e3"}, unhashable_set, {"t": "obj", "v": "x"}, {"t": "none", "v": 1}]
    for node in [*odd, [1], {"t": "bool", "v": 1}, {"t": "int", "v": "9" * 5000}]:
        with pytest.raises(Undecodable):
            decode(node)


@pytest.mark.parametrize(
    "statement",
    [
        "assert f() is 1",  # `is` only with None, True or False
        "print(1)",
        "assert f(",
        "assert f(g(1)) == 2",  # the child would compute g(1) and f of it
        "assert [x for x in f()] == []",  # a comprehension's own scope
        "assert f().center(10**9)",  # a method outside the pure ones
        "assert f() == x",  # a free name
        "assert f(*args) == 1",
        "assert obj.f(1) == 2",  # a call that is not the solution's function by name
        "assert f() == b'x'",
    ],
)
def test_tests_the_split_cannot_express_are_refused_at_load(statement: str) -> None:
    with pytest.raises(BadInput, match="hidden test"):
        parse_test(statement)


def test_a_shadowed_builtin_cannot_pass_a_wrong_answer(docs) -> None:
    """`abs = lambda x: 0` at module level once passed py-07's third test with f(-40) = 12345:
    the child evaluated `abs(...)` in the solution's namespace."""
    doc = next(d for d in docs if d["id"] == "py-07")
    assert "abs(" in doc["tests"][2]
    body = "\n    return 12345 if c == -40 else c * 9 / 5 + 32\nabs = lambda x: 0\n"
    body = body.replace("c", doc["prompt"].split("(")[1].split(")")[0])
    scored = pf.judge(doc, body)
    assert scored.metrics["pass"] == 0.0
    assert scored.scores["failed_tests"] == [doc["tests"][2]]


def test_a_patched_encoder_cannot_forge_a_bare_assert() -> None:
    """A bare `assert EXPR` was evaluated in the child: replacing the child's encoder made
    every expression report True. Now the child reports the calls' values only."""
    forge = (
        "import __main__\n__main__.encode = lambda value, budget: {'t': 'bool', 'v': True}\n"
        "def f(x):\n    return 0\n"
    )
    tests = ["assert f(2) == 4 and f(3) == 6", "assert not f(0)"]
    result = run_python(forge, tests, SandboxLimits(cpu_seconds=1, wall_seconds=5))
    assert result.failed_tests == tuple(tests)
    honest = "def f(x):\n    return 2 * x\n"
    assert run_python(honest, tests, SandboxLimits(cpu_seconds=1, wall_seconds=5)).passed


def test_oversized_values_fail_the_test_without_exhausting_regress() -> None:
    """A returned 1,000-character string times a test's 10**9 would be a terabyte here."""
    program = "def f():\n    return 'x' * 1000\n"
    tests = ["assert len(f() * 10**9) > 0", "assert len(f() * 1000) == 10**6"]
    result = run_python(program, tests, SandboxLimits(cpu_seconds=1, wall_seconds=5))
    assert result.failed_tests == (tests[0],)
