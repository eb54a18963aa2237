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

So is the wait between a refused request and the SDK's retry of it: the SDK sleeps as
long as a 429/529/5xx answer's ``retry-after`` (seconds or an HTTP date) or
``retry-after-ms`` asks, up to 49 days (earlier SDKs waited at most 60 s); an endpoint
answering ``retry-after: 86400`` held the group, a model slot and the store's lease for a
day per retry (audit 49c). A wait is honoured up to the request's own timeout.

And its size: a body is read whole into memory before it is parsed, and a 255 KB gzip
body decoding to 256 MiB was read (audit 49c). An answer is at most ``max_tokens`` of
text, so the request asks for it as sent (``identity``); a gateway that gzips all the
same is decoded here, never past ``MAX_BODY_BYTES``, and any other encoding is refused. A
body over the bound is cut off: a read error, as a timeout is.
"""

from __future__ import annotations

import email.utils
import math
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx  # the HTTP client the anthropic SDK uses

MAX_BODY_BYTES = 8 << 20  # an answer of 64k tokens, every character escaped, is ~2 MB


# what a gateway may send although ``identity`` was asked; decoded here, bounded (module doc)
_GZIP = 16 + zlib.MAX_WBITS
_DECODED = {"identity": None, "gzip": _GZIP, "x-gzip": _GZIP, "deflate": zlib.MAX_WBITS}


class _Deadline(httpx.SyncByteStream):
    def __init__(
        self,
        inner: httpx.SyncByteStream,
        request: httpx.Request,
        until: float,
        wbits: int | None = None,
    ):
        self.inner, self.request, self.until = inner, request, until
        self.decoder = None if wbits is None else zlib.decompressobj(wbits)

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        for chunk in self.inner:
            if time.monotonic() > self.until:
                raise httpx.ReadTimeout("the request's deadline passed", request=self.request)
            chunk = self._decoded(chunk, read)
            read += len(chunk)
            if read > MAX_BODY_BYTES:
                raise httpx.ReadError("the answer is over MAX_BODY_BYTES", request=self.request)
            yield chunk
        if self.decoder is not None:
            tail = self._decoded(b"", read, flush=True)
            if read + len(tail) > MAX_BODY_BYTES:
                raise httpx.ReadError("the answer is over MAX_BODY_BYTES", request=self.request)
            yield tail

    def _decoded(self, chunk: bytes, read: int, *, flush: bool = False) -> bytes:
        """The chunk as sent, or decoded to at most one byte past the bound (max_length)."""
        if self.decoder is None:
            return chunk
        try:
            if flush:
                return self.decoder.flush()
            out = self.decoder.decompress(chunk, MAX_BODY_BYTES + 1 - read)
        except zlib.error:
            raise httpx.DecodingError(
                "the answer's encoding is damaged", request=self.request
            ) from None
        if self.decoder.unconsumed_tail:  # the bound was reached with input left
            raise httpx.ReadError("the answer is over MAX_BODY_BYTES", request=self.request)
        return out

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
        request.headers["Accept-Encoding"] = "identity"  # module doc: no compressed answers
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
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        stream = response.stream  # HTTPTransport's own is a SyncByteStream
        streamed = isinstance(stream, httpx.SyncByteStream)
        if encoding not in _DECODED or (encoding != "identity" and not streamed):
            response.close()
            raise httpx.DecodingError("an answer in an encoding not asked for", request=request)
        if isinstance(stream, httpx.SyncByteStream):
            response.stream = _Deadline(stream, request, until, _DECODED[encoding])
            if encoding != "identity":  # decoded above: httpx must not decode it again
                del response.headers["content-encoding"]
                response.headers.pop("content-length", None)
        _bound_wait(response.headers, self.seconds)
        return response


_WAIT_HEADERS = ("retry-after-ms", "retry-after")


def _bound_wait(headers: httpx.Headers, seconds: float) -> None:
    """The answer's "retry after" as the SDK reads it, at most ``seconds`` (module doc)."""
    if not any(name in headers for name in _WAIT_HEADERS):
        return
    wait = _asked_wait(headers)
    for name in _WAIT_HEADERS:
        headers.pop(name, None)
    if wait is not None and wait > 0:  # else the SDK's own back-off, as it would do
        headers["retry-after-ms"] = str(min(wait, seconds) * 1000)


def _asked_wait(headers: httpx.Headers) -> float | None:
    """Seconds to wait, read in the SDK's order (``_parse_retry_after_header``): the
    milliseconds, the seconds, an HTTP date; None where none reads (NaN included)."""
    try:
        wait = float(headers.get("retry-after-ms", "")) / 1000
    except ValueError:
        text = headers.get("retry-after", "")
        try:
            wait = float(text)
        except ValueError:
            try:  # a year past 9999 raises: no wait that reads
                date = email.utils.parsedate_tz(text)
                wait = email.utils.mktime_tz(date) - time.time() if date else math.nan
            except (ValueError, OverflowError):
                wait = math.nan
    return None if math.isnan(wait) else wait


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
