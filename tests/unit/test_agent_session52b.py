"""The example agent, audit 52b: a reply the Messages API will not take back in a history.

Adversary: the model itself, answering as the API documents it may: a reply cut off at
``max_tokens`` in the middle of a tool call (``stop_reason: max_tokens`` with a
``tool_use`` block), and an empty reply (``end_turn`` with no content, which Anthropic
documents after tool results). Stored as they came, each made every later request of the
conversation a 400 (a ``tool_use`` with no ``tool_result`` after it; an assistant message
with empty content), and compaction refused the history as ``invalid_input``: the agent
could not answer that user again.

Real components: the agent over the SQLite store and a local ledger, the real SDK against
the local Messages API (``tests/fakes/messages_api.py``, which answers 400 to what the
API rejects)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from memlife.ledger import AccessLedger
from memlife.online.agent import MemoryAgent
from memlife.online.compaction import validate_history
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, message_reply, text_reply, tool_use_reply

NS = "/users/u1/facts"


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


@pytest.fixture()
def mem(tmp_path: Path) -> Iterator[LongTermMemory]:
    with SqliteStore(tmp_path / "m.db") as store:
        yield LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))


class Quiet:
    max_tokens = 50

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        return "The user talked about tea."


def _agent(server: MessagesServer, mem: LongTermMemory) -> MemoryAgent:
    return MemoryAgent(
        mem, "u1", namespace=NS, client=server.client(max_retries=0), summarizer=Quiet()
    )


def _next_turn_works(server: MessagesServer, agent: MemoryAgent) -> None:
    """The conversation goes on: the next turn's request is accepted, and the history is
    one compaction can work on."""
    server.enqueue(text_reply("Of course."))
    reply = agent.send("Can you help me with something else?")
    assert (reply.text, reply.stopped) == ("Of course.", "end_turn")
    assert validate_history(agent.messages) == []


def test_a_tool_call_cut_off_at_max_tokens_leaves_a_history_the_api_takes(
    messages_server: MessagesServer, mem: LongTermMemory
) -> None:
    """Adversary: the model's reply stops at ``max_tokens`` inside a ``remember`` call (its
    input cut short). Must hold: the call is not run (nothing is saved from a partial
    input), the turn ends, and the next turn's request is accepted (before the fix the
    unanswered ``tool_use`` made every later request a 400)."""
    messages_server.enqueue(
        tool_use_reply(
            "remember", {"fact": "I only drink"}, text="Saving.", stop_reason="max_tokens"
        )
    )
    agent = _agent(messages_server, mem)
    reply = agent.send("I only drink green tea.")
    assert reply.stopped == "max_tokens"
    assert mem.store.page("u1", NS).records == []  # a cut-off call is never run
    _next_turn_works(messages_server, agent)


def test_an_empty_reply_after_tool_results_leaves_a_history_the_api_takes(
    messages_server: MessagesServer, mem: LongTermMemory
) -> None:
    """Adversary: after a tool round the model answers ``end_turn`` with no content.
    Must hold: the fact is saved and the next turn's request is accepted (before the fix
    the empty assistant message made every later request a 400)."""
    messages_server.enqueue(
        tool_use_reply("remember", {"fact": "I only drink green tea."}), message_reply([])
    )
    agent = _agent(messages_server, mem)
    reply = agent.send("I only drink green tea.")
    assert (reply.text, reply.stopped) == ("", "end_turn")
    assert [r.content for r in mem.store.page("u1", NS).records] == ["I only drink green tea."]
    _next_turn_works(messages_server, agent)


def test_a_text_reply_cut_off_at_max_tokens_goes_on(
    messages_server: MessagesServer, mem: LongTermMemory
) -> None:
    """Control: a text reply cut off at ``max_tokens`` (no tool call) is kept as it came,
    and the conversation goes on."""
    messages_server.enqueue(text_reply("Green tea is a fine", stop_reason="max_tokens"))
    agent = _agent(messages_server, mem)
    assert agent.send("Tell me about tea.").stopped == "max_tokens"
    assert agent.messages[-1] == {
        "role": "assistant", "content": [{"type": "text", "text": "Green tea is a fine"}]
    }  # fmt: skip
    _next_turn_works(messages_server, agent)


def test_a_step_limit_stop_goes_on(messages_server: MessagesServer, mem: LongTermMemory) -> None:
    """Control: a turn stopped at the step limit after a tool round goes on next turn (the
    documented join of the next text onto the tool results)."""
    messages_server.enqueue(tool_use_reply("remember", {"fact": "I only drink green tea."}))
    agent = MemoryAgent(
        mem, "u1", namespace=NS, client=messages_server.client(max_retries=0),
        summarizer=Quiet(), max_steps=1,
    )  # fmt: skip
    assert agent.send("I only drink green tea.").stopped == "step_limit"
    _next_turn_works(messages_server, agent)
