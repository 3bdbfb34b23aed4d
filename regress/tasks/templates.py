"""lm-eval's Jinja prompt templates, rendered in a sandbox.

A task YAML's `doc_to_text`, `doc_to_target`, `doc_to_choice` and `description` are Jinja
templates over a document's fields (or a bare field name). lm-eval renders them with
`StrictUndefined` and `keep_trailing_newline`, plus a `regex_replace` filter; so do we, but in
Jinja's immutable sandbox: a template from a file someone else wrote may call a string's or a
list's safe methods (`question.strip()`, `choices.label.index(answerKey)`), never reach
Python internals or change the document.
"""

from __future__ import annotations

import ast
import functools
import math
import sys
import time
from types import FrameType
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from regress.core import safe_regex
from regress.core.errors import BadInput
from regress.tasks.template_sizes import (
    MAX_SIZE,
    before_call,
    bounded_filter,
    measured,
    printf_checked,
)


def _regex_replace(string: str, pattern: str, repl: str, count: int = 0) -> str:
    """lm-eval's `regex_replace` filter: `re.sub` inside a template."""
    return safe_regex.sub(pattern, repl, string, count=count)


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox, with `*`, `**`, `%` and every call bounded as it bounds
    `range` (`"x" * 10**10` would exhaust memory, `9**999999999` the CPU): no value a template
    builds is larger than MAX_SIZE (regress.tasks.template_sizes)."""

    intercepted_binops = frozenset({"*", "**", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        """`left operator right`, refusing a result above MAX_SIZE (OverflowError)."""
        if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
            digits = right * math.log10(abs(left)) if abs(left) > 1 else 0
            if digits > MAX_SIZE:
                raise OverflowError(f"** would build a number of {digits:.3g} digits")
        sized, count = (left, right) if isinstance(right, int) else (right, left)
        repeats = isinstance(sized, str | list | tuple) and isinstance(count, int)
        if operator == "*" and repeats and len(sized) * count > MAX_SIZE:
            raise OverflowError(f"* would build {len(sized) * count} items")
        if operator == "%":
            printf_checked(left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        """A call from the template (a method, a global), refused when what it would build or
        built is larger than MAX_SIZE (OverflowError). The names follow Jinja's own, which
        keep a keyword argument called `self` or `context` free for the callee."""
        args = before_call(__obj, args, kwargs)
        return measured(super().call(__context, __obj, *args, **kwargs))


MAX_STEPS = 200_000
"""Lines of template code one render may run. lm-eval's templates run a few dozen; two nested
`range(100000)` loops, each within Jinja's own bound, would run 10^10 (hours)."""
MAX_SECONDS = 5.0
"""A render's wall-clock budget, for loops whose every step is a slow call on a large value."""
MAX_OUTPUT = 10 * MAX_SIZE
"""Characters one render may write: a loop can repeat a MAX_SIZE string."""


def _within_budget(template: jinja2.Template, doc: dict[str, Any]) -> str:
    """Render, counting the template's own lines as they run and the text it writes; past a
    budget the render stops with OverflowError."""
    steps = 0
    deadline = time.monotonic() + MAX_SECONDS

    def count(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal steps
        if event == "line":
            steps += 1
            if steps > MAX_STEPS:
                raise OverflowError(f"ran more than {MAX_STEPS:,} steps")
            if time.monotonic() > deadline:
                raise OverflowError(f"ran longer than {MAX_SECONDS:g} s")
        return count

    def enter(frame: FrameType, event: str, arg: Any) -> Any:
        # Only the compiled template's frames (and its macros') are counted; what they call
        # is bounded elsewhere (MAX_SIZE, the regex deadline).
        return count if frame.f_code.co_filename == "<template>" else None

    parts, size = [], 0
    previous = sys.gettrace()
    sys.settrace(enter)
    try:
        for part in template.generate(**doc):
            size += len(part)
            if size > MAX_OUTPUT:
                raise OverflowError(f"wrote more than {MAX_OUTPUT:,} characters")
            parts.append(part)
    finally:
        sys.settrace(previous)
    return "".join(parts)


_ENV = _Sandbox(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
_ENV.filters["regex_replace"] = _regex_replace
_ENV.filters.update({name: bounded_filter(name, f) for name, f in _ENV.filters.items()})


@functools.lru_cache(maxsize=512)
def compile_template(source: str) -> jinja2.Template:
    """A compiled template; a syntax error is a BadInput quoting the template's start."""
    try:
        return _ENV.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise BadInput(f"template {_short(source)}: {exc.message} (line {exc.lineno})") from exc
    except RecursionError:  # thousands of nested brackets: Jinja's parser recurses
        raise BadInput(f"template {_short(source)}: nested too deeply") from None


@functools.lru_cache(maxsize=512)
def _repeats(source: str) -> bool:
    """Whether a template can run any line twice: only loops and macros (recursion) can. The
    budget's tracing triples a render's cost, so a template without them skips it."""
    return any(_ENV.parse(source).find_all((nodes.For, nodes.Macro, nodes.CallBlock)))


def render(source: str, doc: dict[str, Any], where: str) -> str:
    """`source` rendered over `doc`'s fields; `where` names the task and key in errors."""
    try:
        template = compile_template(source)
        return _within_budget(template, doc) if _repeats(source) else template.render(**doc)
    except jinja2.UndefinedError as exc:
        raise BadInput(f"{where}: template {_short(source)}: {exc.message}") from exc
    except jinja2.exceptions.SecurityError as exc:
        raise BadInput(
            f"{where}: template {_short(source)} refused by the sandbox ({exc})"
        ) from exc
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError) as exc:
        # OverflowError: the sandbox's bounds (`range(10**9)`, MAX_SIZE and MAX_STEPS above)
        raise BadInput(f"{where}: template {_short(source)} failed ({exc})") from exc
    except RecursionError:
        raise BadInput(f"{where}: template {_short(source)} nested too deeply") from None
    except MemoryError:  # a string method asked for gigabytes (`x.ljust(10**10)`)
        raise BadInput(f"{where}: template {_short(source)} ran out of memory") from None


def literal(text: str, where: str) -> Any:
    """A rendered template read as a Python literal (lm-eval's `ast.literal_eval`)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise BadInput(f"{where}: {_short(text)} is not a list or number literal") from exc


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")
