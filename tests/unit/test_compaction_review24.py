"""Short-term compaction: the session 24 adversarial review (F1-F8), one test per finding."""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from memlife.errors import InputError
from memlife.online.compaction import (
    SUMMARY_HEADER,
    AnthropicSummarizer,
    Conversation,
    EstimateTokenCounter,
    Message,
    compact,
    render_transcript,
    validate_history,
)
from tests.fakes.messages_api import MessagesServer, text_reply
from tests.support.messages import A, U

COUNTER = EstimateTokenCounter()


class RecordingSummarizer:  # as in test_compaction.py
    def __init__(self, reply: str = "The user and assistant talked.") -> None:
        self.reply = reply
        self.calls: list[list[Message]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls.append([dict(m) for m in messages])
        return self.reply


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


def _turns(n: int, size: int = 400) -> list[Message]:
    return [
        m for i in range(n) for m in (U(f"turn {i}: " + "x" * size), A(f"ans {i}: " + "y" * size))
    ]


def _loop(task: str, rounds: int, size: int = 800) -> list[Message]:
    msgs = [U(task)]
    for r in range(rounds):
        msgs.append(
            A([{"type": "tool_use", "id": f"tu{r}", "name": "fetch", "input": {"page": r}}])
        )
        msgs.append(U([{"type": "tool_result", "tool_use_id": f"tu{r}", "content": "z" * size}]))
    msgs.append(A("done"))
    return msgs


def _dump(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)


# ---- F4/F5: shapes are checked before anything is counted ---------------------------------

BIG = "w" * 40_000  # 10,000 estimated tokens
USE = A([{"type": "tool_use", "id": "t1", "name": "f", "input": {}}])


def _result(content: list[Any]) -> Message:
    return U([{"type": "tool_result", "tool_use_id": "t1", "content": content}])


class _Opaque:
    def __str__(self) -> str:
        return BIG


MALFORMED = {
    "message is a str": (["hello", A("x")], r"message 0: a str; expected a mapping"),
    "message is None": ([U("hi"), None], r"message 1: a NoneType"),
    "message is a list of pairs": ([[("role", "user"), ("content", "hi")]], r"message 0: a list"),
    "content is a dict": ([U({"type": "text", "text": BIG})], r"message 0: field content: a dict"),
    "content is None": ([U(None)], r"message 0: field content: a NoneType"),
    "tool_result holds strings": (
        [U("q"), USE, _result([BIG])],
        r"message 2: block 0, content\[0\]: a str",
    ),
    "tool_result holds an object": (
        [U("q"), USE, _result([_Opaque()])],
        r"message 2: block 0, content\[0\]: a _Opaque",
    ),
    "OpenAI tool_calls": (
        [U("q"), {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "arguments": BIG}]}],
        r"message 1: field tool_calls: not a Messages API message field \(OpenAI",
    ),
    "OpenAI tool role": ([U("q"), {"role": "tool", "content": BIG}], r"message 1: field role: 'tool'"),
    "system role": ([{"role": "system", "content": "s"}, U(BIG)], r"message 0: field role: 'system'"),
    "datetime in a tool input": (
        [U("q"), A([{"type": "tool_use", "id": "t1", "name": "f", "input": {"at": datetime.datetime(2026, 1, 1)}}])],
        r"message 1: block 0, field input: not JSON-serialisable",
    ),
    "set in a tool input": (
        [U("q"), A([{"type": "tool_use", "id": "t1", "name": "f", "input": {"s": {1}}}])],
        r"message 1: block 0, field input: not JSON-serialisable",
    ),
    "text block without text": ([U([{"type": "text", "text": None}])], r"message 0: block 0, field text"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_malformed_messages_are_input_errors_naming_message_block_and_field(case: str) -> None:
    """Review F4/F5: shapes were checked only over budget and unreadable content counted as
    ~0 tokens, so a dict content or strings in a tool_result passed as "under_budget"; a
    datetime in a tool input gave "counter_failed"; a str or None message crashed with a
    bare ValueError/TypeError. Now each is an InputError naming where, under any budget."""
    messages, where = MALFORMED[case]
    with pytest.raises(InputError, match=where):
        compact(messages, budget_tokens=10**6, summarizer=RecordingSummarizer())
    with pytest.raises(InputError, match=where):
        compact(Conversation(list(messages)), budget_tokens=1, summarizer=RecordingSummarizer())
    with pytest.raises(InputError, match=where):
        COUNTER.count(messages)


# ---- F1: keep what the budget allows ------------------------------------------------------


def test_one_token_over_budget_summarises_only_what_must_go() -> None:
    """Review F1: 20 turns one token over the budget: 18 turns were summarised though 19 fit
    beside the summary. keep_last_turns is now the least kept: the cut keeps the most
    turns whose cost plus the summary allowance (budget // 8 here) fits."""
    msgs = _turns(20)
    budget = COUNTER.count(msgs) - 1
    summarizer = RecordingSummarizer("The user sent turns of x's.")
    result = compact(msgs, budget_tokens=budget, summarizer=summarizer)
    assert result.reason == "compacted" and not result.over_budget
    turns = result.summarized_turns
    assert 1 <= turns <= 3, turns  # was 18
    assert _dump(result.messages[1:]) == _dump(msgs[2 * turns + 1 :])
    allowance = budget // 8
    assert COUNTER.count(msgs[2 * (turns - 1) :]) + allowance > budget  # one more would not fit
    assert COUNTER.count(msgs[2 * turns :]) + allowance <= budget


# ---- F2: both cuts in one call; an honest report ------------------------------------------


def test_a_whole_turn_cut_falls_back_to_tool_rounds_in_the_same_call() -> None:
    """Review F2: a short turn, then 40 tool rounds: one call summarised the short turn and
    called it a success at 8533 of 8534 tokens (budget 2000); now the rounds of the kept
    turn are summarised too, in the same call."""
    msgs = [U("hi"), A("hello"), *_loop("crawl the site", 40)]
    summarizer = RecordingSummarizer("summary")
    result = compact(msgs, budget_tokens=2000, keep_last_turns=1, summarizer=summarizer)
    assert result.reason == "compacted" and not result.over_budget, result.error
    assert result.summarized_turns == 1 and result.summarized_rounds > 0
    assert result.summarizer_calls == len(summarizer.calls) == 2
    assert validate_history(result.messages) == []
    request = result.messages[0]["content"]  # the first pass's summary was folded in
    assert request[0] == {"type": "text", "text": "crawl the site"}
    assert [b["text"].startswith(SUMMARY_HEADER) for b in request] == [False, True]
    assert render_transcript(summarizer.calls[1]).startswith("Earlier summary: summary\n")
    assert _dump(result.messages[-3:]) == _dump(msgs[-3:])


def test_a_finished_tool_loop_then_a_short_question_is_compacted() -> None:
    """Review F2b: a finished 40-round loop and a one-line follow-up (default
    keep_last_turns=2) stayed 4x over budget ("too_few_turns"): rounds were looked for
    only in the last turn."""
    msgs = [*_loop("crawl the site", 40), U("thanks, and the page count?")]
    result = compact(msgs, budget_tokens=2000, summarizer=RecordingSummarizer("summary"))
    assert result.reason == "compacted" and not result.over_budget
    assert result.summarized_rounds > 0 and validate_history(result.messages) == []
    assert result.messages[-1] == msgs[-1] and result.messages[-2] == A("done")


def test_a_gain_of_a_few_tokens_that_stays_over_budget_is_no_gain() -> None:
    """Review F2: dropping a tiny turn beside a huge one counted as "compacted" while the
    history stayed far over budget. Under a quarter of the excess removed: no_gain, and
    the history unchanged. (A tiny turn of a few words: a one-word one now costs less than
    the summary block with its marker line, session 26, and is no gain at all.)"""
    msgs = [U("hi " * 10), A("hello " * 10), U("x" * 40_000), A("ok")]
    result = compact(
        msgs, budget_tokens=2000, keep_last_turns=1, summarizer=RecordingSummarizer("s")
    )
    assert (result.reason, result.compacted) == ("no_gain", False)
    assert result.messages == msgs and result.error and "over budget" in result.error


# ---- F7: only compaction's own summary block is replaced ----------------------------------


def test_text_the_user_wrote_in_summary_form_stays_in_the_request() -> None:
    """Review F7: round mode dropped any request block starting with SUMMARY_HEADER, so a
    user's pasted notes vanished from the "verbatim" request; the summariser read an earlier
    summary as the user's words."""
    notes = {
        "type": "text",
        "text": SUMMARY_HEADER + "\nMy notes: account 4417-22, deadline Friday.",
    }
    ask = {"type": "text", "text": "Use the notes above to file the claim."}
    msgs = [U([notes, ask])]
    for r in range(6):
        msgs += [A([{"type": "tool_use", "id": f"t{r}", "name": "f", "input": {}}]),
                 U([{"type": "tool_result", "tool_use_id": f"t{r}", "content": "r" * 400}])]  # fmt: skip
    msgs.append(A("filed"))
    summarizer = RecordingSummarizer("The assistant ran f.")
    result = compact(msgs, budget_tokens=200, keep_last_turns=1, summarizer=summarizer)
    assert result.compacted and result.summarized_rounds > 0
    request = result.messages[0]["content"]
    assert request[:2] == [notes, ask]
    assert request[2]["text"].startswith(f"{SUMMARY_HEADER}\nThe assistant ran f.\n")
    transcript = render_transcript(summarizer.calls[0]).splitlines()
    # the user's notes in summary form are the user's words, not an earlier summary (their
    # lines continue the user's entry, indented: audit 52b)
    assert transcript[:3] == [
        "User: ",
        f"  {SUMMARY_HEADER}",
        "  My notes: account 4417-22, deadline Friday.",
    ]
    # compaction's own appended summary is the one replaced on the next pass
    longer = [*result.messages, U([{"type": "text", "text": "and again"}])][:-1]
    for r in range(6, 12):
        longer += [A([{"type": "tool_use", "id": f"t{r}", "name": "f", "input": {}}]),
                   U([{"type": "tool_result", "tool_use_id": f"t{r}", "content": "r" * 400}])]  # fmt: skip
    longer.append(A("filed again"))
    del longer[len(result.messages) - 1]  # "filed" answered no call; the loop went on
    second = compact(longer, budget_tokens=200, keep_last_turns=1, summarizer=summarizer)
    assert second.compacted and second.messages[0]["content"][:2] == [notes, ask]
    assert len(second.messages[0]["content"]) == 3


# ---- F8: explicit turn starts are checked on every call -----------------------------------


def test_explicit_turn_starts_are_checked_again_by_compact() -> None:
    """Review F8: starts were checked only when the Conversation was built: a trimmed list
    raised IndexError, a start moved onto a tool_result was "invalid_input", and True was
    accepted as a turn start."""
    msgs = _turns(4)
    conv = Conversation(msgs, [0, 2, 4, 6])
    del msgs[5:]
    with pytest.raises(InputError, match="turn start 6 is outside the conversation"):
        compact(conv, budget_tokens=10, keep_last_turns=1, summarizer=RecordingSummarizer())
    msgs2 = _turns(4)
    conv2 = Conversation(msgs2, [0, 2, 4, 6])
    msgs2[6] = U([{"type": "tool_result", "tool_use_id": "x", "content": "r"}])
    with pytest.raises(InputError, match="turn start 6 holds a tool_result"):
        compact(conv2, budget_tokens=10, keep_last_turns=1, summarizer=RecordingSummarizer())
    for bad in ([0, True], [0.0, 2]):
        with pytest.raises(InputError, match="is not a message index"):
            Conversation([U("a"), A("b"), U("c")], bad)  # type: ignore[arg-type]


# ---- F6: block costs ------------------------------------------------------------------------


def test_block_costs_follow_what_the_model_reads() -> None:
    """Review F6: non-ASCII tool input counted as \\u escapes (6x); earlier turns' thinking
    (which the API drops) counted in full; content documents and search results were
    placeholders to the summariser; a 3 MB PDF cost a flat 1,600 tokens."""
    text = "日本語😀" * 100

    def call(value: str) -> list[Message]:
        return [U("q"), A([{"type": "tool_use", "id": "t", "name": "f", "input": {"s": value}}])]

    assert COUNTER.count(call(text)) - COUNTER.count(call("")) == 100  # as many as in a text block

    thinking = {"type": "thinking", "thinking": "t" * 8000, "signature": "S" * 2000}
    earlier = [U("q"), A([thinking, {"type": "text", "text": "a"}]), U("q2")]
    assert COUNTER.count(earlier) == COUNTER.count([U("q"), A("a"), U("q2")])
    current = [U("q"), A([thinking, {"type": "tool_use", "id": "t", "name": "f", "input": {}}])]
    assert COUNTER.count(current) >= 2000  # the current turn's thinking is in the context

    clause = "Contract clause 7: penalty EUR 48,000 if delivery after 2027-03-01. " * 200
    doc = {
        "type": "document",
        "source": {"type": "content", "content": [{"type": "text", "text": clause}]},
    }
    msgs = [U([doc, {"type": "text", "text": "remember this"}]), A("noted")]
    assert COUNTER.count(msgs) >= len(clause) // 4
    assert "penalty EUR 48,000" in render_transcript(msgs)
    found = {"type": "search_result", "source": "https://kb/x", "title": "Refund policy",
             "content": [{"type": "text", "text": "Refunds within 14 days, order 7781 approved."}]}  # fmt: skip
    assert "order 7781 approved" in render_transcript([U([found, {"type": "text", "text": "ok?"}])])

    def pdf(raw: bytes) -> list[Message]:
        data = base64.b64encode(raw).decode()
        return [
            U(
                [
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": data},
                    }
                ]
            )
        ]

    assert COUNTER.count(pdf(b"%PDF-1.7\n" + b"0" * 3_000_000)) >= 60 * 3000  # ~50 kB a page
    pages = b"%PDF-1.4\n" + b"<< /Type /Pages >>" + b"<< /Type /Page >>" * 12
    assert COUNTER.count(pdf(pages)) == 4 + 3 + 12 * 3000  # overhead, "[document]", pages


# ---- F3: the summariser's input is bounded -------------------------------------------------


def test_a_long_head_is_summarised_in_bounded_chunks(messages_server: MessagesServer) -> None:
    """Review F3: the whole head went to the summariser in one call (295k estimated tokens
    for a 200k model). Now each call reads at most summarizer_input_tokens; the summary so
    far opens the next chunk; AnthropicSummarizer scales max_tokens with what it reads."""
    msgs = _turns(60, size=10_000)
    summarizer = RecordingSummarizer("short")
    result = compact(
        msgs, budget_tokens=100_000, summarizer=summarizer, summarizer_input_tokens=20_000
    )
    assert result.compacted and result.summarizer_calls == len(summarizer.calls) > 1
    for i, call in enumerate(summarizer.calls):
        assert COUNTER.count(call) <= 20_000
        assert (render_transcript(call).startswith("Earlier summary: short\n")) == (i > 0)
    read = [
        m
        for call in summarizer.calls
        for m in call
        if not render_transcript([m]).startswith("Earlier")
    ]
    assert _dump(read) == _dump(msgs[: result.summarized_messages])

    messages_server.enqueue(text_reply("Turns summarised."))
    model = AnthropicSummarizer(messages_server.client(max_retries=0), max_tokens=300)
    assert model.summarize(msgs[:20]) == "Turns summarised."
    (request,) = messages_server.message_requests
    assert request.body["max_tokens"] == COUNTER.count(msgs[:20]) // 20 > 300
    assert model.reply_tokens(msgs) == 4096  # the limit
