"""What one call in a prompt template may build: every filter, and every method a template
calls, measured before it runs and after.

A template without loops runs each of its lines once, yet one call can ask for gigabytes:
`'x' | center(1000000000)` and `"%0999999999d" | format(1)` each ran for over a minute and took
4 GB, and so would `s.replace("", big)`, `big.join(range(100000))`, `[1] | batch(10**9, 0)` or
`tojson(indent=10**9)`. Before such a call runs, the size of what it would build is bounded
from its arguments (a width, a count, a separator times the items it separates: every filter
through `bounded_filter`, every method and global through `before_call`); after any call,
`measured` checks the size of what it built. Either above MAX_SIZE raises OverflowError, which
the renderer reports as bad input naming the template.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import string
from collections.abc import Callable, Collection, Mapping
from typing import Any

from jinja2.utils import generate_lorem_ipsum

MAX_SIZE = 1_000_000
"""The largest string, list or integer (in digits) one call in a template may build: a
prompt is a few kilobytes."""
_LOREM_WORD = 15
"""Characters a lorem-ipsum word takes at most, with its space and punctuation."""
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")
"""A printf conversion: its width and precision (digits, or `*` for one taken from the
values)."""
_DIGITS = re.compile(r"\d+")

Arguments = Mapping[str, Any]


def _size(value: Any) -> int:
    """What `value` takes in characters or items; 0 for what has no length."""
    if isinstance(value, str | bytes | list | tuple | dict | set | frozenset):
        return len(value)
    return 0


def _text(value: Any) -> int:
    """The characters `value` prints as: its length for text, else its str() (small values)."""
    return len(value) if isinstance(value, str | bytes) else len(str(value))


def _number(value: Any) -> int:
    """A width or count argument as a size (0 for what is no whole number)."""
    return abs(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def _padded(subject: Any, width: Any) -> int:
    """center, ljust, rjust, zfill: the text, or `width` when wider."""
    return max(_size(subject), _number(width))


def _replaced(subject: Any, old: Any, new: Any, count: Any) -> int:
    """replace: each occurrence of `old` (every gap between characters, for "") grows by the
    difference in length, at most `count` times."""
    if not isinstance(subject, str | bytes) or not isinstance(old, str | bytes):
        return _size(subject)
    hits = len(subject) + 1 if not old else subject.count(old)  # type: ignore[arg-type]
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(subject) + hits * max(0, _size(new) - len(old))


def _joined(separator: Any, items: Collection[Any]) -> int:
    """join: the items' text and a separator between each two."""
    return sum(_text(item) for item in items) + max(0, len(items) - 1) * _size(separator)


def _printf(template: Any, values: Any) -> int:
    """`template % values`: the text, plus each conversion's width or precision and the
    longest value (a mapping lets one value be converted many times)."""
    if not isinstance(template, str):
        return 0
    if isinstance(values, Mapping):
        values = list(values.values())
    elif not isinstance(values, tuple):
        values = [values]
    longest = max((_text(v) for v in values), default=0)
    star = max((_number(v) for v in values), default=0)
    size = len(template)
    for match in _PRINTF.finditer(template):
        width, precision = (star if g == "*" else int(g or 0) for g in (match[1], match[2]))
        size += max(width, precision) + longest
    return size


def _formatted(template: Any, args: Any, kwargs: Any) -> int:
    """`template.format(*args, **kwargs)`: the text, plus each field's longest value and its
    width (a width nested as `{:{}}` is the largest whole-number argument)."""
    if not isinstance(template, str):
        return 0
    values = [*args, *kwargs.values()]
    longest = max((_text(v) for v in values), default=0)
    size = 0
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:  # malformed: format() itself raises, with its own message
        return 0
    for literal, name, spec, _ in fields:
        size += len(literal)
        if name is None:
            continue
        spec = spec or ""
        nested = max((_number(v) for v in values), default=0) if "{" in spec else 0
        widths = [int(d) for d in _DIGITS.findall(spec)]
        size += longest + max([nested, *widths])
    return size


def _tojson(value: Any, indent: Any) -> int:
    """tojson: the compact JSON, every character of it possibly on a line of its own."""
    try:
        compact = json.dumps(value, default=str)
    except (TypeError, ValueError):
        return 0
    step = len(indent) if isinstance(indent, str) else _number(indent)
    return len(compact) * (1 + step) if indent is not None else len(compact)


def _expanded(subject: Any, tabsize: Any) -> int:
    """expandtabs: each tab becomes up to `tabsize` spaces."""
    tab = "\t" if isinstance(subject, str) else b"\t"
    return len(subject) + subject.count(tab) * _number(tabsize)


def _translated(subject: Any, table: Any) -> int:
    """translate: each character becomes at most the longest replacement."""
    values = table.values() if isinstance(table, Mapping) else ()
    return len(subject) * max([1, *(_text(v) for v in values)])


def _indented(text: Any, width: Any) -> int:
    """indent: every line gains the indent (`width` spaces, or a string)."""
    lines = text.count("\n") + 1 if isinstance(text, str) else 1
    step = _size(width) if isinstance(width, str) else _number(width)
    return _size(text) + lines * step


def _urlized(text: Any, target: Any, rel: Any) -> int:
    """urlize: at most one link per four characters, each wrapped in a tag with its target
    and rel."""
    return _size(text) + (_size(text) // 4 + 1) * (64 + _size(target) + _size(rel))


def _regex_replaced(text: Any, repl: Any) -> int:
    """regex_replace: every gap between characters may match, and each backslash of the
    replacement may be a group reference repeating the whole text."""
    backslashes = repl.count("\\") if isinstance(repl, str) else 0
    return _size(text) + (_size(text) + 1) * _size(repl) + backslashes * _size(text)


_METHODS: dict[str, Callable[[Any, Arguments], int]] = {
    "center": lambda s, a: _padded(s, a["width"]),
    "ljust": lambda s, a: _padded(s, a["width"]),
    "rjust": lambda s, a: _padded(s, a["width"]),
    "zfill": lambda s, a: _padded(s, a["width"]),
    "expandtabs": lambda s, a: _expanded(s, a["tabsize"]),
    "replace": lambda s, a: _replaced(s, a["old"], a["new"], a["count"]),
    "join": lambda s, a: _joined(s, a["iterable"]),
    "translate": lambda s, a: _translated(s, a["table"]),
}
"""Methods of str and bytes that can build far more than their subject, by name."""

_FILTERS: dict[str, Callable[[Arguments], int]] = {
    "center": lambda a: _padded(a["value"], a["width"]),
    "indent": lambda a: _indented(a["s"], a["width"]),
    "format": lambda a: _printf(a["value"], a["kwargs"] or tuple(a["args"])),
    "batch": lambda a: _number(a["linecount"]) if a["fill_with"] is not None else 0,
    "slice": lambda a: _number(a["slices"]),
    "join": lambda a: _joined(a["d"], a["value"]),
    "replace": lambda a: _replaced(a["s"], a["old"], a["new"], a["count"]),
    "wordwrap": lambda a: _size(a["s"]) * (1 + _size(a["wrapstring"] or "\n")),
    "urlize": lambda a: _urlized(a["value"], a["target"], a["rel"]),
    "tojson": lambda a: _tojson(a["value"], a["indent"]),
    "regex_replace": lambda a: _regex_replaced(a["string"], a["repl"]),
}
"""Filters that can build far more than their input, by name."""

_PASSED = ("context", "eval_ctx", "environment", "env")
"""The names Jinja's filters give the argument it passes them first."""
_JOINED = ("iterable", "value")
"""join's items (the method's and the filter's), read into a list first so they can be
measured: a generator would be used up by the measuring."""


def measured(result: Any) -> Any:
    """`result`, or OverflowError when it is larger than MAX_SIZE."""
    if _size(result) > MAX_SIZE:
        raise OverflowError(f"a call built {_size(result):,} items (at most {MAX_SIZE:,})")
    return result


def _refuse(size: int, what: str) -> None:
    if size > MAX_SIZE:
        raise OverflowError(f"{what} would build {size:,} characters (at most {MAX_SIZE:,})")


def _bind(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any], joins: bool
) -> inspect.BoundArguments | None:
    """`args` and `kwargs` bound to `signature`, defaults filled and (for a join) the items
    listed; None when they do not fit it (the call then raises its own error)."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    for name in _JOINED if joins else ():
        items = bound.arguments.get(name)
        if items is not None and not isinstance(items, Collection):
            bound.arguments[name] = list(items)
    return bound


def _filter_signature(func: Callable[..., Any]) -> inspect.Signature:
    """A filter's own parameters, without the context, eval context or environment Jinja
    passes first to a filter marked for it (the mark may sit on a wrapper whose wrapped
    function does not take that argument, as with Jinja's async variants)."""
    signature = inspect.signature(func)
    params = list(signature.parameters.values())
    if hasattr(func, "jinja_pass_arg") and params and params[0].name in _PASSED:
        params = params[1:]
    return signature.replace(parameters=params)


def bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """Filter `name` refusing a call whose estimated or actual output exceeds MAX_SIZE.

    functools.wraps keeps Jinja's marks (`pass_context` and the like), so the filter gets the
    same arguments as before."""
    estimate = _FILTERS.get(name)
    signature = _filter_signature(func)
    passed = 1 if hasattr(func, "jinja_pass_arg") else 0

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        lead, own = args[:passed], args[passed:]
        if estimate is not None and (bound := _bind(signature, own, kwargs, name == "join")):
            _refuse(estimate(bound.arguments), f"filter {name}")
            own, kwargs = bound.args, bound.kwargs
        return measured(func(*lead, *own, **kwargs))

    return wrapper


def before_call(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Refuse a call whose estimated output exceeds MAX_SIZE (OverflowError); the positional
    arguments to make it with (an iterable to join read into a list)."""
    name = getattr(obj, "__name__", "")
    subject = getattr(inspect.unwrap(obj), "__self__", None)
    text = isinstance(subject, str | bytes)
    if text and name == "format":  # Jinja's sandboxed str.format: no signature to bind
        _refuse(_formatted(subject, args, kwargs), "format")
    elif text and name == "format_map" and args and isinstance(args[0], Mapping):
        _refuse(_formatted(subject, (), dict(args[0])), "format_map")
    elif obj is generate_lorem_ipsum and (bound := _bound_call(obj, args, kwargs)):
        words = _number(bound.arguments["n"]) * _number(bound.arguments["max"])
        _refuse(words * _LOREM_WORD, "lipsum")
    elif _whole(subject) and name == "to_bytes" and (bound := _bound_call(obj, args, kwargs)):
        _refuse(_number(bound.arguments["length"]), "to_bytes")
    elif text and name in _METHODS and (bound := _bound_call(obj, args, kwargs)):
        _refuse(_METHODS[name](subject, bound.arguments), name)
        return tuple(bound.args)
    return args


def _bound_call(
    obj: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> inspect.BoundArguments | None:
    """A call's arguments bound to `obj`'s parameters; None when it declares none (a few
    builtins) or they do not fit."""
    try:
        signature = inspect.signature(obj)
    except ValueError:
        return None
    return _bind(signature, args, kwargs, getattr(obj, "__name__", "") == "join")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def printf_checked(template: Any, values: Any) -> None:
    """The `%` operator on a string: OverflowError when its output would exceed MAX_SIZE."""
    _refuse(_printf(template, values), "%")
