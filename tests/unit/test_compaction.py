"""Short-term compaction: validity of the output history, kept turns, failure paths."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlife.online.compaction import (
    SUMMARY_HEADER,
    AnthropicSummarizer,
    AnthropicTokenCounter,
    Conversation,
    EstimateTokenCounter,
    Message,
    Summarizer,
    TokenCounter,
    compact,
    derive_turn_starts,
    render_transcript,
    validate_history,
)
from tests.fakes.messages_api import (
    COUNT_TOKENS_PATH,
    MessagesServer,
    check_messages_request,
    count_tokens_reply,
    error_reply,
    overloaded_error,
    text_reply,
)


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    # Local twin of tests.fakes.messages_api's plugin fixture (see test_messages_server.py).
    with MessagesServer() as server:
        yield server


class RecordingSummarizer:
    def __init__(self, reply: str | Exception = "The user and assistant talked.") -> None:
        self.reply = reply
        self.calls: list[list[Message]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls.append([dict(m) for m in messages])
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


class ExplodingSummarizer:
    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        raise AssertionError("the summariser must not be called")


# ---- generated histories ---------------------------------------------------------------

WORDS = ["tea", "coffee", "order", "ship", "Berlin", "café", "日本", "refund", "42", "ok", "{x}"]
words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=25).map(" ".join)


@st.composite
def text_content(draw: st.DrawFn) -> str | list[dict[str, Any]]:
    if draw(st.booleans()):
        return draw(words)
    return [{"type": "text", "text": t} for t in draw(st.lists(words, min_size=1, max_size=2))]


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Valid histories: text turns, single and parallel tool calls, mixed result messages.

    The last turn may end on an assistant text, on a user message awaiting the model, or
    on a pending tool call (the agent has not run the tools yet).
    """
    ids = itertools.count()
    n_turns = draw(st.integers(1, 7))
    msgs: list[Message] = []
    for t in range(n_turns):
        last = t == n_turns - 1
        ending = draw(st.sampled_from(["text", "user", "pending"])) if last else "text"
        msgs.append({"role": "user", "content": draw(text_content())})
        steps = draw(st.integers(0, 3))
        pending = False
        for s in range(steps):
            use_ids = [f"toolu_{next(ids):03d}" for _ in range(draw(st.integers(1, 3)))]
            blocks: list[dict[str, Any]] = []
            if draw(st.booleans()):
                blocks.append({"type": "text", "text": draw(words)})
            blocks += [
                {"type": "tool_use", "id": u, "name": "lookup", "input": {"q": draw(words)}}
                for u in use_ids
            ]
            msgs.append({"role": "assistant", "content": blocks})
            if last and s == steps - 1 and ending == "pending":
                pending = True
                break
            results: list[dict[str, Any]] = []
            for u in draw(st.permutations(use_ids)):
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": u}
                if draw(st.booleans()):
                    result["content"] = draw(words)
                else:
                    result["content"] = [{"type": "text", "text": draw(words)}]
                if draw(st.integers(0, 4)) == 0:
                    result["is_error"] = True
                results.append(result)
            if draw(st.integers(0, 3)) == 0:  # results followed by user text, same message
                results.append({"type": "text", "text": draw(words)})
            msgs.append({"role": "user", "content": results})
        if not pending and (not last or ending == "text"):
            msgs.append({"role": "assistant", "content": draw(text_content())})
    return msgs


def _as_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _dump(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)  # key order preserved: byte equality


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(),
    budget=st.integers(0, 400),
    keep=st.integers(1, 4),
    explicit=st.one_of(st.none(), st.lists(st.integers(0, 60), max_size=8)),
)
def test_compaction_yields_valid_history_and_keeps_last_turns(
    history: list[Message], budget: int, keep: int, explicit: list[int] | None
) -> None:
    assert validate_history(history, allow_pending_tool_use=True) == []
    if explicit is not None:  # explicit boundaries: any start that holds no tool_result
        safe = [i for i in explicit if i < len(history) and "tool_result" not in _dump(history[i])]
        conv = Conversation(copy.deepcopy(history), sorted({0, *safe}))
    else:
        conv = Conversation(copy.deepcopy(history))
    original = copy.deepcopy(conv.messages)
    counter = EstimateTokenCounter()
    summarizer = RecordingSummarizer("Earlier: the user asked about tea.")

    result = compact(
        conv, budget_tokens=budget, keep_last_turns=keep, summarizer=summarizer, counter=counter
    )

    # the input is never mutated
    assert _dump(conv.messages) == _dump(original)
    # always a history the API accepts, by our validator and by the fake server's
    assert validate_history(result.messages, allow_pending_tool_use=True) == []
    body = {"model": "m", "max_tokens": 1, "messages": result.messages}
    assert check_messages_request(body, require_max_tokens=True) is None

    starts = conv.starts()
    before = counter.count(original)
    task = starts[-1] if starts else 0
    ends = [*starts[1:], len(original)]
    any_rounds = any(  # a turn with more tool rounds than kept
        sum(
            1 for i in range(s + 2, e)
            if original[s]["role"] == "user" and original[i]["role"] == "assistant"
            and "tool_result" in _dump(original[i - 1])
        ) >= keep
        for s, e in zip(starts, ends, strict=True)
    )  # fmt: skip
    if before <= budget:
        assert result.reason == "under_budget" and summarizer.calls == []
    elif len(starts) <= keep and not any_rounds:
        assert result.reason == "too_few_turns" and summarizer.calls == []
    else:
        assert result.reason in ("compacted", "over_budget", "no_gain")
        assert 1 <= len(summarizer.calls) <= 3
    if not result.compacted:
        assert _dump(result.messages) == _dump(original)
        return
    after = result.tokens_after
    assert after is not None and after < before
    if result.reason == "compacted":
        assert after <= budget
    else:  # still over budget: kept only for a real gain (a quarter of the excess)
        assert (before - after) * 4 >= before - budget
    turns = result.summarized_turns
    assert turns <= max(len(starts) - keep, 0)
    allowance = min(1024, budget // 8)
    if turns and result.summarized_rounds == 0:
        cut = starts[turns]
        assert result.summarized_messages == cut
        assert _dump(summarizer.calls[-1]) == _dump(original[:cut])  # the cut taken
        if len(summarizer.calls) == 1 and turns > 1:  # nothing the budget allows is lost
            assert counter.count(original[starts[turns - 1] :]) + allowance > budget
        first = result.messages[0]
        assert first["role"] == "user"
        if original[cut]["role"] == "user":  # summary merged in front of the first kept message
            assert first["content"][0]["text"].startswith(SUMMARY_HEADER + "\n")
            assert _dump(first["content"][1:]) == _dump(_as_blocks(original[cut]["content"]))
            assert _dump(result.messages[1:]) == _dump(original[cut + 1 :])
        else:  # an explicit turn starting at an assistant message: summary is its own message
            assert first["content"].startswith(SUMMARY_HEADER + "\n")
            assert _dump(result.messages[1:]) == _dump(original[cut:])
        assert result.summary == "Earlier: the user asked about tea."
        # at least the last keep turns are still the last turns of the new conversation
        assert len(result.conversation.turns()) >= keep
        own = 0 if original[cut]["role"] == "user" else 1  # the summary as its own turn
        assert _dump(result.conversation.turns()[1:]) == _dump(conv.turns()[turns + 1 - own :])
    if result.summarized_rounds:  # the newest messages are kept byte-equal
        assert _dump(result.messages[-1]) == _dump(original[-1])
        assert task >= 0


# ---- hand-written cases ----------------------------------------------------------------


def _tool_history() -> list[Message]:
    """Two turns; the second has parallel tool calls, then a text turn."""
    return [
        {"role": "user", "content": "Where is my order 1234? " * 20},
        {"role": "assistant", "content": "Let me check. " * 20},
        {"role": "user", "content": [{"type": "text", "text": "Also the refund please. " * 20}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "toolu_a", "name": "order", "input": {"id": 1234}},
                {"type": "tool_use", "id": "toolu_b", "name": "refund", "input": {"id": 1234}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "refund sent"},
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "in Berlin"},
            ],
        },
        {"role": "assistant", "content": "Your order is in Berlin; the refund was sent."},
        {"role": "user", "content": "Thanks!"},
        {"role": "assistant", "content": "You're welcome."},
    ]


def test_an_agent_loop_of_one_turn_is_compacted_between_rounds() -> None:
    """Adversarial review: one request, then 50 tool rounds (an agent loop) is one turn;
    compaction never cut it, 10x over budget ("too_few_turns"). The older rounds are
    summarised now: the request stays verbatim (the summary as its last block), the last
    rounds are kept byte-equal, and no tool_use is parted from its result."""
    history: list[Message] = [{"role": "user", "content": "Audit every file in the repo."}]
    for i in range(50):
        history.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Reading f{i}."},
            {"type": "tool_use", "id": f"t{i}", "name": "read", "input": {"path": f"f{i}.py"}},
        ]})  # fmt: skip
        history.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": "y" * 4000},
        ]})  # fmt: skip
    history.append(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t-open", "name": "read", "input": {"path": "g.py"}},
            ],
        }
    )  # fmt: skip  (a pending call: the API answers it next)
    summarizer = RecordingSummarizer("Read f0 to f48; nothing notable.")
    result = compact(history, budget_tokens=5_000, keep_last_turns=2, summarizer=summarizer)
    assert result.compacted and result.reason == "compacted", result
    assert validate_history(result.messages, allow_pending_tool_use=True) == []
    assert result.messages[0]["content"][0] == {"type": "text", "text": history[0]["content"]}
    assert result.messages[0]["content"][-1]["text"].startswith(SUMMARY_HEADER)
    # the last rounds that fit beside a summary allowance (5000 // 8) are kept, the open
    # call with them: 4 here (keep_last_turns=2 is the least kept, not the exact number)
    kept = 2 * 4 + 1
    assert _dump(result.messages[1:]) == _dump(history[-kept:])
    assert EstimateTokenCounter().count([history[0], *history[-kept - 2 :]]) + 625 > 5_000
    assert result.summarized_rounds == 46 and result.summarized_messages == 92
    assert _dump(summarizer.calls[0]) == _dump(history[:-kept])
    assert not result.over_budget
    again = compact(result.messages, budget_tokens=5_000, keep_last_turns=2, summarizer=summarizer)
    assert again.reason == "under_budget"
    # the loop goes on and is compacted again: one summary in the request, not one a pass
    longer = copy.deepcopy(result.messages[:-1])  # the open call answered below
    for i in range(50, 80):
        longer.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{i}", "name": "read", "input": {"path": f"f{i}.py"}},
        ]})  # fmt: skip
        longer.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": "y" * 4000},
        ]})  # fmt: skip
    second = compact(longer, budget_tokens=5_000, keep_last_turns=2, summarizer=summarizer)
    assert second.compacted and validate_history(second.messages) == []
    request = second.messages[0]["content"]
    assert [b["text"][: len(SUMMARY_HEADER)] for b in request[1:]] == [SUMMARY_HEADER]
    assert request[0] == {"type": "text", "text": history[0]["content"]}
    one_round = compact(history[:3], budget_tokens=10, keep_last_turns=2, summarizer=summarizer)
    assert one_round.reason == "too_few_turns"  # nothing older than the kept rounds


def test_turns_never_split_parallel_tool_calls() -> None:
    conv = Conversation(_tool_history())
    assert conv.starts() == derive_turn_starts(conv.messages) == [0, 2, 6]
    summarizer = RecordingSummarizer("Order 1234 was discussed.")
    result = compact(conv, budget_tokens=10, keep_last_turns=2, summarizer=summarizer)
    assert result.compacted and result.summarized_turns == 1
    assert summarizer.calls == [_tool_history()[:2]]
    assert result.messages[1:4] == _tool_history()[3:6]  # the parallel pair travels together
    assert validate_history(result.messages) == []


def test_budget_not_exceeded_means_no_call() -> None:
    history = _tool_history()
    result = compact(
        history, budget_tokens=100_000, keep_last_turns=1, summarizer=ExplodingSummarizer()
    )
    assert not result.compacted and result.reason == "under_budget" and result.error is None
    assert result.messages == history and not result.over_budget


@pytest.mark.parametrize(
    "summarizer",
    [
        RecordingSummarizer(RuntimeError("model exploded")),
        RecordingSummarizer(""),
        RecordingSummarizer("   \n"),
    ],
    ids=["raises", "empty", "whitespace"],
)
def test_summarizer_failure_leaves_history_unchanged(summarizer: Summarizer) -> None:
    conv = Conversation(_tool_history())
    result = compact(conv, budget_tokens=10, keep_last_turns=1, summarizer=summarizer)
    assert not result.compacted and result.reason == "summarizer_failed"
    assert result.error and "summar" in result.error
    assert result.conversation is conv and result.messages == _tool_history()
    assert SUMMARY_HEADER not in json.dumps(result.messages)
    assert "model exploded" not in json.dumps(result.messages)


def test_the_default_summariser_without_a_key_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """README's `compact(messages, budget_tokens=...)` with no key (session 28 review): the
    SDK's TypeError about auth headers was the error; now it names what to set."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    result = compact(_tool_history(), budget_tokens=10, keep_last_turns=1)
    assert result.reason == "summarizer_failed" and result.messages == _tool_history()
    assert result.error and "ANTHROPIC_API_KEY" in result.error and "summarizer=" in result.error
    from memlife import AnthropicSummarizer as Exported
    from memlife import InputError as ExportedError
    from memlife import Summarizer as ExportedProtocol
    from memlife.errors import InputError

    assert Exported is AnthropicSummarizer and ExportedError is InputError
    assert isinstance(RecordingSummarizer("ok"), ExportedProtocol)


def test_counter_failure_and_invalid_input_are_reported() -> None:
    class Broken:
        def count(self, messages: Sequence[Mapping[str, Any]]) -> int:
            raise OSError("no network")

    result = compact(
        _tool_history(), budget_tokens=10, counter=Broken(), summarizer=ExplodingSummarizer()
    )
    assert (result.reason, result.compacted) == ("counter_failed", False)
    assert result.error and "no network" in result.error

    bad = _tool_history()
    del bad[4]  # tool calls left unanswered
    result = compact(bad, budget_tokens=10, summarizer=ExplodingSummarizer())
    assert result.reason == "invalid_input" and result.problems and result.messages == bad


def test_no_gain_keeps_history() -> None:
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "x " * 200},
    ]
    result = compact(
        history, budget_tokens=1, keep_last_turns=1, summarizer=RecordingSummarizer("y " * 500)
    )
    assert result.reason == "no_gain" and not result.compacted and result.messages == history


def test_explicit_turn_starts() -> None:
    history = _tool_history()
    with pytest.raises(ValueError, match="tool_result"):
        Conversation(history, [0, 4])
    with pytest.raises(ValueError, match="begin with 0"):
        Conversation(history, [2])
    # one explicit turn spanning messages 0-5, a second from the assistant message 7
    conv = Conversation(history, [0, 7])
    result = compact(conv, budget_tokens=10, keep_last_turns=1, summarizer=RecordingSummarizer())
    assert result.compacted
    assert result.messages[0]["role"] == "user" and result.messages[1:] == history[7:]
    assert result.conversation.turn_starts == [0, 1]
    with pytest.raises(ValueError):
        compact(conv, budget_tokens=10, keep_last_turns=0, summarizer=RecordingSummarizer())


def test_validate_history_catches_each_problem() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    res = {"type": "tool_result", "tool_use_id": "t1", "content": "r"}
    cases: dict[str, list[Message]] = {
        "empty": [],
        "first message": [{"role": "assistant", "content": "a"}],
        "alternate": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        "content is empty": [{"role": "user", "content": ""}],
        "never answered": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [use]},
        ],
        "not answered": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": "b"},
        ],
        "answers no tool_use": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": [res]},
        ],
        "must come first": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [{"type": "text", "text": "x"}, res]},
        ],
        "role must be": [{"role": "system", "content": "a"}],
    }
    for needle, messages in cases.items():
        problems = validate_history(messages)
        assert any(needle in p for p in problems), (needle, problems)
    pending = [{"role": "user", "content": "a"}, {"role": "assistant", "content": [use]}]
    assert validate_history(pending, allow_pending_tool_use=True) == []


def test_estimate_counter_is_documented_formula() -> None:
    counter = EstimateTokenCounter()
    assert counter.count([{"role": "user", "content": "abcd" * 10}]) == 4 + 10
    assert counter.count([{"role": "user", "content": "abcde"}]) == 4 + 2
    assert EstimateTokenCounter(system="x" * 8).count([]) == 2
    assert isinstance(counter, TokenCounter)


def test_transcript_renders_tools() -> None:
    text = render_transcript(_tool_history())
    assert "Assistant called tool order [toolu_a]" in text
    assert "Tool result [toolu_b]: refund sent" in text


# ---- against the fake Messages API with the real SDK -------------------------------------


def test_anthropic_summarizer_via_sdk(messages_server: MessagesServer) -> None:
    messages_server.enqueue(text_reply("  Order 1234 is in Berlin; refund sent.  "))
    summarizer = AnthropicSummarizer(
        messages_server.client(max_retries=0), model="claude-test", max_tokens=300, timeout=5
    )
    result = compact(_tool_history(), budget_tokens=10, keep_last_turns=1, summarizer=summarizer)
    assert result.compacted, result.error
    assert result.messages[0]["content"][0]["text"].startswith(
        f"{SUMMARY_HEADER}\nOrder 1234 is in Berlin; refund sent.\n[memlife summary "
    )  # then the marker line (session 26)
    (request,) = messages_server.message_requests
    assert request.body["model"] == "claude-test" and request.body["max_tokens"] == 300
    prompt = request.body["messages"][0]["content"]
    assert "Assistant called tool refund [toolu_b]" in prompt and "Thanks!" not in prompt


@pytest.mark.parametrize(
    "reply",
    [
        overloaded_error(),
        error_reply(400, "invalid_request_error", "prompt is too long"),
        text_reply("cut off mid sen", stop_reason="max_tokens"),
        text_reply(""),
        text_reply("too late").delayed(2),
    ],
    ids=["529", "400", "truncated", "empty", "timeout"],
)
def test_anthropic_summarizer_failures_leave_history(
    messages_server: MessagesServer, reply: Any
) -> None:
    messages_server.enqueue(reply)
    summarizer = AnthropicSummarizer(messages_server.client(max_retries=0), timeout=0.3)
    result = compact(_tool_history(), budget_tokens=10, keep_last_turns=1, summarizer=summarizer)
    assert result.reason == "summarizer_failed" and result.error
    assert result.messages == _tool_history()
    assert len(messages_server.message_requests) == 1


def test_under_budget_makes_no_request(messages_server: MessagesServer) -> None:
    summarizer = AnthropicSummarizer(messages_server.client(max_retries=0))
    result = compact(_tool_history(), budget_tokens=10**6, summarizer=summarizer)
    assert result.reason == "under_budget" and messages_server.requests == []


def test_anthropic_token_counter_via_sdk(messages_server: MessagesServer) -> None:
    messages_server.enqueue(count_tokens_reply(4242), path=COUNT_TOKENS_PATH)
    tools = [{"name": "order", "description": "d", "input_schema": {"type": "object"}}]
    counter = AnthropicTokenCounter(
        messages_server.client(max_retries=0), model="claude-test", system="sys", tools=tools
    )
    assert counter.count(_tool_history()) == 4242 and not counter.last_estimated
    (request,) = messages_server.requests_to(COUNT_TOKENS_PATH)
    assert request.body["messages"] == _tool_history()
    assert request.body["system"] == "sys" and request.body["tools"] == tools
    # default server answer: a deterministic count that grows with the history
    assert counter.count(_tool_history()[:2]) < counter.count(_tool_history())


def test_anthropic_token_counter_falls_back(messages_server: MessagesServer) -> None:
    messages_server.enqueue(error_reply(404, "not_found_error", "no"), path=COUNT_TOKENS_PATH)
    counter = AnthropicTokenCounter(messages_server.client(max_retries=0))
    assert counter.count(_tool_history()) == EstimateTokenCounter().count(_tool_history())
    assert counter.last_estimated and counter.last_error and "NotFound" in counter.last_error

    messages_server.enqueue(error_reply(404, "not_found_error", "no"), path=COUNT_TOKENS_PATH)
    strict = AnthropicTokenCounter(messages_server.client(max_retries=0), fallback=None)
    with pytest.raises(anthropic.NotFoundError):
        strict.count(_tool_history())


def test_compaction_with_sdk_counter_and_summarizer(messages_server: MessagesServer) -> None:
    client = messages_server.client(max_retries=0)
    messages_server.enqueue(
        count_tokens_reply(5000), count_tokens_reply(900), path=COUNT_TOKENS_PATH
    )
    messages_server.enqueue(text_reply("Order 1234 discussed."))
    result = compact(
        _tool_history(),
        budget_tokens=1000,
        keep_last_turns=2,
        summarizer=AnthropicSummarizer(client),
        counter=AnthropicTokenCounter(client, fallback=None),
    )
    assert result.compacted and (result.tokens_before, result.tokens_after) == (5000, 900)
    assert not result.over_budget
    assert [r.path for r in messages_server.requests] == [
        COUNT_TOKENS_PATH,
        "/v1/messages",
        COUNT_TOKENS_PATH,
    ]


def test_a_budget_that_is_not_a_token_count_is_a_clear_error() -> None:
    """Adversarial review: None or "100" raised a bare TypeError, NaN compacted and then
    reported itself under budget, a negative budget compacted on every call."""
    from memlife.errors import InputError

    history = [{"role": "user", "content": "hello"}]
    for bad in (None, "100", float("nan"), 12.5, -5, True):
        with pytest.raises(InputError, match="budget_tokens must be a whole number"):
            compact(history, budget_tokens=bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="keep_last_turns"):
        compact(history, budget_tokens=10, keep_last_turns=1.5)  # type: ignore[arg-type]


def test_histories_the_api_rejects_are_named_by_validate_history() -> None:
    """Adversarial review: blank text blocks passed, and tool ids were compared as str(),
    so a tool_use with id None was "answered" by a tool_result for "None" (1 by "1")."""
    blank = [{"role": "user", "content": [{"type": "text", "text": "  "}]}]
    assert any("non-blank text" in p for p in validate_history(blank))
    for use_id, result_id in ((None, "None"), (1, "1")):
        history = [
            {"role": "user", "content": "run it"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": use_id, "name": "t", "input": {}}],
            },  # fmt: skip
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": result_id, "content": "ok"}],
            },  # fmt: skip
        ]
        assert any("id must be a non-empty string" in p for p in validate_history(history))
    fine = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert validate_history(fine) == []
