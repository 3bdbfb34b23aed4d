"""The package's own errors and the exit codes they map to (contract in DESIGN.md)."""

from __future__ import annotations

from enum import IntEnum

DISTRIBUTION = "regress-gate"
"""The name pip installs this project by. `regress` on PyPI is another project (bindings to a
Rust regex library), so the distribution has its own name; the command and the import keep
`regress`."""


def pip_install(extra: str) -> str:
    """The pip command that installs one of the project's optional extras."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class ExitCode(IntEnum):
    """Process exit codes of every `regress` command."""

    OK = 0
    """Pass (an INCONCLUSIVE unit only warns by default)."""
    REGRESSION = 1
    """A significant drop beyond max_drop (or INCONCLUSIVE under `inconclusive: fail`)."""
    BAD_INPUT = 2
    """Missing or corrupt file, bad policy, incompatible baseline, bad usage."""
    RUN_FAILED = 3
    """The run itself failed: the model would not load, too many failed examples."""


MAX_MESSAGE = 1_000
"""Characters of an error message kept. Messages quote the value they refuse; a 200 MB value
was once printed whole as the "one line"."""


def _cut(message: str) -> str:
    """`message`, its middle cut when longer than MAX_MESSAGE: what is refused and the hint
    that follows it stay readable."""
    if len(message) <= MAX_MESSAGE:
        return message
    head, tail = MAX_MESSAGE * 7 // 10, MAX_MESSAGE // 5
    cut = len(message) - head - tail
    return f"{message[:head]} [... {cut:,} characters cut ...] {message[-tail:]}"


class RegressError(Exception):
    """An error a user can act on: printed as one line (its middle cut past MAX_MESSAGE),
    exits with `exit_code`."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(_cut(message))
        if exit_code is not None:
            self.exit_code = exit_code


class BadInput(RegressError):
    """Missing or malformed input: data, model file, baseline, policy (exit 2)."""

    exit_code = ExitCode.BAD_INPUT


class RunFailed(RegressError):
    """The evaluation itself failed: model load, backend down, error rate (exit 3)."""

    exit_code = ExitCode.RUN_FAILED
