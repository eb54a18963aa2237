"""A whole model request within its timeout (session 29 review): the HTTP client's timeout
bounded each read, so a server sending its body one byte at a time held a group, and the
store's lease, as long as it kept sending (60 s and counting with MEMLIFE_MODEL_TIMEOUT=3).
The request now ends at its deadline, as a timeout: MODEL_UNAVAILABLE, retried next run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memlife.consolidate import ConsolidationError
from memlife.consolidate.anthropic import AnthropicConsolidator
from memlife.embed import default_embedder
from tests.unit.test_consolidation_adversarial import PAIR


def _drip(handler: BaseHTTPRequestHandler, data: bytes, step: int) -> None:
    """Send ``data`` ``step`` bytes every 0.2 s: each read well in time, the whole never."""
    try:
        for i in range(0, len(data), step):
            handler.wfile.write(data[i : i + step])
            handler.wfile.flush()
            time.sleep(0.2)
    except (BrokenPipeError, ConnectionResetError):
        pass


class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


class _Trickle(_Quiet):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b'{"id": "msg_1", "type": "message", "role": "assistant", "content": []}' * 50
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        _drip(self, body, 8)


@contextmanager
def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()


def _ends_at_the_deadline(server: ThreadingHTTPServer) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}"
    c = AnthropicConsolidator(model="claude-haiku-4-5", base_url=url, api_key="sk-ant-fake",
                              embedder=default_embedder(), max_retries=0, timeout=1.5)  # fmt: skip
    t0 = time.monotonic()
    with pytest.raises(ConsolidationError) as info:
        c.consolidate(PAIR)
    took = time.monotonic() - t0
    assert info.value.code == "MODEL_UNAVAILABLE" and info.value.retryable
    assert took < 6, took  # the whole answer would take 80 to 90 s


def test_a_trickling_answer_ends_at_the_requests_deadline() -> None:
    with _serve(_Trickle) as server:
        _ends_at_the_deadline(server)


class _SlowHeaders(_Quiet):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        _drip(self, b"HTTP/1.1 200 OK\r\nx-pad: " + b"a" * 400, 1)  # the status line, never done


def test_trickling_headers_end_at_the_requests_deadline() -> None:
    """Session 29 "Left": the deadline bounded the body, while headers sent one byte at a
    time still held the request for as long as the server kept sending (80 s here)."""
    with _serve(_SlowHeaders) as server:
        _ends_at_the_deadline(server)


def _self_signed(tmp_path) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """A certificate for 127.0.0.1 and its key, made here (nothing downloaded)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    return str(cert_path), str(key_path)


def test_trickling_headers_over_tls_end_at_the_deadline(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Review of session 31: TLS detaches the TCP socket the timer held, so over https the
    shutdown failed quietly and the headers trickled on (16.8 s against a 1.5 s deadline)."""
    import ssl

    import httpx2 as httpx

    from memlife.consolidate.deadline import DeadlineTransport

    cert, key = _self_signed(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowHeaders)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    trust = ssl.create_default_context(cafile=cert)
    client = httpx.Client(transport=DeadlineTransport(1.5, verify=trust), timeout=1.5)
    t0 = time.monotonic()
    try:
        with pytest.raises(httpx.TimeoutException):
            client.post(f"https://127.0.0.1:{server.server_address[1]}/", content=b"{}")
    finally:
        server.shutdown()
    assert time.monotonic() - t0 < 6


class _Proxy(_Quiet):
    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        _Proxy.seen.append(self.path)  # a proxy is sent the absolute URL
        body = b'{"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}'
        self.send_response(529)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_the_model_client_goes_through_the_environments_proxy(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Review of session 31: a client given its own (deadline) transport reads no proxy
    from the environment, so HTTP(S)_PROXY was silently bypassed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        c = AnthropicConsolidator(model="claude-haiku-4-5", base_url="http://model.invalid",
                                  api_key="sk-ant-fake", embedder=default_embedder(),
                                  max_retries=0, timeout=5)  # fmt: skip
        with pytest.raises(ConsolidationError):
            c.consolidate(PAIR)
    finally:
        server.shutdown()
    assert any(p.startswith("http://model.invalid/") for p in _Proxy.seen), _Proxy.seen
