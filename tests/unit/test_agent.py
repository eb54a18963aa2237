"""The example agent against the fake Messages API server, through the real SDK."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from memlife.ledger import AccessLedger
from memlife.model import Status
from memlife.online.agent import MemoryAgent
from memlife.online.compaction import SUMMARY_HEADER, EstimateTokenCounter
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, text_reply, tool_use_reply

NS = "/users/u1/facts"
TEA = "I only drink green tea, never coffee."


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


@pytest.fixture()
def mem(tmp_path: Path) -> Iterator[LongTermMemory]:
    with SqliteStore(tmp_path / "m.db") as store:
        yield LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))


class FakeSummarizer:
    def __init__(self) -> None:
        self.calls: list[Sequence[Mapping[str, Any]]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls.append(messages)
        return "The user talked about tea."


def make_agent(server: MessagesServer, mem: LongTermMemory, **kw: Any) -> MemoryAgent:
    kw.setdefault("summarizer", FakeSummarizer())
    return MemoryAgent(mem, "u1", namespace=NS, client=server.client(max_retries=0), **kw)


def test_remember_tool_call_then_answer(
    messages_server: MessagesServer, mem: LongTermMemory
) -> None:
    messages_server.enqueue(
        tool_use_reply("remember", {"fact": TEA, "subject": "drinks"}, text="Let me note that."),
        text_reply("Noted: green tea only."),
    )
    agent = make_agent(messages_server, mem)
    reply = agent.send("Just so you know, I only drink green tea, never coffee.")
    assert (reply.text, reply.steps, reply.stopped) == ("Noted: green tea only.", 2, "end_turn")
    assert len(reply.tool_calls) == 1 and '"saved"' in reply.tool_calls[0]["result"]
    stored = mem.store.page("u1", NS, statuses=[Status.active]).records
    assert [(r.content, r.subject) for r in stored] == [(TEA, "drinks")]

    first, second = (r.body for r in messages_server.message_requests)
    assert [t["name"] for t in first["tools"]] == ["remember"]
    assert "none relevant" in first["system"]
    results = second["messages"][-1]["content"]
    assert results[0]["type"] == "tool_result" and not results[0].get("is_error")

    # next turn: the fact is recalled into the system prompt; no new record
    messages_server.enqueue(text_reply("Green tea, as always."))
    reply = agent.send("What do I usually drink?")
    assert reply.recalled and reply.recalled[0].record.content == TEA
    assert TEA in messages_server.last_body["system"]
    assert len(mem.store.page("u1", NS).records) == 1


def test_duplicate_remember_refreshes(messages_server: MessagesServer, mem: LongTermMemory) -> None:
    rid = mem.remember("u1", NS, None, TEA).record_id
    messages_server.enqueue(
        tool_use_reply("remember", {"fact": "I drink only green tea, never any coffee."}),
        text_reply("I knew that."),
    )
    reply = make_agent(messages_server, mem).send("I drink only green tea, never any coffee.")
    assert rid in reply.tool_calls[0]["result"] and "already_known" in reply.tool_calls[0]["result"]
    assert [r.id for r in mem.store.page("u1", NS).records] == [rid]


def test_step_limit_is_enforced(messages_server: MessagesServer, mem: LongTermMemory) -> None:
    messages_server.enqueue(
        tool_use_reply("remember", {"fact": "I like hiking."}),
        tool_use_reply("remember", {"fact": "I have a dog named Rex."}),
        tool_use_reply("remember", {"fact": "never served"}),
    )
    agent = make_agent(messages_server, mem, max_steps=2)
    reply = agent.send("I like hiking with my dog Rex.")
    assert (reply.steps, reply.stopped) == (2, "step_limit")
    assert len(messages_server.message_requests) == 2 and messages_server.pending() == 1
    assert len(mem.store.page("u1", NS).records) == 2  # both calls' tools were answered
    # the next turn is still a valid history (the fake rejects invalid ones with 400)
    messages_server.reset()
    messages_server.enqueue(text_reply("Sure."))
    assert agent.send("Thanks!").text == "Sure."
    last = messages_server.last_body["messages"][-1]
    assert [b["type"] for b in last["content"]] == ["tool_result", "text"]


def test_bad_tool_input_is_an_error_result(
    messages_server: MessagesServer, mem: LongTermMemory
) -> None:
    messages_server.enqueue(tool_use_reply("remember", {"fact": ""}), text_reply("Oops."))
    reply = make_agent(messages_server, mem).send("hello")
    assert reply.text == "Oops."
    assert messages_server.last_body["messages"][-1]["content"][0]["is_error"] is True
    assert mem.store.page("u1", NS).records == []


def test_a_subject_no_record_can_have_is_a_tool_error_not_a_crash(
    messages_server: MessagesServer, mem: LongTermMemory
) -> None:
    """A model's tool call with a 10 kB subject: refused by remember's checks (session 27),
    answered to the model as a tool error naming the field, never quoting it; send goes on."""
    subject = "tea" * 4000
    messages_server.enqueue(
        tool_use_reply("remember", {"fact": TEA, "subject": subject}), text_reply("Noted.")
    )
    reply = make_agent(messages_server, mem).send("hello")
    assert reply.text == "Noted."
    result = messages_server.last_body["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert "INVALID_ARGUMENT" in str(result["content"]) and "subject" in str(result["content"])
    assert subject not in str(result["content"])
    assert mem.store.page("u1", NS).records == []


def test_compaction_runs_before_calls(messages_server: MessagesServer, mem: LongTermMemory) -> None:
    summarizer = FakeSummarizer()
    agent = make_agent(
        messages_server,
        mem,
        summarizer=summarizer,
        budget_tokens=60,
        keep_last_turns=1,
        counter=EstimateTokenCounter(),
    )
    for i in range(3):
        messages_server.enqueue(text_reply(f"Answer {i}: " + "blah " * 40))
        agent.send(f"Question {i}: " + "words " * 40)
    assert summarizer.calls  # compaction happened
    first = messages_server.last_body["messages"][0]
    assert first["content"][0]["text"].startswith(SUMMARY_HEADER)
    assert len(messages_server.last_body["messages"]) == 1  # only the current turn kept


def test_max_steps_must_be_positive(messages_server: MessagesServer, mem: LongTermMemory) -> None:
    with pytest.raises(ValueError):
        make_agent(messages_server, mem, max_steps=0)


def test_a_history_message_goes_to_the_api_as_is_or_is_refused() -> None:
    from memlife.online.agent import api_message

    blocks = [{"type": "text", "text": "hi"}]
    assert api_message({"role": "user", "content": blocks}) == {"role": "user", "content": blocks}
    assert api_message({"role": "assistant", "content": "ok"}) == {
        "role": "assistant",
        "content": "ok",
    }
    with pytest.raises(ValueError, match="role 'system'"):
        api_message({"role": "system", "content": "be nice"})
