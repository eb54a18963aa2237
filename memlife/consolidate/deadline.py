"""A whole model request within its timeout, not each read of it.

The HTTP client's timeout bounds each read: a server (or a broken proxy) that sends its
body one byte every 2 s held one group, and the store's lease, as long as it kept sending,
with MEMLIFE_MODEL_TIMEOUT at 3 s (session 29 review). The transport here counts from the
moment a request is sent and ends the body's reading once the deadline is past, as a read
timeout (the SDK's retries and MODEL_UNAVAILABLE follow, as for any timeout).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

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
        super().__init__(**kw)  # type: ignore[arg-type]
        self.seconds = seconds

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        until = time.monotonic() + self.seconds
        response = super().handle_request(request)
        if isinstance(response.stream, httpx.SyncByteStream):  # what HTTPTransport returns
            response.stream = _Deadline(response.stream, request, until)
        return response
