"""The sandboxed side of `regress.tasks.scoring.sandbox`: cap this process, then answer the
calls the hidden tests make.

bubblewrap starts it as `python -I -S /regress/sandbox_child.py CONFIG_JSON` inside fresh
namespaces, with a root holding only the standard library, the system's shared libraries and
a private tmpfs for its working folder, behind a seccomp filter; the job (the run's nonce, the
program and the calls) arrives as one JSON line on stdin. Standard library only: `-S` keeps
site-packages out, and none is mounted.

Before any tested code runs this process sets its rlimits (the hard limits too, so the code
cannot raise them) and, when no cgroup holds the run, an RLIMIT_NPROC that counts the sandbox's own
processes, then writes the layers it applied to the report pipe and closes it. Then it runs
the program and, for each call, calls the named function with the arguments the parent sent
and prints the returned values in a tagged JSON form of plain built-in types. That is all the
child decides: the parent decodes the values by its own rules and evaluates every assertion
itself (`hidden_tests.py`), so nothing printed here can claim a pass.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any

SETUP_FAILED = 125
RESULT_PREFIX = "REGRESS-SANDBOX-RESULT"
MAX_NODES = 10_000
"""Values, elements and keys one result may hold; a larger value is not reported."""
MAX_DEPTH = 100


class SetupError(Exception):
    """A containment layer could not be applied."""


def sandbox_processes() -> int:
    """Processes in this pid namespace (bubblewrap's init and this one): RLIMIT_NPROC counts
    them too, so a cap for the tested code adds them."""
    return sum(name.isdigit() for name in os.listdir("/proc"))


def contain(config: dict) -> list[str]:
    """Apply the rlimits and the process and memory caps; return the layers applied."""
    optional = set(config["optional"])
    applied: list[str] = []
    limits = dict(config["rlimits"])
    # The tested code may run this many processes; the sandbox's own others come on top.
    tested = limits["RLIMIT_NPROC"]
    others = sandbox_processes() - 1

    def layer(name: str, ok: bool, why: str) -> None:
        if ok:
            applied.append(name)
        elif name not in optional:
            raise SetupError(f"{name}: {why}")

    # A cgroup the parent placed the whole sandbox in holds as is; otherwise RLIMIT_NPROC,
    # which the kernel never applies to root.
    no_nproc = "RLIMIT_NPROC does not bind root and no cgroup is writable"
    layer("process_limit", bool(config["cgroup"]) or not config["root"], no_nproc)
    if not config["memory_cgroup"] and not config["root"]:
        # Without a cgroup, few processes of RLIMIT_AS each add up to the total.
        tested = min(tested, config["memory_nproc"])
    layer("memory_limit", bool(config["memory_cgroup"]) or not config["root"], no_nproc)
    limits["RLIMIT_NPROC"] = others + tested
    for name, value in limits.items():
        # SIGXCPU at the CPU limit, SIGKILL a second later: the exit status says which limit
        # ended the run (bubblewrap keeps the process's CPU time from the parent's rusage).
        hard = value + 1 if name == "RLIMIT_CPU" else value
        resource.setrlimit(getattr(resource, name), (value, hard))
    applied.append("rlimits")
    return applied


class _Unreportable(Exception):
    """A value that is not plain built-in data, or too large."""


_CONTAINERS: dict[type, str] = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}
_SEQUENCES = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


def encode(value: Any, budget: list[int]) -> dict:
    """`value` as tagged JSON of exact built-in types (a subclass is not one); `budget` counts
    down the nodes left."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _Unreportable(f"more than {MAX_NODES} elements")
    kind = type(value)
    if value is None:
        return {"t": "none"}
    if kind is bool:
        return {"t": "bool", "v": value}
    if kind is int:
        return {"t": "int", "v": str(value)}
    if kind is float:
        return {"t": "float", "v": repr(value)}
    if kind is str:
        return {"t": "str", "v": value}
    if kind in _CONTAINERS:
        return {"t": _CONTAINERS[kind], "v": [encode(x, budget) for x in value]}
    if kind is dict:
        return {
            "t": "dict",
            "v": [[encode(k, budget), encode(v, budget)] for k, v in value.items()],
        }
    raise _Unreportable(f"a {kind.__name__} is not plain data")


class Undecodable(Exception):
    """A value outside the tagged form."""


def decode(node: object, depth: int = 0) -> object:
    """A tagged value as plain built-in data; Undecodable for anything else. The parent reads
    the child's values with this, so it trusts nothing but the tags' own types."""
    if depth > MAX_DEPTH or not isinstance(node, dict) or not set(node) <= {"t", "v"}:
        raise Undecodable
    tag, v = node.get("t"), node.get("v")
    if tag == "none" and "v" not in node:
        return None
    if tag == "bool" and type(v) is bool:
        return v
    if tag == "int" and type(v) is str and 0 < len(v) <= 4300 and v.lstrip("-").isdigit():
        return int(v)
    if tag == "float" and type(v) is str:
        try:
            return float(v)
        except ValueError:
            raise Undecodable from None
    if tag == "str" and type(v) is str:
        return v
    if tag in _SEQUENCES and type(v) is list:
        try:
            return _SEQUENCES[tag](decode(x, depth + 1) for x in v)
        except TypeError:  # an unhashable element of a set
            raise Undecodable from None
    if tag == "dict" and type(v) is list:
        try:
            return {decode(k, depth + 1): decode(x, depth + 1) for k, x in v}
        except (TypeError, ValueError):
            raise Undecodable from None
    raise Undecodable


def run_calls(source: str, calls: list[dict], nonce: str) -> None:
    """Run the program, then each call; print one result line with the nonce: per call the
    returned value (tagged), or the name of what it raised."""
    main_pid = os.getpid()
    outcome: dict = {"status": "ran", "results": [], "errors": [], "memory": False}
    try:
        code = compile(source, "solution.py", "exec")
    except (SyntaxError, ValueError) as e:
        outcome.update(status="syntax_error", errors=[f"{type(e).__name__}: {e}"])
        print(f"{RESULT_PREFIX} {nonce} {json.dumps(outcome)}", flush=True)
        return
    namespace: dict = {"__name__": "solution"}
    for call in [None, *calls]:  # None: the program itself
        try:
            if call is None:
                exec(code, namespace)
            else:
                args = [decode(a) for a in call["args"]]
                kwargs = {k: decode(v) for k, v in call["kwargs"]}
                value = namespace[call["function"]](*args, **kwargs)
                outcome["results"].append({"value": encode(value, [MAX_NODES])})
        except BaseException as e:  # the tested code may raise anything, SystemExit too
            outcome["errors"].append(f"{type(e).__name__}: {str(e)[:200]}")
            outcome["memory"] = outcome["memory"] or isinstance(e, MemoryError)
            if call is None:
                outcome["status"] = "raised"
                break
            outcome["results"].append({"raised": f"{type(e).__name__}"})
        if os.getpid() != main_pid:
            os._exit(1)  # a forked copy of the tested code reports nothing
    print(f"{RESULT_PREFIX} {nonce} {json.dumps(outcome)}", flush=True)


def main() -> None:
    """Contain, report the layers, answer the calls."""
    config = json.loads(sys.argv[1])
    job = json.loads(sys.stdin.readline())
    try:
        applied = contain(config)
    except (SetupError, OSError, ValueError) as e:
        print(f"sandbox: {e}", file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)
    with os.fdopen(config["report_fd"], "w") as report:
        report.write(json.dumps(applied))
    run_calls(job["source"], job["calls"], job["nonce"])
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
