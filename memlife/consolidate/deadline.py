"""A whole model request within its timeout, not each read of it.

The HTTP client's timeout bounds each read: a server (or a broken proxy) that sends its
body one byte every 2 s held one group, and the store's lease, as long as it kept sending,
with MEMLIFE_MODEL_TIMEOUT at 3 s (session 29 review). The transport here counts from the
moment a request is sent and ends the body's reading once the deadline is past, as a read
timeout (the SDK's retries and MODEL_UNAVAILABLE follow, as for any timeout).

The answer's headers are bounded too: until they are in, a timer shuts the request's socket
down at the deadline (``socket.shutdown`` wakes a read blocked in it; ``close`` from
another thread would not), and the failed read is reported as the deadline's timeout. The
socket is the one the request's own connection opened (httpcore's ``connect_tcp`` trace),
so connections are not kept alive between requests: a model call takes seconds, a new
connection milliseconds.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx  # the HTTP client the anthropic SDK uses


class _Deadline(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, request: httpx.Request, until: float):
        self.inner, self.request, self.until = inner, request, until

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            if time.monotonic() > self.until:
                raise httpx.ReadTimeout("the request's deadline passed", request=self.request)
            yield chunk

    def close(self) -> None:
        self.inner.close()


class DeadlineTransport(httpx.HTTPTransport):
    """An HTTP transport whose responses must be read whole within ``seconds`` of sending."""

    def __init__(self, seconds: float, **kw: object) -> None:
        kw.setdefault("limits", httpx.Limits(max_keepalive_connections=0))  # module doc
        super().__init__(**kw)  # type: ignore[arg-type]  # httpx types each keyword; passed through
        self.seconds = seconds

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        until = time.monotonic() + self.seconds
        sockets: list[socket.socket] = []
        traced = request.extensions.get("trace")

        def trace(event: str, info: dict[str, Any]) -> None:
            # TLS wraps (and detaches) the TCP socket: the TLS stream's socket is the live one
            if event.endswith(_OPENED) and info.get("return_value") is not None:
                sock = info["return_value"].get_extra_info("socket")
                if sock is not None:
                    sockets.append(sock)
            if traced is not None:
                traced(event, info)

        request.extensions["trace"] = trace
        timer = threading.Timer(self.seconds, _shut, (sockets,))
        timer.daemon = True
        timer.start()
        try:
            response = super().handle_request(request)
        except httpx.TransportError as exc:
            if time.monotonic() >= until and not isinstance(exc, httpx.TimeoutException):
                raise httpx.ReadTimeout(
                    "the request's deadline passed before the answer", request=request
                ) from exc
            raise
        finally:
            timer.cancel()
        if isinstance(response.stream, httpx.SyncByteStream):  # what HTTPTransport returns
            response.stream = _Deadline(response.stream, request, until)
        return response


_OPENED = (".connect_tcp.complete", ".start_tls.complete")


def _shut(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        try:  # the plain socket call: SSLSocket.shutdown would drop its TLS state under the
            # thread reading it
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:  # already closed (the request ended as the timer fired), detached
            pass


def deadline_client_options(seconds: float) -> dict[str, Any]:
    """``transport`` and ``mounts`` for an httpx client whose every request is bounded whole:
    a client given its own transport reads no proxy from the environment, so the
    environment's proxies (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY, as httpx reads them) are
    mounted here, each through a deadline transport of its own."""
    from httpx2._utils import get_environment_proxies  # httpx's own reading of them

    mounts: dict[str, httpx.BaseTransport | None] = {
        pattern: DeadlineTransport(seconds, proxy=url) if url else None  # None: direct
        for pattern, url in get_environment_proxies().items()
    }
    return {"transport": DeadlineTransport(seconds), "mounts": mounts}
