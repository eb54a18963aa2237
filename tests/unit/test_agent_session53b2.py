"""The example agent, audit 53b2: a turn that goes wrong half way must leave a history the
Messages API (and compaction) still take.

Adversary: a concurrent writer and a careless caller. (1) Another connection holds the
SQLite store's write lock (the nightly run, an import) past the store's busy timeout
while the model's ``remember`` call runs: the tool raises ``database is locked``, and the
``tool_use`` the agent had already stored stayed unanswered, so every later request of
that conversation was a 400 and compaction refused the history as ``invalid_input``: the
user could not be answered again (audit 52b's class, by the tool's door). (2) A blank
user text (``""``, spaces, a lone newline: a chat box sent empty) became a user message
with empty content (or a blank block joined to a step-limit stop): the real API answers
400 to it, and compaction refuses every later history of the conversation as
``invalid_input``, so it is never compacted again and grows past any budget.

Real components: the agent over the SQLite store and a local ledger, the real SDK against
the local Messages API (``tests/fakes/messages_api.py``: it answers 400 to an unanswered
tool call; it does not check empty content, so that case is judged by
``validate_history``, the project's statement of what the API rejects), a second real
SQLite connection holding the write lock."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlife.errors import InputError
from memlife.ledger import AccessLedger
from memlife.online.agent import MemoryAgent
from memlife.online.compaction import validate_history
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, text_reply, tool_use_reply

NS = "/users/u1/facts"
FACT = "I only drink green tea."


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


@pytest.fixture(name="db")
def _db(tmp_path: Path) -> Iterator[tuple[SqliteStore, LongTermMemory]]:
    with SqliteStore(tmp_path / "m.db") as store:
        yield store, LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))


class Quiet:
    max_tokens = 20

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        return "The user talked about tea."


def _agent(server: MessagesServer, mem: LongTermMemory, **kw: Any) -> MemoryAgent:
    return MemoryAgent(
        mem, "u1", namespace=NS, client=server.client(max_retries=0), summarizer=Quiet(), **kw
    )


def _next_turn_works(server: MessagesServer, agent: MemoryAgent) -> None:
    server.enqueue(text_reply("Of course."))
    reply = agent.send("Can you help me with something else?")
    assert (reply.text, reply.stopped) == ("Of course.", "end_turn")
    assert validate_history(agent.messages) == []


@contextlib.contextmanager
def _write_lock_held(store: SqliteStore, path: Path) -> Iterator[None]:
    """Another writer holds the store's write lock; the store waits 20 ms for it (its own
    connection's busy timeout shortened so the test does not wait the default 30 s)."""
    store.connection.execute("PRAGMA busy_timeout=20")
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()
        store.connection.execute("PRAGMA busy_timeout=30000")


def test_a_tool_that_raises_still_answers_its_call(
    messages_server: MessagesServer, db: tuple[SqliteStore, LongTermMemory], tmp_path: Path
) -> None:
    """Adversary: the nightly run (any writer) holds the store's write lock past its busy
    timeout while the model's ``remember`` call runs. Must hold: the error still reaches
    the caller, but the call is answered (an ``is_error`` result), so the history is one
    the API and compaction take and the next turn is answered (before the fix: every later
    request a 400 naming the unanswered ``tool_use``)."""
    store, mem = db
    agent = _agent(messages_server, mem)
    messages_server.enqueue(tool_use_reply("remember", {"fact": FACT}), text_reply("Saved."))
    with _write_lock_held(store, tmp_path / "m.db"), pytest.raises(sqlite3.OperationalError):
        agent.send(FACT)
    assert validate_history(agent.messages) == [], validate_history(agent.messages)
    (result,) = agent.messages[-1]["content"]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert "OperationalError" in result["content"] and FACT not in result["content"]
    messages_server.reset()
    _next_turn_works(messages_server, agent)


def test_parallel_calls_after_a_raising_tool_are_answered_as_not_run(
    messages_server: MessagesServer, db: tuple[SqliteStore, LongTermMemory], tmp_path: Path
) -> None:
    """Adversary: the model calls ``remember`` twice in one reply and the first raises.
    Must hold: both calls answered, the second as not run (it never ran)."""
    store, mem = db
    agent = _agent(messages_server, mem)
    messages_server.enqueue(
        tool_use_reply(
            "remember", {"fact": FACT}, tool_id="toolu_a1",
            more=[("remember", {"fact": "I live in Lyon."})],
        )
    )  # fmt: skip
    with _write_lock_held(store, tmp_path / "m.db"), pytest.raises(sqlite3.OperationalError):
        agent.send(FACT)
    assert validate_history(agent.messages) == []
    first, other = agent.messages[-1]["content"]
    assert first["tool_use_id"] == "toolu_a1" and first["is_error"] is True
    assert other["is_error"] is True and "not run" in other["content"]
    assert mem.store.page("u1", NS).records == []  # neither was stored
    messages_server.reset()
    _next_turn_works(messages_server, agent)


def test_a_tool_that_fails_softly_is_answered_and_the_turn_goes_on(
    messages_server: MessagesServer, db: tuple[SqliteStore, LongTermMemory]
) -> None:
    """Control: a refusal the tool expects (a fact over the size limit) is an ``is_error``
    result the model reads, and the turn ends normally."""
    _, mem = db
    agent = _agent(messages_server, mem)
    big = "x" * (mem.content_max_bytes + 1)
    messages_server.enqueue(tool_use_reply("remember", {"fact": big}), text_reply("Too long."))
    reply = agent.send("Remember this long thing.")
    assert reply.text == "Too long." and "CONTENT_TOO_LARGE" in reply.tool_calls[0]["result"]
    _next_turn_works(messages_server, agent)


@pytest.mark.parametrize(
    "blank", ["", "   ", "\n", "\t \r\n"], ids=["empty", "spaces", "lf", "mix"]
)
def test_a_blank_user_text_is_refused_and_the_history_is_untouched(
    messages_server: MessagesServer, db: tuple[SqliteStore, LongTermMemory], blank: str
) -> None:
    """Adversary: the chat box sends nothing (or only whitespace). Must hold: a clear
    InputError, nothing sent to the model, the history as it was (before the fix the
    empty user message went to the model and stayed in the history for good)."""
    _, mem = db
    agent = _agent(messages_server, mem)
    messages_server.enqueue(text_reply("Hello."))
    agent.send("Hi.")
    before = [dict(m) for m in agent.messages]
    sent = len(messages_server.message_requests)
    messages_server.enqueue(text_reply("?"))  # what the model says if the text goes out
    with pytest.raises(InputError, match="blank"):
        agent.send(blank)
    assert agent.messages == before
    assert len(messages_server.message_requests) == sent


def test_after_a_blank_text_the_conversation_is_still_compacted(
    messages_server: MessagesServer, db: tuple[SqliteStore, LongTermMemory]
) -> None:
    """Adversary: one blank send, then a long conversation on a small budget. Must hold:
    the history stays one the API takes and compaction keeps it in budget (before the fix
    every compaction answered ``invalid_input`` and the history only grew)."""
    _, mem = db
    agent = _agent(messages_server, mem, budget_tokens=300, keep_last_turns=1)
    messages_server.enqueue(text_reply("Hello."))
    with contextlib.suppress(InputError):  # refused since the fix; taken before it
        agent.send("  ")
    compactions = 0
    for k in range(8):
        messages_server.enqueue(text_reply(f"Answer {k}: " + "tea is nice. " * 15))
        compactions += len(agent.send(f"Question {k} about tea? " * 5).compactions)
    assert compactions > 0  # before the fix: 0, every one invalid_input
    assert validate_history(agent.messages) == [], validate_history(agent.messages)[:2]


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2028\u3000\u200bab", min_size=0, max_size=6))
def test_every_accepted_user_text_leaves_a_valid_history(
    messages_server: MessagesServer, db: tuple[SqliteStore, LongTermMemory], text: str
) -> None:
    """Property over generated texts of whitespace, invisible characters and letters:
    either ``send`` refuses the text (InputError, history untouched) or the history after
    the turn is one ``validate_history`` accepts; a text with any non-space character is
    never refused."""
    _, mem = db
    messages_server.reset()
    agent = _agent(messages_server, mem)
    messages_server.enqueue(text_reply("Noted."))
    try:
        agent.send(text)
    except InputError:
        assert not text.strip() and agent.messages == []
        return
    assert validate_history(agent.messages) == [], (text, validate_history(agent.messages))


def test_a_text_of_an_invisible_character_is_taken(
    messages_server: MessagesServer, db: tuple[SqliteStore, LongTermMemory]
) -> None:
    """Control: a text that is not whitespace (a zero-width space, which the API takes)
    is sent as it is, and the conversation goes on."""
    _, mem = db
    agent = _agent(messages_server, mem)
    messages_server.enqueue(text_reply("Yes?"))
    assert agent.send("\u200b").text == "Yes?"
    assert validate_history(agent.messages) == []
    _next_turn_works(messages_server, agent)
