"""Bounds on a whole synchronous HTTP exchange: one wall-clock deadline, and a reply size.

httpx's timeouts bound each network operation, so a server that sends its headers or body a
byte at a time never trips them (encode/httpx#1450). httpcore, below httpx, lets a client bring
its own network backend; this one cuts every connect, read and write to the time left before
the calling thread's deadline, so connecting, headers and body all count against one budget.

httpx reads a whole body into memory, however large: `read_at_most` streams it and stops at a
limit, so a server answering with gigabytes costs the limit, not the gigabytes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

_local = threading.local()


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every network operation this thread makes inside the block ends within `seconds` of
    its start, counted together; past it they raise httpx.TimeoutException."""
    _local.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _local.at = None


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """The smaller of an operation's own timeout and the time left; `error` once none is."""
    at: float | None = getattr(_local, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the request's overall deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        tls = self._stream.start_tls(
            ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)
        )
        return _Stream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's own synchronous backend, every stream cut to the thread's deadline."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        left = _left(timeout, httpcore.ConnectTimeout)
        return _Stream(self._backend.connect_tcp(host, port, left, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        left = _left(timeout, httpcore.ConnectTimeout)
        return _Stream(self._backend.connect_unix_socket(path, left, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def transport(limits: httpx.Limits) -> httpx.HTTPTransport:
    """An httpx transport whose connections honour `deadline`.

    httpx's transport takes no network backend, so its connection pool is replaced by an
    equivalent one that has ours (TLS verified as httpx does by default). Proxies from the
    environment are not applied to a client given this transport."""
    base = httpx.HTTPTransport(limits=limits)
    base._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_Backend(),
    )
    return base


class ReplyTooLarge(httpx.HTTPError):
    """A reply body longer than the caller's limit (an httpx error, so callers that already
    handle those handle it)."""


def read_at_most(response: httpx.Response, limit: int) -> httpx.Response:
    """`response` (opened with `Client.stream`) with its body read, decoded; ReplyTooLarge as
    soon as the decoded body passes `limit` bytes. The result is a new response holding the
    decoded body, so reading it decodes nothing again."""
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge(f"the reply is larger than {limit:,} bytes")
        chunks.append(chunk)
    decoded = ("content-encoding", "content-length", "transfer-encoding")
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in decoded]
    return httpx.Response(
        response.status_code,
        headers=headers,
        content=b"".join(chunks),
        request=response.request,
    )
