"""A whole model request within its timeout (session 29 review): the HTTP client's timeout
bounded each read, so a server sending its body one byte at a time held a group, and the
store's lease, as long as it kept sending (60 s and counting with MEMLIFE_MODEL_TIMEOUT=3).
The request now ends at its deadline, as a timeout: MODEL_UNAVAILABLE, retried next run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memlife.consolidate import ConsolidationError
from memlife.consolidate.anthropic import AnthropicConsolidator
from memlife.embed import default_embedder
from tests.unit.test_consolidation_adversarial import PAIR


class _Trickle(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b'{"id": "msg_1", "type": "message", "role": "assistant", "content": []}' * 50
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        try:
            for i in range(0, len(body), 8):  # 8 bytes every 0.2 s: each read well in time
                self.wfile.write(body[i : i + 8])
                self.wfile.flush()
                time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def trickle() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_trickling_answer_ends_at_the_requests_deadline(trickle: str) -> None:
    c = AnthropicConsolidator(model="claude-haiku-4-5", base_url=trickle, api_key="sk-ant-fake",
                              embedder=default_embedder(), max_retries=0, timeout=1.5)  # fmt: skip
    t0 = time.monotonic()
    with pytest.raises(ConsolidationError) as info:
        c.consolidate(PAIR)
    took = time.monotonic() - t0
    assert info.value.code == "MODEL_UNAVAILABLE" and info.value.retryable
    assert took < 6, took  # the whole body would take about 90 s


class _SlowHeaders(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        try:  # the status line one byte every 0.2 s: each read well in time, never done
            for b in b"HTTP/1.1 200 OK\r\nx-pad: " + b"a" * 400:
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


def test_trickling_headers_end_at_the_requests_deadline() -> None:
    """Session 29 "Left": the deadline bounded the body, while headers sent one byte at a
    time still held the request for as long as the server kept sending (80 s here)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowHeaders)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        c = AnthropicConsolidator(model="claude-haiku-4-5", base_url=url, api_key="sk-ant-fake",
                                  embedder=default_embedder(), max_retries=0, timeout=1.5)  # fmt: skip
        t0 = time.monotonic()
        with pytest.raises(ConsolidationError) as info:
            c.consolidate(PAIR)
        took = time.monotonic() - t0
    finally:
        server.shutdown()
    assert info.value.code == "MODEL_UNAVAILABLE" and info.value.retryable
    assert took < 6, took
