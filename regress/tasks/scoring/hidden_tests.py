"""Hidden unit tests split so that model-written code only computes, never judges.

A hidden test is one `assert` statement (`assert f(2) == 4`, `assert abs(g(-40) + 40) < 1e-9`).
At load it is parsed once into the calls the tested code must answer (`f(2)`, `g(-40)`: a
function the solution defines, with arguments this side computes) and the rest of the
expression, which this side evaluates itself over the returned values: every literal,
operator, builtin and comparison. The sandboxed child sees only the calls' arguments; a
solution that shadows `abs`, patches its own encoder or returns an object whose `__eq__` says
yes cannot move a verdict, because values come back as plain data (`sandbox_child.decode`)
and this side applies `abs`, `+` and `<` to them.

A statement the split cannot express (a comprehension, a free variable, a call of a solution
function inside another's arguments, an attribute outside the allowed methods) is refused at
load with a one-line BadInput: a test that would need the child to evaluate it is not a test.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from regress.core.errors import BadInput

MAX_RESULT = 1_000_000
"""The largest sequence, or the most digits, an operation here may build from a reported value:
a solution's 1 MB string times a test's 10**9 must not exhaust this process."""


class Unsafe(Exception):
    """An operation whose result would exceed MAX_RESULT, or is not allowed on these types."""


def _sized(value: Any) -> Any:
    if isinstance(value, str | list | tuple | bytes) and len(value) > MAX_RESULT:
        raise Unsafe("result too large")
    if isinstance(value, int) and value.bit_length() > 4 * MAX_RESULT:
        raise Unsafe("integer too large")
    return value


def _mul(a: Any, b: Any) -> Any:
    for seq, n in ((a, b), (b, a)):
        repeated = isinstance(seq, str | list | tuple) and isinstance(n, int)
        if repeated and len(seq) * max(n, 0) > MAX_RESULT:
            raise Unsafe("repetition too large")
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_RESULT:
        raise Unsafe("product too large")
    return a * b


def _pow(a: Any, b: Any) -> Any:
    integers = isinstance(a, int) and isinstance(b, int)
    if integers and abs(a) > 1 and b * a.bit_length() > MAX_RESULT:
        raise Unsafe("power too large")
    return a**b


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, str | bytes):
        raise Unsafe("string formatting")  # "%0999999999d" % 1
    return a % b


def _round(number: Any, ndigits: int | None = None) -> Any:
    if ndigits is not None and abs(ndigits) > 1000:
        raise Unsafe("round to too many digits")  # round(n, -10**9) builds 10**(10**9)
    return round(number, ndigits)


_BINARY: Mapping[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: _mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: _mod,
    ast.Pow: _pow,
}
_UNARY: Mapping[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
    ast.Invert: operator.invert,
}
_COMPARE: Mapping[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: operator.contains(b, a),
    ast.NotIn: lambda a, b: not operator.contains(b, a),
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "tuple": tuple,
          "dict": dict, "set": set, "frozenset": frozenset}  # fmt: skip
BUILTINS: Mapping[str, Callable[..., Any]] = {
    **_TYPES,
    "abs": abs,
    "len": len,
    "round": _round,
    "min": min,
    "max": max,
    "sum": sum,
    "sorted": sorted,
    "reversed": lambda x: list(reversed(x)),
    "all": all,
    "any": any,
    "isinstance": isinstance,
    "type": type,
    "math.isclose": math.isclose,
}
"""What a hidden test may call on this side. Every other called name is the solution's."""
_METHODS: dict[type, set[str]] = {
    str: {"lower", "upper", "strip", "lstrip", "rstrip", "split", "startswith", "endswith",
          "count", "find", "index", "isdigit", "isalpha", "isupper", "islower", "splitlines"},
    list: {"count", "index"},
    tuple: {"count", "index"},
    dict: {"keys", "values", "items", "get"},
}  # fmt: skip
"""Pure methods a test may call on a returned value (none that pads or repeats)."""


@dataclass(frozen=True)
class Call:
    """One call the tested code answers: a function it defines, with this side's arguments."""

    function: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class HiddenTest:
    """One hidden test: the calls sent to the sandbox, and the expression judged here."""

    statement: str
    calls: tuple[Call, ...]
    test: ast.expr
    """The assertion with each call replaced by a placeholder for its returned value."""

    def holds(self, values: Sequence[Any]) -> bool:
        """Whether the assertion is true of the calls' returned values (decoded plain data).
        Anything the evaluation raises, or an oversized result, fails the test."""
        env = {_placeholder(i): value for i, value in enumerate(values)}
        try:
            return bool(_evaluate(self.test, env))
        except (Unsafe, ArithmeticError, TypeError, ValueError, LookupError, RecursionError):
            return False


def _placeholder(i: int) -> str:
    return f"<call {i}>"  # no Python name can collide with it


def parse_test(statement: str) -> HiddenTest:
    """`assert EXPR` as a HiddenTest; BadInput (naming the statement) for what cannot be split."""
    where = f"hidden test {statement[:80]!r}"
    try:
        body = ast.parse(statement).body
    except (SyntaxError, RecursionError, MemoryError) as exc:
        raise BadInput(f"{where}: {getattr(exc, 'msg', 'too deeply nested')}") from None
    if len(body) != 1 or not isinstance(body[0], ast.Assert):
        raise BadInput(f"{where}: not one `assert` statement")
    calls: list[Call] = []
    try:
        test = _Splitter(calls).visit(body[0].test)
        _evaluate(test, {_placeholder(i): None for i in range(len(calls))}, check_only=True)
    except _Refused as exc:
        raise BadInput(f"{where}: {exc}") from None
    return HiddenTest(statement, tuple(calls), test)


class _Refused(Exception):
    """A construct the split does not express."""


class _Splitter(ast.NodeTransformer):
    """Replaces each call of a solution function by a placeholder name, computing its
    arguments here (they may use literals and builtins, never another solution call)."""

    def __init__(self, calls: list[Call]) -> None:
        self.calls = calls

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if _dotted(node.func) in BUILTINS or isinstance(node.func, ast.Attribute):
            return self.generic_visit(node)  # a method of a returned value: checked later
        if not isinstance(node.func, ast.Name):
            raise _Refused("call a function of the solution by its name")
        name = node.func.id
        try:
            args = tuple(_static(a) for a in node.args)
            kwargs = tuple((k.arg, _static(k.value)) for k in node.keywords if k.arg)
        except _Refused as exc:
            raise _Refused(f"arguments of {name}(): {exc}") from None
        if len(kwargs) != len(node.keywords):
            raise _Refused("no `**` arguments")
        self.calls.append(Call(name, args, kwargs))
        return ast.copy_location(ast.Name(_placeholder(len(self.calls) - 1), ast.Load()), node)


def _static(node: ast.expr) -> Any:
    """An argument's value, computed here: literals, operators and builtins only."""
    if isinstance(node, ast.Starred):
        raise _Refused("no `*` arguments")
    try:
        return _evaluate(node, {})
    except _Refused:
        raise
    except Exception as exc:  # a test's own arithmetic error is the test's fault
        raise _Refused(f"{type(exc).__name__}: {exc}") from None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _evaluate(node: ast.expr, env: Mapping[str, Any], check_only: bool = False) -> Any:
    """The value of `node` over plain data. With `check_only`, walk every branch once to
    refuse what is not allowed, without trusting the placeholder values."""

    def ev(n: ast.expr) -> Any:
        return _evaluate(n, env, check_only)

    if isinstance(node, ast.Constant):
        if not isinstance(node.value, int | float | str | bool | type(None)):
            raise _Refused(f"a {type(node.value).__name__} literal")
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in _TYPES:
            return _TYPES[node.id]
        raise _Refused(f"the free name {node.id!r}")
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [ev(e) for e in node.elts]
        kind = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)]
        return None if check_only else kind(items)
    if isinstance(node, ast.Dict):
        keys = [k for k in node.keys if k is not None]
        if len(keys) != len(node.keys):
            raise _Refused("no `**` in a dict")
        pairs = [(ev(k), ev(v)) for k, v in zip(keys, node.values, strict=True)]
        return None if check_only else dict(pairs)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        value = ev(node.operand)
        return None if check_only else _UNARY[type(node.op)](value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = ev(node.left), ev(node.right)
        return None if check_only else _sized(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.BoolOp):
        values = [ev(v) for v in node.values] if check_only else None
        if check_only:
            return values
        result = None
        for v in node.values:
            result = ev(v)
            if isinstance(node.op, ast.And) != bool(result):
                return result
        return result
    if isinstance(node, ast.Compare):
        return _compare(node, ev, check_only)
    if isinstance(node, ast.IfExp):
        if check_only:
            return [ev(node.test), ev(node.body), ev(node.orelse)]
        return ev(node.body) if ev(node.test) else ev(node.orelse)
    if isinstance(node, ast.Subscript):
        value, index = ev(node.value), ev(node.slice)
        return None if check_only else value[index]
    if isinstance(node, ast.Slice):
        parts = [ev(p) if p is not None else None for p in (node.lower, node.upper, node.step)]
        return None if check_only else slice(*parts)
    if isinstance(node, ast.Call):
        return _call(node, ev, check_only)
    raise _Refused(f"a {type(node).__name__} expression")


def _compare(node: ast.Compare, ev: Callable[[ast.expr], Any], check_only: bool) -> Any:
    for op, right in zip(node.ops, node.comparators, strict=True):
        if isinstance(op, ast.Is | ast.IsNot) and not (
            isinstance(right, ast.Constant) and any(right.value is v for v in (None, True, False))
        ):
            raise _Refused("`is` compares with None, True or False")
    values = [ev(node.left), *(ev(c) for c in node.comparators)]
    if check_only:
        return None
    for op, (a, b) in zip(node.ops, zip(values, values[1:], strict=False), strict=True):
        if not _COMPARE[type(op)](a, b):
            return False
    return True


def _call(node: ast.Call, ev: Callable[[ast.expr], Any], check_only: bool) -> Any:
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        raise _Refused("no `*` or `**` arguments")
    args = [ev(a) for a in node.args]
    kwargs = {k.arg: ev(k.value) for k in node.keywords if k.arg}
    name = _dotted(node.func)
    if name is not None and name in BUILTINS:
        return None if check_only else _sized(BUILTINS[name](*args, **kwargs))
    if isinstance(node.func, ast.Attribute):
        owner = ev(node.func.value)
        method = node.func.attr
        if not any(method in names for names in _METHODS.values()):
            raise _Refused(f"the method .{method}()")
        if check_only:
            return None
        if method not in _METHODS.get(type(owner), set()):
            raise Unsafe(f".{method}() on a {type(owner).__name__}")
        return _sized(getattr(owner, method)(*args, **kwargs))
    raise _Refused("a call of a solution function inside another expression's arguments")
