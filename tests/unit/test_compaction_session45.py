"""Short-term compaction as an agent framework feeds it (session 45, audit 45b): Messages API histories
with extended thinking in an agent loop, and a ``keep_last_turns`` larger than the
history. Real components only: the offline estimate counts, the summariser is a plain
object recording what it read (no network)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from memlife.online.compaction import (
    AnthropicSummarizer,
    Message,
    compact,
    derive_turn_starts,
    validate_history,
)
from tests.fakes.messages_api import MessagesServer, text_reply
from tests.support.messages import A, U

THINK = {"type": "thinking", "thinking": "Plan: read each file, then report.", "signature": "c2ln"}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    # Local twin of tests.fakes.messages_api's plugin fixture (as in test_compaction.py).
    with MessagesServer() as server:
        yield server


class Recording:
    """A summariser that answers ``reply`` and records what it read."""

    def __init__(self, reply: str = "Read f0 to f7; nothing notable.") -> None:
        self.reply = reply
        self.max_tokens = 100
        self.calls: list[list[Message]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls.append(copy.deepcopy([dict(m) for m in messages]))
        return self.reply


def use(uid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": uid, "name": "read", "input": {"path": f"{uid}.py"}}


def result(uid: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": uid, "content": f"{uid}: " + "y" * 2000}


def thinking_loop(opening: dict[str, Any], rounds: int = 10) -> list[Message]:
    """One turn of an agent loop with extended thinking (not interleaved): the model thinks
    once, at the start of its turn, then calls a tool round after round; the history ends
    on the tool results the agent is about to send."""
    out: list[Message] = [U("Audit every file in the repo.")]
    for r in range(rounds):
        blocks = [use(f"f{r}")]
        if r == 0:
            blocks.insert(0, opening)
        out += [A(blocks), U([result(f"f{r}")])]
    return out


def first_assistant_of_current_turn(messages: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    current = max(derive_turn_starts(messages))
    return next(m for m in messages[current:] if m["role"] == "assistant")


def dump(obj: object) -> str:
    return json.dumps(obj, sort_keys=True)


@pytest.mark.parametrize("opening", [THINK, REDACTED], ids=["thinking", "redacted_thinking"])
def test_a_round_cut_keeps_the_thinking_that_opens_the_current_turn(
    opening: dict[str, Any],
) -> None:
    """Adversary: an agent loop with extended thinking on, over budget mid-loop (ten
    rounds, the last results about to be sent). With thinking on, a tool-use loop is one
    assistant turn, and the API answers 400 ("messages.1.content.0.type: Expected
    `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a
    final `assistant` message must start with a thinking block") unless that turn's first
    assistant message still opens with its thinking block, unmodified. Must hold: a
    compacted history's current turn opens with the same thinking block (compaction may
    keep the first round, or not compact; it may not hand the agent a request the API
    refuses)."""
    history = thinking_loop(opening)
    got = compact(history, budget_tokens=2_000, summarizer=Recording())
    assert got.reason != "under_budget"  # over budget mid-loop, with rounds to summarise
    assert validate_history(got.messages, allow_pending_tool_use=True) == []
    first = first_assistant_of_current_turn(got.messages)
    assert dump(first["content"][0]) == dump(opening)


@pytest.mark.parametrize(("turns", "keep"), [(3, 5), (6, 10), (10, 12)])
def test_keep_last_turns_beyond_the_history_summarises_no_turn(turns: int, keep: int) -> None:
    """Adversary: an agent framework passes a fixed ``keep_last_turns`` (here 5, 10, 12)
    to every call, and a conversation of fewer turns (3, 6, 10) goes over budget. Must
    hold: every turn is kept verbatim (the newest ``keep_last_turns`` turns are never
    summarised), so no whole turn goes (``too_few_turns``, or a tool-round cut; there are
    no rounds here). The slice's stop ``len(starts) - keep + 1`` goes negative and wraps
    around: keep 12 of 10 turns summarised 8 and kept 2."""
    history: list[Message] = []
    for t in range(turns):
        history += [U(f"q{t} " + "u" * 400), A(f"a{t} " + "a" * 400)]
    got = compact(history, budget_tokens=300, keep_last_turns=keep, summarizer=Recording())
    assert got.summarized_turns == 0, got
    assert got.messages == history
    assert got.reason == "too_few_turns"


def test_keep_last_turns_at_or_just_past_the_history_keeps_every_turn() -> None:
    """Control for the test above: ``keep_last_turns`` equal to the turns, or one more,
    keeps every turn (the slice's stop is 1 or 0 there); and a thinking loop that the
    budget leaves alone is returned as it was."""
    history: list[Message] = []
    for t in range(3):
        history += [U(f"q{t} " + "u" * 400), A(f"a{t} " + "a" * 400)]
    for keep in (3, 4):
        got = compact(history, budget_tokens=300, keep_last_turns=keep, summarizer=Recording())
        assert (got.reason, got.messages) == ("too_few_turns", history)
    loop = thinking_loop(THINK, rounds=2)
    assert compact(loop, budget_tokens=10_000, summarizer=Recording()).reason == "under_budget"


def test_a_failed_tool_call_reads_as_failed_to_the_summariser(
    messages_server: MessagesServer,
) -> None:
    """Adversary: the summarised turns hold a payment that failed (a tool_result with
    ``is_error``, its text a bare number, as tools answer) and one that went through.
    Must hold: the transcript the default summariser sends (the real SDK against the fake
    Messages API) says which result was an error; read alike, the summary would record a
    payment that never happened. Kills history.py render_transcript ``status = " (error)"
    if block.get("is_error") else ""`` as ``status = ""``."""
    pay = {"type": "tool_use", "id": "toolu_pay", "name": "pay", "input": {"eur": 4417}}
    retry = {"type": "tool_use", "id": "toolu_retry", "name": "pay", "input": {"eur": 4417}}
    failed = {"type": "tool_result", "tool_use_id": "toolu_pay", "content": "402", "is_error": True}
    ok = {"type": "tool_result", "tool_use_id": "toolu_retry", "content": "201"}
    history = [
        U("Pay invoice 4417."), A([pay]), U([failed]), A([retry]), U([ok]), A("Paid."),
        U("Thanks!"), A("You're welcome."),
    ]  # fmt: skip
    messages_server.enqueue(text_reply("Invoice 4417: first payment failed (402), retry paid."))
    summarizer = AnthropicSummarizer(messages_server.client(max_retries=0), max_tokens=100)
    got = compact(history, budget_tokens=20, keep_last_turns=1, summarizer=summarizer)
    assert got.compacted, got
    (request,) = messages_server.message_requests
    prompt = request.body["messages"][0]["content"]
    assert "Tool result [toolu_pay] (error): 402" in prompt
    assert "Tool result [toolu_retry]: 201" in prompt
