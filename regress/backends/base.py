"""The backend protocol: one batch method per request kind, plus a fingerprint."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from regress.core.errors import BadInput
from regress.core.fingerprint import RuntimeFingerprint
from regress.core.requests import (
    FailedResult,
    GenerateRequest,
    GenerateResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingLoglikelihoodRequest,
    RollingResult,
)

Progress = Callable[[int], None]
"""Called with the number of requests just finished, so the caller can drive a progress bar."""


class Backend(Protocol):
    """A loaded model that answers lm-eval's three request kinds.

    Results come back in the order of the requests. A backend may reorder work internally
    (to share prefixes, to batch by length) but never changes a result because of it. A
    request the backend cannot answer comes back as a `FailedResult`, not an exception.
    """

    name: str

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[LoglikelihoodResult | FailedResult]: ...

    def loglikelihood_rolling(
        self, requests: Sequence[RollingLoglikelihoodRequest], progress: Progress | None = None
    ) -> list[RollingResult | FailedResult]: ...

    def generate(
        self, requests: Sequence[GenerateRequest], progress: Progress | None = None
    ) -> list[GenerateResult | FailedResult]: ...

    def fingerprint(self) -> RuntimeFingerprint:
        """Backend name and version, load parameters, libraries and the hardware path."""
        ...

    def close(self) -> None: ...


def setting(name: str, value: Any, kind: type, minimum: float | None = None) -> Any:
    """Check one --model-args value before it reaches a C library (a negative n_batch
    crashed llama.cpp): its type, and its lower bound when one is given."""
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok:
        raise BadInput(f"--model-args: {name} must be {kind.__name__}, got {value!r:.40}")
    if minimum is not None and value < minimum:
        raise BadInput(f"--model-args: {name} must be >= {minimum}, got {value}")
    return value
