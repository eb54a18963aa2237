"""A scriptable local HTTP server that speaks enough of the Anthropic Messages API.

The real ``anthropic`` SDK is pointed at it with ``base_url``, so tests exercise the SDK's
own request building, response parsing, retries and timeouts. Only non-streaming
``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` are served.

Scripting (per route, ``/v1/messages`` by default):

- ``server.enqueue(reply, ...)``: replies are served first-in first-out;
- ``server.set_handler(fn)``: ``fn(body) -> Reply | str | dict`` answers once the queue is
  empty (``str`` becomes a text reply, ``dict`` a 200 JSON body sent as-is).

A queued item may itself be a callable taking the parsed body. With nothing scripted,
``/v1/messages`` answers a non-retryable 500 (a test should never get a reply it did not
ask for) and ``count_tokens`` answers a deterministic estimate. Every request is recorded.

Register the ``messages_server`` fixture with ``pytest_plugins = ["tests.fakes.messages_api"]``.
"""

from __future__ import annotations

import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import anthropic
import pytest

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
DEFAULT_MODEL = "claude-haiku-4-5"

__all__ = [
    "COUNT_TOKENS_PATH",
    "MESSAGES_PATH",
    "MessagesServer",
    "RecordedRequest",
    "Reply",
    "count_tokens_reply",
    "error_reply",
    "estimate_tokens",
    "invalid_request_error",
    "json_reply",
    "message_reply",
    "messages_server",
    "overloaded_error",
    "rate_limit_error",
    "raw_reply",
    "server_error",
    "text_reply",
    "tool_use_reply",
]

_ids = itertools.count(1)


def _next_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):08d}"


def estimate_tokens(obj: object) -> int:
    """Deterministic token estimate of any JSON value: ceil(compact JSON chars / 4).

    Not Anthropic's tokenizer; it just gives ``usage`` and ``count_tokens`` numbers that
    grow with the request, as real ones do.
    """
    if obj is None:
        return 0
    text = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return math.ceil(len(text) / 4)


def _request_input_tokens(body: Mapping[str, Any]) -> int:
    # What the API bills as input: messages, system prompt and tool definitions.
    parts = [body.get("messages"), body.get("system"), body.get("tools")]
    return max(1, sum(estimate_tokens(p) for p in parts))


@dataclass
class Reply:
    """One scripted HTTP answer.

    ``message`` is a Messages API ``message`` object completed at send time (``id``,
    ``model`` from the request, ``usage`` estimated unless given); ``body`` is sent as-is
    (a dict is JSON-encoded, bytes/str verbatim). ``delay`` seconds pass before anything is
    written, which is how client timeouts are provoked.
    """

    status: int = 200
    message: dict[str, Any] | None = None
    body: dict[str, Any] | bytes | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    delay: float = 0.0

    def delayed(self, seconds: float) -> Reply:
        """Return a copy of this reply that waits ``seconds`` before answering."""
        return Reply(
            status=self.status,
            message=self.message,
            body=self.body,
            headers=dict(self.headers),
            content_type=self.content_type,
            delay=seconds,
        )


ReplyLike = Reply | str | dict[str, Any]
Handler = Callable[[dict[str, Any]], ReplyLike]


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server received it. Header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any  # parsed JSON, or None if the body was not JSON
    received_at: float


# ---- reply builders ----------------------------------------------------------------------


def message_reply(
    content: Sequence[Mapping[str, Any]],
    *,
    stop_reason: str = "end_turn",
    model: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A 200 ``message`` with the given content blocks; unset usage is estimated."""
    message: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": [dict(b) for b in content],
        "stop_reason": stop_reason,
        "stop_sequence": None,
    }
    if model is not None:
        message["model"] = model
    usage: dict[str, int] = {}
    if input_tokens is not None:
        usage["input_tokens"] = input_tokens
    if output_tokens is not None:
        usage["output_tokens"] = output_tokens
    message["usage"] = usage
    return Reply(message=message, headers=dict(headers or {}))


def text_reply(text: str, *, stop_reason: str = "end_turn", **kwargs: Any) -> Reply:
    """An assistant reply with one text block (``stop_reason="max_tokens"`` for truncation)."""
    return message_reply([{"type": "text", "text": text}], stop_reason=stop_reason, **kwargs)


def json_reply(obj: object, **kwargs: Any) -> Reply:
    """A text reply whose text is ``obj`` as JSON (structured-output style answers)."""
    return text_reply(json.dumps(obj), **kwargs)


def tool_use_reply(
    name: str,
    input: Mapping[str, Any],
    *,
    text: str | None = None,
    tool_id: str | None = None,
    more: Sequence[tuple[str, Mapping[str, Any]]] = (),
    **kwargs: Any,
) -> Reply:
    """A ``tool_use`` reply (stop_reason ``tool_use``); ``more`` adds parallel calls.

    ``text`` puts a text block before the tool call(s), as models often do.
    """
    blocks: list[dict[str, Any]] = []
    if text is not None:
        blocks.append({"type": "text", "text": text})
    calls = [(name, input, tool_id), *((n, i, None) for n, i in more)]
    for call_name, call_input, call_id in calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call_id or _next_id("toolu"),
                "name": call_name,
                "input": dict(call_input),
            }
        )
    kwargs.setdefault("stop_reason", "tool_use")
    return message_reply(blocks, **kwargs)


def raw_reply(
    body: bytes | str,
    *,
    status: int = 200,
    content_type: str = "application/json",
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """Send ``body`` verbatim: invalid JSON, a wrong shape, HTML from a proxy, ..."""
    return Reply(status=status, body=body, content_type=content_type, headers=dict(headers or {}))


def error_reply(
    status: int,
    error_type: str,
    message: str = "fake error",
    *,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An error in Anthropic's shape: ``{"type": "error", "error": {"type", "message"}}``."""
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return Reply(status=status, body=body, headers=dict(headers or {}))


def rate_limit_error(retry_after: float = 1.0, message: str = "Rate limited") -> Reply:
    """429 ``rate_limit_error`` with a ``retry-after`` header in seconds (the SDK obeys it)."""
    value = str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
    return error_reply(429, "rate_limit_error", message, headers={"retry-after": value})


def overloaded_error(message: str = "Overloaded") -> Reply:
    """529 ``overloaded_error`` (retried by the SDK, raised as ``OverloadedError``)."""
    return error_reply(529, "overloaded_error", message)


def server_error(message: str = "Internal server error") -> Reply:
    """500 ``api_error`` (retried by the SDK, raised as ``InternalServerError``)."""
    return error_reply(500, "api_error", message)


def invalid_request_error(message: str) -> Reply:
    """400 ``invalid_request_error`` (not retried, raised as ``BadRequestError``)."""
    return error_reply(400, "invalid_request_error", message)


def count_tokens_reply(input_tokens: int) -> Reply:
    """A ``count_tokens`` answer."""
    return Reply(body={"input_tokens": input_tokens})


# ---- request checks (what the real API rejects with 400) -------------------------------


def _blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def check_messages_request(body: object, *, require_max_tokens: bool) -> str | None:
    """Return why the real API would answer 400, or None. Deliberately partial.

    Checks the fields the SDK would not catch itself and the tool pairing rule the API
    enforces: each ``tool_result`` answers a ``tool_use`` of the immediately preceding
    assistant message, and every ``tool_use`` before the last message is answered.
    """
    if not isinstance(body, dict):
        return "body: expected a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if require_max_tokens and not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = msg.get("content")
        if not isinstance(content, str | list):
            return f"messages.{i}.content: Field required"
        if isinstance(content, list) and not content and i != len(messages) - 1:
            return f"messages.{i}: all messages must have non-empty content"
    for i, msg in enumerate(messages):
        prev_uses: set[str] = set()
        if i > 0 and messages[i - 1]["role"] == "assistant":
            prev_uses = {
                b.get("id", "")
                for b in _blocks(messages[i - 1]["content"])
                if b.get("type") == "tool_use"
            }
        results = [
            b.get("tool_use_id") for b in _blocks(msg["content"]) if b.get("type") == "tool_result"
        ]
        if results and msg["role"] != "user":
            return f"messages.{i}: tool_result blocks are only allowed in user messages"
        for tid in results:
            if tid not in prev_uses:
                return (
                    f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {tid}. Each `tool_result` block must have a corresponding "
                    "`tool_use` block in the previous message."
                )
        if msg["role"] == "assistant" and i + 1 < len(messages):
            uses = [b.get("id") for b in _blocks(msg["content"]) if b.get("type") == "tool_use"]
            answered = {
                b.get("tool_use_id")
                for b in _blocks(messages[i + 1]["content"])
                if b.get("type") == "tool_result"
            }
            missing = [u for u in uses if u not in answered]
            if missing:
                return (
                    f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(str(m) for m in missing)}. Each `tool_use` "
                    "block must have a corresponding `tool_result` block in the next message."
                )
    return None


# ---- the server ---------------------------------------------------------------------------


class MessagesServer:
    """Scriptable fake of the Messages API on 127.0.0.1 (ephemeral port), in a thread.

    ``validate=True`` (default) answers 400 ``invalid_request_error`` to requests the real
    API would reject for shape or tool pairing, so code under test cannot rely on the fake
    being more lenient than the service.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, validate: bool = True) -> None:
        self.validate = validate
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Reply | Handler]] = {}
        self._handlers: dict[str, Handler] = {}
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer((host, port), _make_handler_class(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # lifecycle
    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> MessagesServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on a scripted delay
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, **kwargs: Any) -> anthropic.Anthropic:
        """A real SDK client aimed at this server (fake key; override anything via kwargs)."""
        kwargs.setdefault("api_key", "sk-ant-fake-key")
        kwargs.setdefault("base_url", self.base_url)
        return anthropic.Anthropic(**kwargs)

    # scripting
    def enqueue(self, *replies: Reply | Handler, path: str = MESSAGES_PATH) -> None:
        with self._lock:
            self._queues.setdefault(path, deque()).extend(replies)

    def set_handler(self, handler: Handler | None, *, path: str = MESSAGES_PATH) -> None:
        with self._lock:
            if handler is None:
                self._handlers.pop(path, None)
            else:
                self._handlers[path] = handler

    def pending(self, path: str = MESSAGES_PATH) -> int:
        """Scripted replies not yet served on ``path``."""
        with self._lock:
            return len(self._queues.get(path, ()))

    def reset(self) -> None:
        """Forget scripts and recorded requests."""
        with self._lock:
            self._queues.clear()
            self._handlers.clear()
            self._requests.clear()

    # recording
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str = MESSAGES_PATH) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """Requests to ``POST /v1/messages`` (retries included: each attempt is one)."""
        return self.requests_to(MESSAGES_PATH)

    @property
    def last_body(self) -> Any:
        reqs = self.message_requests
        if not reqs:
            raise AssertionError("no request reached POST /v1/messages")
        return reqs[-1].body

    # serving (called from handler threads)
    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(req)

    def _next_script(self, path: str) -> Reply | Handler | None:
        with self._lock:
            queue = self._queues.get(path)
            if queue:
                return queue.popleft()
            return self._handlers.get(path)

    def _respond(self, path: str, body: Any) -> Reply:
        if path not in (MESSAGES_PATH, COUNT_TOKENS_PATH):
            return error_reply(404, "not_found_error", f"fake: no route for POST {path}")
        if self.validate:
            problem = check_messages_request(body, require_max_tokens=path == MESSAGES_PATH)
            if problem is not None:
                return invalid_request_error(problem)
        script = self._next_script(path)
        if script is None:
            if path == COUNT_TOKENS_PATH:
                return count_tokens_reply(_request_input_tokens(body))
            reply = server_error(f"fake: no scripted reply for POST {path}")
            reply.headers["x-should-retry"] = "false"  # an unscripted call is a test bug
            return reply
        if isinstance(script, Reply):
            return script
        return _coerce(script(body))

    def _finish(self, reply: Reply, body: Any) -> bytes:
        if reply.message is not None:
            msg = json.loads(json.dumps(reply.message))  # scripted replies may be reused
            msg.setdefault("id", _next_id("msg"))
            if "model" not in msg:
                msg["model"] = (
                    body.get("model", DEFAULT_MODEL) if isinstance(body, dict) else DEFAULT_MODEL
                )
            usage = msg.setdefault("usage", {})
            usage.setdefault(
                "input_tokens", _request_input_tokens(body if isinstance(body, dict) else {})
            )
            usage.setdefault("output_tokens", max(1, estimate_tokens(msg["content"])))
            usage.setdefault("cache_creation_input_tokens", 0)
            usage.setdefault("cache_read_input_tokens", 0)
            usage.setdefault("service_tier", "standard")
            return json.dumps(msg).encode()
        if reply.body is None:
            return b""
        if isinstance(reply.body, bytes):
            return reply.body
        if isinstance(reply.body, str):
            return reply.body.encode()
        return json.dumps(reply.body).encode()


def _coerce(value: ReplyLike) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return text_reply(value)
    if isinstance(value, dict):
        return Reply(body=value)
    raise TypeError(f"handler returned {type(value).__name__}; want Reply, str or dict")


def _make_handler_class(server: MessagesServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like the real API; needs Content-Length

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output clean

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = None
            server._record(
                RecordedRequest(
                    method="POST",
                    path=path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    raw=raw,
                    body=body,
                    received_at=time.time(),
                )
            )
            try:
                reply = server._respond(path, body)
                payload = server._finish(reply, body)
            except Exception as exc:  # noqa: BLE001 - a broken handler must surface, not hang the client
                reply = server_error(f"fake: handler raised {type(exc).__name__}: {exc}")
                reply.headers["x-should-retry"] = "false"
                payload = server._finish(reply, body)
            if reply.delay > 0 and server._stopping.wait(reply.delay):
                return
            try:
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                self.send_header("content-length", str(len(payload)))
                self.send_header("request-id", _next_id("req"))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing to tell it

        def do_GET(self) -> None:
            payload = json.dumps(
                {"type": "error", "error": {"type": "not_found_error", "message": "fake: GET"}}
            ).encode()
            self.send_response(404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return _Handler


@pytest.fixture
def messages_server() -> Iterator[MessagesServer]:
    """A started :class:`MessagesServer`, stopped after the test."""
    server = MessagesServer().start()
    try:
        yield server
    finally:
        server.stop()
