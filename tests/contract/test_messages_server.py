"""The fake Messages API server, exercised through the real anthropic SDK."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.fakes.messages_api import (
    COUNT_TOKENS_PATH,
    MessagesServer,
    count_tokens_reply,
    error_reply,
    json_reply,
    overloaded_error,
    rate_limit_error,
    raw_reply,
    server_error,
    text_reply,
    tool_use_reply,
)

MODEL = "claude-haiku-4-5"
USER: list[Any] = [{"role": "user", "content": "Hello there"}]


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    # Local twin of the plugin fixture: registering the plugin from a test module that
    # already imported it would skip pytest's assertion rewriting for it.
    with MessagesServer() as server:
        yield server


def _create(client: anthropic.Anthropic, **kwargs: Any) -> anthropic.types.Message:
    kwargs.setdefault("messages", USER)
    return client.messages.create(model=MODEL, max_tokens=256, **kwargs)


def test_text_reply_with_usage(messages_server: MessagesServer) -> None:
    messages_server.enqueue(text_reply("General Kenobi."))
    msg = _create(messages_server.client(max_retries=0), system="be brief")

    assert msg.content[0].type == "text" and msg.content[0].text == "General Kenobi."
    assert msg.model == MODEL and msg.role == "assistant" and msg.stop_reason == "end_turn"
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    assert msg.id.startswith("msg_")
    assert messages_server.pending() == 0


def test_explicit_usage_and_model() -> None:
    with MessagesServer() as server:
        server.enqueue(text_reply("x", input_tokens=1234, output_tokens=56, model="other-model"))
        msg = _create(server.client(max_retries=0))
    assert (msg.usage.input_tokens, msg.usage.output_tokens, msg.model) == (1234, 56, "other-model")


def test_tool_use_reply_single_and_parallel(messages_server: MessagesServer) -> None:
    messages_server.enqueue(
        tool_use_reply("record_summary", {"summary": "s", "confidence": 0.9}, tool_id="toolu_1"),
        tool_use_reply("get", {"k": "a"}, text="Looking up.", more=[("get", {"k": "b"})]),
    )
    client = messages_server.client(max_retries=0)
    tools = [{"name": "record_summary", "description": "d", "input_schema": {"type": "object"}}]
    one = _create(client, tools=tools, tool_choice={"type": "tool", "name": "record_summary"})
    assert one.stop_reason == "tool_use"
    block = one.content[0]
    assert block.type == "tool_use" and block.id == "toolu_1"
    assert block.input == {"summary": "s", "confidence": 0.9}

    two = _create(client)
    assert [b.type for b in two.content] == ["text", "tool_use", "tool_use"]
    ids = [b.id for b in two.content if b.type == "tool_use"]
    assert len(set(ids)) == 2
    # the tools were sent as given
    assert messages_server.message_requests[0].body["tools"] == tools


def test_rate_limit_is_retried_then_succeeds(
    messages_server: MessagesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake's retry-after header is what the SDK waits (its own backoff would be about
    0.5 s with jitter): the wait it asks for is recorded, then taken."""
    import anthropic._base_client as base_client

    waits: list[float] = []
    sleep, main = time.sleep, threading.get_ident()

    def recorded(seconds: float) -> None:
        if threading.get_ident() == main:  # the SDK's call, not a server or pool thread's
            waits.append(seconds)
        sleep(seconds)

    monkeypatch.setattr(base_client.time, "sleep", recorded)
    messages_server.enqueue(rate_limit_error(retry_after=0.05), text_reply("ok"))
    msg = _create(messages_server.client(max_retries=2))
    assert msg.content[0].text == "ok"
    reqs = messages_server.message_requests
    assert len(reqs) == 2
    assert [r.headers["x-stainless-retry-count"] for r in reqs] == ["0", "1"]
    assert waits == [pytest.approx(0.05)]


def test_rate_limit_error_shape(messages_server: MessagesServer) -> None:
    messages_server.enqueue(rate_limit_error(retry_after=7))
    with pytest.raises(anthropic.RateLimitError) as info:
        _create(messages_server.client(max_retries=0))
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "7"
    assert info.value.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Rate limited"},
    }


def test_overloaded_529(messages_server: MessagesServer) -> None:
    messages_server.enqueue(overloaded_error())
    with pytest.raises(anthropic.OverloadedError) as info:
        _create(messages_server.client(max_retries=0))
    assert info.value.status_code == 529
    assert len(messages_server.message_requests) == 1


def test_500_is_retried(messages_server: MessagesServer) -> None:
    messages_server.enqueue(server_error(), text_reply("recovered"))
    msg = _create(messages_server.client(max_retries=1))
    assert msg.content[0].text == "recovered"
    assert len(messages_server.message_requests) == 2


def test_timeout_raises_api_timeout_error(messages_server: MessagesServer) -> None:
    """The reply comes after 30 s: a client that did not time out at 0.2 s would wait and
    return it ("too late"), not raise."""
    messages_server.enqueue(text_reply("too late").delayed(30))
    with pytest.raises(anthropic.APITimeoutError):
        _create(messages_server.client(max_retries=0, timeout=0.2))
    assert len(messages_server.message_requests) == 1


def test_invalid_body_is_not_a_message(messages_server: MessagesServer) -> None:
    messages_server.enqueue(
        raw_reply("{not json"),
        raw_reply('{"unexpected": true}'),
        raw_reply("<html>bad gateway</html>", status=502, content_type="text/html"),
    )
    client = messages_server.client(max_retries=0)
    with pytest.raises(ValueError, match="Expecting"):  # the SDK lets JSONDecodeError through
        _create(client)
    with pytest.raises(anthropic.APIResponseValidationError):
        _create(messages_server.client(max_retries=0, _strict_response_validation=True))
    with pytest.raises(anthropic.InternalServerError):
        _create(client)


def test_handler_and_queue_order(messages_server: MessagesServer) -> None:
    seen: list[dict[str, Any]] = []

    def handler(body: dict[str, Any]) -> str:
        seen.append(body)
        return f"echo: {body['messages'][-1]['content']}"

    messages_server.set_handler(handler)
    messages_server.enqueue(json_reply({"first": True}))
    client = messages_server.client(max_retries=0)
    assert _create(client).content[0].text == '{"first": true}'  # queue first
    assert _create(client, messages=[{"role": "user", "content": "ping"}]).content[0].text == (
        "echo: ping"
    )
    assert len(seen) == 1 and seen[0]["model"] == MODEL


def test_unscripted_call_fails_loudly_without_retry(messages_server: MessagesServer) -> None:
    with pytest.raises(anthropic.InternalServerError, match="no scripted reply"):
        _create(messages_server.client(max_retries=3))
    assert len(messages_server.message_requests) == 1


def test_rejects_what_the_api_rejects(messages_server: MessagesServer) -> None:
    messages_server.enqueue(text_reply("never served"))
    orphan = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
        },
        {"role": "user", "content": "no result"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="tool_use"):
        _create(messages_server.client(max_retries=0), messages=orphan)
    assert messages_server.pending() == 1  # a rejected request consumes no script


def test_records_requests(messages_server: MessagesServer) -> None:
    messages_server.enqueue(text_reply("a"), error_reply(400, "invalid_request_error", "nope"))
    client = messages_server.client(max_retries=0, default_headers={"x-test": "1"})
    _create(client, system="sys", metadata={"user_id": "u-1"})
    with pytest.raises(anthropic.BadRequestError):
        _create(client)
    reqs = messages_server.requests
    assert len(reqs) == 2
    first = reqs[0]
    assert first.method == "POST" and first.path == "/v1/messages"
    assert first.body["system"] == "sys" and first.body["messages"] == USER
    # this SDK sends the key as a bearer token; older ones used x-api-key
    auth = first.headers.get("authorization", "") + first.headers.get("x-api-key", "")
    assert "sk-ant-fake-key" in auth
    assert first.headers["anthropic-version"]
    assert first.headers["x-test"] == "1"
    messages_server.reset()
    assert messages_server.requests == []


def test_count_tokens_default_and_scripted(messages_server: MessagesServer) -> None:
    client = messages_server.client(max_retries=0)
    short = client.messages.count_tokens(model=MODEL, messages=USER).input_tokens
    longer = client.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "word " * 400}]
    ).input_tokens
    assert 0 < short < longer
    messages_server.enqueue(count_tokens_reply(4242), path=COUNT_TOKENS_PATH)
    assert client.messages.count_tokens(model=MODEL, messages=USER).input_tokens == 4242
    assert len(messages_server.requests_to(COUNT_TOKENS_PATH)) == 3
    assert messages_server.message_requests == []
