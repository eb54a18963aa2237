"""Short-term compaction, session 27: the summariser reads at most
``summarizer_input_tokens`` a call, however long the summary so far is.

Before, chunks were cut at three quarters of the bound whatever the summary so far cost,
so a summariser whose summaries ran past a quarter of the bound read more than the bound.
Every input is counted here with the counter compaction's chunking uses (the estimate).
A unit no call can hold (a message, or an assistant message and the user message
answering it, larger than the bound by itself) is read shortened since the second fix of
this session (tests/unit/test_compaction_edges_session27.py)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlife.online.compaction import (
    SUMMARY_HEADER,
    Conversation,
    EstimateTokenCounter,
    Message,
    compact,
    validate_history,
)
from tests.support.messages import A, U

EST = EstimateTokenCounter()


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _long(tokens: int) -> str:
    """A summary whose "summary so far" message costs ``tokens`` estimated tokens."""
    return "s" * (4 * (tokens - 4) - len(SUMMARY_HEADER) - 1)


def _is_so_far(message: Mapping[str, Any]) -> bool:
    content = message["content"]
    return (
        message["role"] == "user"
        and isinstance(content, list)
        and len(content) == 1
        and content[0].get("type") == "text"
        and content[0]["text"].startswith(SUMMARY_HEADER + "\n")
    )


class Recorder:
    """A custom summariser: records every input and its estimated size, and answers with
    ``reply(input)``."""

    def __init__(self, reply: Callable[[list[Message]], str], max_tokens: int = 50) -> None:
        self.reply = reply
        self.max_tokens = max_tokens
        self.calls: list[list[Message]] = []
        self.sizes: list[int] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        call = copy.deepcopy([dict(m) for m in messages])
        self.calls.append(call)
        self.sizes.append(EST.count(call))
        return self.reply(call)

    def read(self) -> list[Message]:
        """The head's messages as read (the summaries so far left out), in order."""
        return [m for call in self.calls for m in call if not _is_so_far(m)]


def _check_call(call: list[Message], bound: int, oversize_allowed: bool = False) -> None:
    """In bound; or (where allowed) one unit larger than the bound by itself, after a
    summary so far that is itself in bound."""
    assert validate_history(call) == [], validate_history(call)
    if EST.count(call) <= bound:
        return
    assert oversize_allowed, f"a call read {EST.count(call)} > {bound} estimated tokens"
    earlier = call[:1] if _is_so_far(call[0]) else []
    chunk = call[len(earlier) :]
    assert len(chunk) == 1 or (len(chunk) == 2 and chunk[0]["role"] == "assistant")
    assert EST.count(chunk) > bound and EST.count(earlier) <= bound


def _turns(n: int, chars: int) -> list[Message]:
    return [m for t in range(n) for m in (U(f"q{t} " + "q" * chars), A(f"a{t} " + "a" * chars))]


# ---- examples -----------------------------------------------------------------------------


def test_a_summary_longer_than_a_quarter_of_the_bound_shrinks_the_next_chunk() -> None:
    """The summary so far costs 40% of the bound: chunks of three quarters overran it by
    15%. Each chunk now takes what the summary leaves."""
    msgs = _turns(20, 800)  # 205 tokens a message; a unit (answer and question) 410
    summarizer = Recorder(lambda call: _long(800))
    result = compact(
        msgs, budget_tokens=3000, keep_last_turns=1, summarizer=summarizer,
        summarizer_input_tokens=2000, summary_allowance=900,
    )  # fmt: skip
    assert result.compacted and result.summarizer_calls == len(summarizer.calls) > 2
    assert max(summarizer.sizes) <= 2000, summarizer.sizes
    for call in summarizer.calls:
        _check_call(call, 2000)
    assert summarizer.read() == msgs[: result.summarized_messages]


def test_a_summary_that_leaves_no_room_is_condensed_before_the_next_chunk() -> None:
    """The summary so far (510) and the next unit (600) overrun the bound (1000) though
    each fits: the summary so far is condensed first, in a call that reads only it."""
    msgs = _turns(6, 1180)  # 300 tokens a message

    def reply(call: list[Message]) -> str:
        return "condensed" if len(call) == 1 and _is_so_far(call[0]) else _long(510)

    summarizer = Recorder(reply)
    result = compact(
        msgs, budget_tokens=1400, keep_last_turns=1, summarizer=summarizer,
        summarizer_input_tokens=1000, summary_allowance=600,
    )  # fmt: skip
    assert result.compacted, result.error
    assert max(summarizer.sizes) <= 1000, summarizer.sizes
    condensing = [c for c in summarizer.calls if len(c) == 1 and _is_so_far(c[0])]
    assert condensing and result.summarizer_calls == len(summarizer.calls)
    assert summarizer.read() == msgs[: result.summarized_messages]
    assert result.summary == _long(510)


def test_a_summary_that_stays_too_long_stops_compaction_unchanged() -> None:
    """A summariser whose summaries (condensed too) leave no room for the next messages:
    compaction stops, changes nothing and says why; no call overran the bound."""
    msgs = _turns(6, 1180)
    conv = Conversation(msgs)
    summarizer = Recorder(lambda call: _long(510))
    result = compact(
        conv, budget_tokens=1400, keep_last_turns=1, summarizer=summarizer,
        summarizer_input_tokens=1000, summary_allowance=600,
    )  # fmt: skip
    assert not result.compacted and result.reason == "summarizer_failed"
    assert result.conversation is conv and conv.messages == _turns(6, 1180)
    assert result.error and "summarizer_input_tokens=1000" in result.error
    assert "no room" in result.error
    assert max(summarizer.sizes) <= 1000, summarizer.sizes
    # the second call condensed the summary so far; no third call overran the bound
    assert [len(c) for c in summarizer.calls] == [1, 1]


def test_a_summary_longer_than_the_bound_is_never_read() -> None:
    """A summary longer than the bound itself cannot open any later call: compaction
    stops after the call that wrote it."""
    msgs = _turns(6, 1180)
    summarizer = Recorder(lambda call: _long(1500))
    result = compact(
        msgs, budget_tokens=1400, keep_last_turns=1, summarizer=summarizer,
        summarizer_input_tokens=1000, summary_allowance=600,
    )  # fmt: skip
    assert not result.compacted and result.reason == "summarizer_failed"
    assert result.error and "summarizer_input_tokens=1000" in result.error
    assert len(summarizer.calls) == 1 and max(summarizer.sizes) <= 1000


def test_an_oversize_tool_pair_is_shortened_for_the_summariser() -> None:
    """A tool call and its result larger than the bound cannot be split: the summariser
    reads a shortened copy of that unit (head and tail, the cut stated), in bound like
    every other call; the history kept is never altered."""
    big = [
        U("look it up"),
        A([{"type": "tool_use", "id": "big", "name": "f", "input": {}}]),
        U([{"type": "tool_result", "tool_use_id": "big", "content": "r" * 6000}]),
        A("found"),
    ]
    msgs = [*_turns(3, 680), *big, *_turns(4, 680)]  # 175 tokens a message
    summarizer = Recorder(lambda call: _long(400))
    result = compact(
        msgs, budget_tokens=1200, keep_last_turns=1, summarizer=summarizer,
        summarizer_input_tokens=1000, summary_allowance=500,
    )  # fmt: skip
    assert result.compacted, result.error
    assert max(summarizer.sizes) <= 1000, summarizer.sizes
    for call in summarizer.calls:
        _check_call(call, 1000)
    read = summarizer.read()
    i = read.index(big[1])
    (answer,) = read[i + 1]["content"]
    assert answer["tool_use_id"] == "big" and "characters left out" in answer["content"]
    assert len(answer["content"]) < 6000
    head = msgs[: result.summarized_messages]
    assert read[:i] + read[i + 2 :] == [m for m in head if m not in big[1:3]]


def test_tool_rounds_are_read_in_bound_after_a_long_summary() -> None:
    """Round mode (one agent-loop turn): each later chunk opens with the summary so far and
    then a tool call, and with a summary of 40% of the bound still fits it."""
    msgs: list[Message] = [U("file the claim")]
    for r in range(30):
        msgs += [
            A([{"type": "tool_use", "id": f"t{r}", "name": "f", "input": {}}]),
            U([{"type": "tool_result", "tool_use_id": f"t{r}", "content": "r" * 2000}]),
        ]
    msgs.append(A("filed"))
    summarizer = Recorder(lambda call: _long(1200))
    result = compact(
        msgs, budget_tokens=3000, keep_last_turns=2, summarizer=summarizer,
        summarizer_input_tokens=3000, summary_allowance=1300,
    )  # fmt: skip
    assert result.compacted and result.summarized_rounds > 0, result.error
    assert max(summarizer.sizes) <= 3000, summarizer.sizes
    for call in summarizer.calls[1:]:
        assert _is_so_far(call[0]) and call[1]["role"] == "assistant"
    assert summarizer.read() == msgs[: result.summarized_messages + 1]


# ---- the property -------------------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Valid histories of text turns and tool loops (parallel calls too), messages from a
    few to ~1,500 estimated tokens; the last turn may end on a pending call."""
    ids = itertools.count()
    size = st.integers(1, 6000)
    n_turns = draw(st.integers(1, 6))
    msgs: list[Message] = []
    for t in range(n_turns):
        last = t == n_turns - 1
        msgs.append(U([_text(f"ask {t} " + "q" * draw(size))]))
        rounds = draw(st.integers(0, 6))
        pending = False
        for r in range(rounds):
            use_ids = [f"toolu_{next(ids)}" for _ in range(draw(st.integers(1, 3)))]
            blocks: list[dict[str, Any]] = []
            if draw(st.booleans()):
                blocks.append(_text("checking " + "a" * draw(size)))
            blocks += [{"type": "tool_use", "id": u, "name": "f", "input": {}} for u in use_ids]
            msgs.append(A(blocks))
            if last and r == rounds - 1 and draw(st.booleans()):
                pending = True
                break
            msgs.append(
                U([{"type": "tool_result", "tool_use_id": u, "content": "r" * draw(size)}
                   for u in use_ids])
            )  # fmt: skip
        if not pending:
            msgs.append(A(f"answer {t} " + "y" * draw(size)))
    return msgs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(),
    budget=st.integers(0, 4000),
    keep=st.integers(1, 3),
    bound=st.integers(1, 3000),
    explicit=st.booleans(),
    data=st.data(),
)
def test_no_summariser_input_overruns_the_bound(
    history: list[Message], budget: int, keep: int, bound: int, explicit: bool, data: st.DataObject
) -> None:
    """For any valid history, budget and bound, and a summariser whose summaries run from
    a few tokens to well past the bound: every input it gets is a valid history within the
    bound, save a unit larger than the bound by itself (after a summary so far in bound);
    the result is a valid history, compacted or unchanged."""
    assert validate_history(history, allow_pending_tool_use=True) == []
    conv = Conversation(copy.deepcopy(history), [0] if explicit else None)
    long_chars = st.one_of(st.integers(1, 40), st.integers(1, 8 * bound + 200))
    summarizer = Recorder(lambda call: "s" * data.draw(long_chars, label="summary chars"))
    result = compact(
        conv, budget_tokens=budget, keep_last_turns=keep, summarizer=summarizer,
        summarizer_input_tokens=bound,
    )  # fmt: skip
    assert validate_history(result.messages, allow_pending_tool_use=True) == []
    for call in summarizer.calls:
        _check_call(call, bound, oversize_allowed=True)
    if not result.compacted:
        assert result.conversation is conv and conv.messages == history
