"""The backend protocol: one batch method per request kind, plus a fingerprint."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from regress.requests import (
    FailedResult,
    GenerateRequest,
    GenerateResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingLoglikelihoodRequest,
    RollingResult,
)

SPEED_ONLY_PARAMS = frozenset(
    {"threads", "n_batch", "batch_size", "prefix_reuse", "concurrency", "timeout", "max_retries"}
)
"""Load settings that change how fast a backend runs, never what it answers."""


def result_params(params: dict[str, Any]) -> dict[str, Any]:
    """The load settings that can change results: what caches, merges and reruns must match."""
    return {k: v for k, v in params.items() if k not in SPEED_ONLY_PARAMS}


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

    def fingerprint(self) -> dict[str, Any]:
        """Backend name and version, load parameters, and anything else that changes results."""
        ...

    def close(self) -> None: ...
