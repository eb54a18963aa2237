"""Short-term compaction, session 26: only summaries memlife wrote are replaced (a user's
own block in summary form stays), and the summariser's chunks are valid histories."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlife.online.compaction import (
    SUMMARY_HEADER,
    Conversation,
    EstimateTokenCounter,
    Message,
    compact,
    render_transcript,
    validate_history,
)
from tests.fakes.messages_api import check_messages_request
from tests.support.messages import A, U

COUNTER = EstimateTokenCounter()
SO_FAR = "SO-FAR summary"


class RecordingSummarizer:
    def __init__(self, reply: str = SO_FAR, max_tokens: int = 50) -> None:
        self.reply = reply
        self.max_tokens = max_tokens
        self.calls: list[list[Message]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls.append(copy.deepcopy([dict(m) for m in messages]))
        return self.reply


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _rounds(first: int, last: int, size: int = 400) -> list[Message]:
    out: list[Message] = []
    for r in range(first, last):
        out += [
            A([{"type": "tool_use", "id": f"t{r}", "name": "f", "input": {}}]),
            U([{"type": "tool_result", "tool_use_id": f"t{r}", "content": "r" * size}]),
        ]
    return out


def _dump(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _texts(message: Mapping[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if b.get("type") == "text"]


# ---- 1. a user's own block in summary form is never taken for memlife's summary -----------

ASK = _text("File the claim using my notes below.")
NOTES = _text(SUMMARY_HEADER + "\nMy notes: account 4417-22, deadline Friday.")


def test_a_users_last_block_in_summary_form_stays_in_the_request() -> None:
    """Session 26 (f3): round mode dropped the request's last block whenever it merely
    started with SUMMARY_HEADER: the user's pasted notes vanished from the "verbatim"
    request. Only a summary memlife wrote is replaced, on this pass and the next."""
    msgs = [U([ASK, NOTES]), *_rounds(0, 6), A("filed")]
    summarizer = RecordingSummarizer("The assistant ran f.")
    result = compact(msgs, budget_tokens=200, keep_last_turns=1, summarizer=summarizer)
    assert result.compacted and result.summarized_rounds > 0
    request = result.messages[0]["content"]
    assert request[:2] == [ASK, NOTES] and len(request) == 3
    assert request[2]["text"].startswith(f"{SUMMARY_HEADER}\nThe assistant ran f.")
    assert validate_history(result.messages) == []

    # the loop goes on; the next pass replaces memlife's summary, never the notes
    longer = [*copy.deepcopy(result.messages[:-1]), *_rounds(6, 12), A("filed again")]
    second = compact(longer, budget_tokens=200, keep_last_turns=1, summarizer=summarizer)
    assert second.compacted and second.summarized_rounds > 0
    request = second.messages[0]["content"]
    assert request[:2] == [ASK, NOTES] and len(request) == 3
    assert request[2]["text"].startswith(f"{SUMMARY_HEADER}\nThe assistant ran f.")


def test_text_that_imitates_a_summary_is_kept_in_any_position() -> None:
    """A copy of a memlife summary the user edited, or one with a made-up marker line, is
    the user's text: it stays wherever it is in the request."""
    first = compact(
        [U([ASK]), *_rounds(0, 6), A("filed")],
        budget_tokens=200,
        keep_last_turns=1,
        summarizer=RecordingSummarizer("The assistant ran f."),
    )
    written = first.messages[0]["content"][-1]["text"]
    edited = _text(written.replace("ran f", "ran g"))
    made_up = _text(f"{SUMMARY_HEADER}\nMy notes.\n[memlife summary 0123456789abcdef]")
    for request in ([edited, ASK, made_up], [ASK, made_up, edited], [made_up, edited]):
        msgs = [U(copy.deepcopy(request)), *_rounds(0, 6), A("filed")]
        result = compact(
            msgs, budget_tokens=200, keep_last_turns=1, summarizer=RecordingSummarizer("s")
        )
        assert result.compacted and result.summarized_rounds > 0
        assert result.messages[0]["content"][:-1] == request


def test_an_earlier_whole_turn_summary_is_folded_into_the_round_summary() -> None:
    """A summary memlife merged in front of the request on an earlier call is its own: a
    later round pass (whose summariser reads it) replaces it; one summary, not two."""
    msgs = [U("hi " * 100), A("hello " * 100), U([ASK]), *_rounds(0, 3), A("ok")]
    summarizer = RecordingSummarizer("Earlier turns.")
    first = compact(msgs, budget_tokens=500, keep_last_turns=1, summarizer=summarizer)
    assert first.compacted and first.summarized_turns == 1 and first.summarized_rounds == 0
    assert first.messages[0]["content"][1:] == [ASK]
    longer = [*copy.deepcopy(first.messages[:-1]), *_rounds(3, 12), A("filed")]
    second = compact(longer, budget_tokens=400, keep_last_turns=1, summarizer=summarizer)
    assert second.compacted and second.summarized_rounds > 0
    request = second.messages[0]["content"]
    assert request[0] == ASK and len(request) == 2
    assert request[1]["text"].startswith(f"{SUMMARY_HEADER}\nEarlier turns.")
    # the summariser read the earlier summary as one, without memlife's marker line
    transcript = render_transcript(summarizer.calls[-1])
    assert transcript.startswith("Earlier summary: Earlier turns.\nUser: File the claim")


# ---- 2. every summariser input is a valid history; no tool pair is split ------------------


def _tool_turns(n: int) -> list[Message]:
    msgs: list[Message] = []
    for t in range(n):  # question, tool call, big result, answer
        msgs += [
            U(f"question {t}"),
            A([{"type": "tool_use", "id": f"t{t}", "name": "lookup", "input": {"q": t}}]),
            U([{"type": "tool_result", "tool_use_id": f"t{t}", "content": "x" * 4000}]),
            A(f"answer {t}"),
        ]
    return msgs


def _is_so_far(message: Mapping[str, Any]) -> bool:
    texts = _texts(message)
    return message["role"] == "user" and len(texts) == 1 and texts[0].startswith(SUMMARY_HEADER)


def _check_call(call: list[Message], bound: int) -> None:
    """One summariser input: a history the API accepts, every tool pair whole, in bound
    unless one indivisible unit (a message, or an assistant message and its answer) is
    larger."""
    assert validate_history(call) == [], validate_history(call)
    body = {"model": "m", "max_tokens": 1, "messages": call}
    assert check_messages_request(body, require_max_tokens=True) is None
    uses = {b["id"] for m in call for b in m["content"] if isinstance(b, dict) and "id" in b}
    answered = {
        b["tool_use_id"]
        for m in call
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }
    assert uses == answered
    chunk = call[1:] if _is_so_far(call[0]) else call
    if COUNTER.count(chunk) > bound * 3 // 4:
        assert len(chunk) == 1 or (len(chunk) == 2 and chunk[0]["role"] == "assistant")


def test_chunks_of_a_long_head_are_valid_histories() -> None:
    """Session 26 (f5): chunks were cut at any message, so a chunk began with a tool_result
    whose tool_use was in the previous chunk, after the "summary so far" user message (the
    user role twice): a Summarizer that sends its messages to the API got a 400."""
    msgs = _tool_turns(8)
    summarizer = RecordingSummarizer()
    result = compact(
        msgs,
        budget_tokens=3000,
        keep_last_turns=1,
        summarizer=summarizer,
        summarizer_input_tokens=2000,
    )
    assert result.compacted and result.summarizer_calls == len(summarizer.calls) > 1
    for call in summarizer.calls:
        _check_call(call, 2000)
    # every summarised message is read once, in order, as it was
    read = [m for call in summarizer.calls for m in call if not _is_so_far(m)]
    assert _dump(read) == _dump(msgs[: result.summarized_messages])


def test_chunks_of_an_agent_loop_keep_each_call_with_its_results() -> None:
    """Round mode: the head is the request and many tool rounds, read in several chunks;
    each later chunk opens with the summary so far and then an assistant tool call."""
    msgs = [U([ASK]), *_rounds(0, 40, size=2000), A("filed")]
    summarizer = RecordingSummarizer()
    result = compact(
        msgs, budget_tokens=3000, keep_last_turns=2, summarizer=summarizer,
        summarizer_input_tokens=3000,
    )  # fmt: skip
    assert result.compacted and result.summarized_rounds > 0 and len(summarizer.calls) > 2
    for call in summarizer.calls:
        _check_call(call, 3000)
    for call in summarizer.calls[1:]:
        assert _is_so_far(call[0]) and call[1]["role"] == "assistant"
    read = [m for call in summarizer.calls for m in call if not _is_so_far(m)]
    assert _dump(read) == _dump(msgs[: result.summarized_messages + 1])


# ---- the property -------------------------------------------------------------------------


@st.composite
def tool_loop_histories(draw: st.DrawFn) -> list[Message]:
    """Valid histories of text turns and tool loops (single and parallel calls, results
    with text after them), message sizes from a few to ~1,000 estimated tokens; the last
    turn may end on a pending call."""
    ids = itertools.count()
    size = st.integers(1, 4000)
    n_turns = draw(st.integers(1, 5))
    msgs: list[Message] = []
    for t in range(n_turns):
        last = t == n_turns - 1
        msgs.append(U([_text(f"ask {t} " + "q" * draw(size))]))
        rounds = draw(st.integers(0, 8))
        pending = False
        for r in range(rounds):
            use_ids = [f"toolu_{next(ids)}" for _ in range(draw(st.integers(1, 3)))]
            blocks: list[dict[str, Any]] = []
            if draw(st.booleans()):
                blocks.append(_text("thinking aloud " + "a" * draw(size)))
            blocks += [{"type": "tool_use", "id": u, "name": "f", "input": {}} for u in use_ids]
            msgs.append(A(blocks))
            if last and r == rounds - 1 and draw(st.booleans()):
                pending = True
                break
            results: list[dict[str, Any]] = [
                {"type": "tool_result", "tool_use_id": u, "content": "r" * draw(size)}
                for u in draw(st.permutations(use_ids))
            ]
            if draw(st.integers(0, 3)) == 0:
                results.append(_text("and also " + "u" * draw(size)))
            msgs.append(U(results))
        if not pending:
            msgs.append(A(f"answer {t} " + "y" * draw(size)))
    return msgs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=tool_loop_histories(),
    budget=st.integers(0, 3000),
    keep=st.integers(1, 3),
    bound=st.integers(1, 3000),
    explicit=st.booleans(),
)
def test_every_summariser_input_is_a_valid_history(
    history: list[Message], budget: int, keep: int, bound: int, explicit: bool
) -> None:
    """For any valid tool-loop history, budget and summariser bound: every input the
    summariser gets is a valid Messages API history, and no tool pair is split between inputs."""
    assert validate_history(history, allow_pending_tool_use=True) == []
    conv = Conversation(copy.deepcopy(history), [0] if explicit else None)
    summarizer = RecordingSummarizer()
    result = compact(
        conv, budget_tokens=budget, keep_last_turns=keep, summarizer=summarizer,
        summarizer_input_tokens=bound,
    )  # fmt: skip
    assert validate_history(result.messages, allow_pending_tool_use=True) == []
    for call in summarizer.calls:
        _check_call(call, bound)
