"""Session 35s mutation audit of the SQLite store's conditional writes and the online
history/agent guards: each test attacks one guard a mutant showed untested. Real SQLite
stores (a second connection where another writer matters), no mocks of memlife logic."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.model import MemoryRecord, MemoryType, Status, content_sha256
from memlife.stores.sqlite import Refresh, SqliteStore

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
NS = "/users/u-1/facts"
TEA = "I only drink green tea."


def rec(rid: str, content: str = TEA, **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                created_at=T0 - timedelta(days=30), subject="drinks")  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    return tmp_path / "memlife.db"


@pytest.fixture()
def store(db: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(db)
    yield s
    s.close()


@pytest.fixture()
def other(db: Path, store: SqliteStore) -> Iterator[SqliteStore]:
    """A second connection to the same file: another process's writer."""
    s = SqliteStore(db)
    yield s
    s.close()


def stored(store: SqliteStore, rid: str) -> MemoryRecord:
    got = store.get(rid)
    assert got is not None
    return got


# -- refresh_active ---------------------------------------------------------------------------


def test_refresh_does_not_touch_a_record_held_after_it_was_read(
    store: SqliteStore, other: SqliteStore
) -> None:
    """refresh_active's ``retention_class != 'legal_hold'``: a hold placed by another writer
    between remember's read and its refresh wins; the held row is not written."""
    store.put_many([rec("A")])
    read = stored(store, "A")
    other.put_many([read.model_copy(update={"retention_class": "legal_hold"})])
    change = Refresh(at=T0, confidence=0.99, verify=True)
    assert store.refresh_active("A", read.sha256, change) is False
    now = stored(store, "A")
    assert (now.access_count, now.last_verified_at) == (read.access_count, read.last_verified_at)
    assert now.confidence == read.confidence


def test_refresh_does_not_touch_a_record_rewritten_after_it_was_read(
    store: SqliteStore, other: SqliteStore
) -> None:
    """refresh_active's ``content_sha256 = :sha``: another writer changed the record's text
    after the read; the refresh of the old text is refused and the new row left as written."""
    store.put_many([rec("A")])
    read = stored(store, "A")
    other.put_many([read.model_copy(update={"content": "I only drink black coffee."})])
    assert store.refresh_active("A", read.sha256, Refresh(at=T0, confidence=0.99)) is False
    now = stored(store, "A")
    assert now.content == "I only drink black coffee."
    assert (now.access_count, now.confidence) == (read.access_count, read.confidence)


def _relife(read: MemoryRecord) -> Refresh:
    """A duplicate's lifetime change as remember makes it: to semantic, never expiring,
    only while the row still has the lifetime read."""
    return Refresh(at=T0, confidence=0.5, memory_type=MemoryType.semantic, expires_at=None,
                   was_type=read.memory_type, was_expires_at=read.expires_at)  # fmt: skip


def test_a_lifetime_change_is_not_written_over_a_type_changed_since_the_read(
    store: SqliteStore, other: SqliteStore
) -> None:
    """refresh_active's ``memory_type = :was_type``: another writer retyped the record (same
    expiry) after the read; the relife is refused (the caller reads again), the type kept."""
    expires = T0 + timedelta(days=30)
    store.put_many([rec("A", memory_type="episodic", expires_at=expires)])
    read = stored(store, "A")
    other.put_many([read.model_copy(update={"memory_type": "procedural"})])
    assert store.refresh_active("A", read.sha256, _relife(read)) is False
    now = stored(store, "A")
    assert (now.memory_type, now.expires_at) == ("procedural", expires)
    assert now.access_count == read.access_count


def test_a_lifetime_change_is_not_written_over_an_expiry_changed_since_the_read(
    store: SqliteStore, other: SqliteStore
) -> None:
    """refresh_active's ``expires_at IS :was_expires_at``: another writer moved the expiry
    after the read (same type); the relife is refused and that writer's expiry stands."""
    store.put_many([rec("A", memory_type="episodic", expires_at=T0 + timedelta(days=30))])
    read = stored(store, "A")
    later = T0 + timedelta(days=90)
    other.put_many([read.model_copy(update={"expires_at": later})])
    assert store.refresh_active("A", read.sha256, _relife(read)) is False
    now = stored(store, "A")
    assert (now.memory_type, now.expires_at) == ("episodic", later)


# -- put_if_unchanged ---------------------------------------------------------------------------


def test_put_if_unchanged_never_overwrites_a_record_retained_after_the_read(
    store: SqliteStore, other: SqliteStore
) -> None:
    """_OVERWRITE's ``status != 'retained'`` and the HELD answer: another writer retained the
    record after the read (same text); the overwrite is refused as HELD, never retried
    (CHANGED would send the caller round again), and the retained row is untouched."""
    store.put_many([rec("A")])
    read = stored(store, "A")
    other.set_status(["A"], Status.retained)
    new = read.model_copy(update={"subject": "beverages", "confidence": 0.1})
    result = store.put_if_unchanged(new, read.sha256)
    assert result.succeeded == []
    assert [(f.code, f.retryable) for f in result.failed] == [("HELD", False)]
    now = stored(store, "A")
    assert (now.status, now.subject, now.confidence) == (Status.retained, "drinks", read.confidence)


def test_put_if_unchanged_overwrite_refuses_content_erased_after_the_read(
    store: SqliteStore, other: SqliteStore
) -> None:
    """The tombstone check of put_if_unchanged's overwrite path: the caller read record A,
    then another connection erased the text it is about to write (a tombstone for B); the
    overwrite of A with that text is refused ERASED_CONTENT and A keeps its own text."""
    store.put_many([rec("A", "I live in Lisbon.")])
    read = stored(store, "A")
    other.add_tombstones([("u-1", "B", content_sha256(TEA), None)])
    result = store.put_if_unchanged(read.model_copy(update={"content": TEA}), read.sha256)
    assert [f.code for f in result.failed] == ["ERASED_CONTENT"] and result.succeeded == []
    assert stored(store, "A").content == "I live in Lisbon."


# -- insert_new(unique_active=True): one active record per fact, per actor + namespace ---------


def test_the_same_fact_in_another_namespace_is_not_a_duplicate(store: SqliteStore) -> None:
    """_SAME_ACTIVE's ``namespace=?``: the actor's active record in another namespace does
    not make a new record of the same text a duplicate."""
    store.put_many([rec("A", namespace="/users/u-1/notes")])
    result = store.insert_new([rec("B")], unique_active=True)
    assert result.succeeded == ["B"] and result.failed == []


def test_an_inactive_record_of_the_same_fact_is_not_a_duplicate(store: SqliteStore) -> None:
    """_SAME_ACTIVE's ``status='active'``: a superseded (or quarantined) record of the same
    text does not block a new active one; only an active record does."""
    store.put_many([rec("A", status="superseded"), rec("Q", status="quarantined")])
    assert store.insert_new([rec("B")], unique_active=True).succeeded == ["B"]
    failed = store.insert_new([rec("C")], unique_active=True).failed
    assert [(f.code, f.message) for f in failed] == [("DUPLICATE_ACTIVE", "B")]


# -- tombstones: per actor ------------------------------------------------------------------


def test_another_actors_erased_text_does_not_refuse_the_same_text(store: SqliteStore) -> None:
    """The ERASED_CONTENT query's exact-hash branch is per actor: u-2 erasing a text does
    not forbid u-1 from storing the same words (no folded key on the tombstone, so only the
    exact hash could match)."""
    store.add_tombstones([("u-2", "X", content_sha256(TEA), None)])
    assert store.put_if_unchanged(rec("A"), None).succeeded == ["A"]
    assert store.put_replacement(rec("B")).succeeded == ["B"]
    assert [f.code for f in store.put_replacement(rec("C", actor_id="u-2")).failed] == [
        "ERASED_CONTENT"
    ]


# -- holds: status retained counts as held ---------------------------------------------------


def test_set_status_unless_held_refuses_a_retained_record(
    store: SqliteStore, other: SqliteStore
) -> None:
    """set_status_unless_held's ``status == retained``: a record retained by another writer
    after the caller's read is not superseded; LEGAL_HOLD, not retried."""
    store.put_many([rec("A"), rec("B", "I drink tea daily.")])
    other.set_status(["A"], Status.retained)
    result = store.set_status_unless_held(["A", "B"], Status.superseded, replaced_by="N")
    assert [(f.id, f.code, f.retryable) for f in result.failed] == [("A", "LEGAL_HOLD", False)]
    assert result.succeeded == ["B"]
    assert stored(store, "A").status is Status.retained


def test_delete_many_never_deletes_a_retained_record(store: SqliteStore) -> None:
    """delete_many's ``status != retained``: a retained record is held; LEGAL_HOLD."""
    store.put_many([rec("A", status="retained")])
    result = store.delete_many(["A"])
    assert [f.code for f in result.failed] == ["LEGAL_HOLD"] and result.succeeded == []
    assert stored(store, "A").status is Status.retained


# -- scoping of reads --------------------------------------------------------------------------


def test_shard_fingerprint_ignores_other_namespaces(store: SqliteStore) -> None:
    """shard_fingerprint's ``namespace=?``: a write to another namespace of the same actor
    leaves this shard's fingerprint as it was (online recall does not reload for it), and
    a write to this shard moves it."""
    store.put_many([rec("A")])
    before = store.shard_fingerprint("u-1", NS)
    store.put_many([rec("B", "Notes go here.", namespace="/users/u-1/notes")])
    assert store.shard_fingerprint("u-1", NS) == before
    store.put_many([rec("C", "I drink tea daily.")])
    assert store.shard_fingerprint("u-1", NS) != before


def test_superseded_pointing_to_is_per_actor(store: SqliteStore) -> None:
    """superseded_pointing_to's ``actor_id=?``: another actor's superseded record naming the
    same replacement id is not one of this actor's."""
    store.put_many([
        rec("X", status="superseded", provenance={"replaced_by": "R"}),
        rec("Y", actor_id="u-2", namespace="/users/u-2/facts", status="superseded",
            provenance={"replaced_by": "R"}),
    ])  # fmt: skip
    assert store.superseded_pointing_to("u-1", ["R"]) == {"X": "R"}


def test_contents_held_leaves_out_the_records_about_to_go(store: SqliteStore) -> None:
    """contents_held's ``excluding``: a text only the excluded records hold is not held (its
    vector may go); one another record also holds is."""
    store.put_many([rec("A"), rec("B", "I drink tea daily."), rec("C", "I drink tea daily.")])
    shas = {content_sha256(TEA), content_sha256("I drink tea daily.")}
    assert store.contents_held("u-1", shas, excluding={"A", "B"}) == {
        content_sha256("I drink tea daily.")
    }


# -- paging ----------------------------------------------------------------------------------


def _pages(store: SqliteStore, actor: str, ns: str, size: int) -> list[list[str]]:
    out, token = [], None
    while True:
        page = store.page(actor, ns, page_size=size, token=token)
        out.append([r.id for r in page.records])
        if page.next_token is None:
            return out
        token = page.next_token


def test_paging_returns_each_record_once_and_stops_at_a_full_last_page(
    store: SqliteStore,
) -> None:
    """_keyset: ``id > last`` (no record repeated across a page boundary) and the one extra
    row read tells whether another page exists (a full last page has no next token)."""
    store.put_many([rec(f"r{i}", f"Fact number {i}.") for i in range(4)])
    store.put_many([rec("r9", "Another shard.", namespace="/users/u-1/notes")])
    assert _pages(store, "u-1", NS, 2) == [["r0", "r1"], ["r2", "r3"]]
    assert _pages(store, "u-1", NS, 3) == [["r0", "r1", "r2"], ["r3"]]


def test_a_page_token_of_another_shard_is_refused(store: SqliteStore) -> None:
    """_decode_token: a token minted for one actor + namespace does not page another (its
    last id would silently skip or leak rows there)."""
    from memlife.stores.base import BadPageToken

    store.put_many([rec(f"r{i}", f"Fact number {i}.") for i in range(3)])
    token = store.page("u-1", NS, page_size=1).next_token
    assert token is not None
    for actor, ns in (("u-2", NS), ("u-1", "/users/u-1/notes")):
        with pytest.raises(BadPageToken):
            store.page(actor, ns, token=token)


# -- online history: turns never split a tool call from its result ----------------------------


def _tool_round(i: int) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": f"t{i}", "name": "remember", "input": {"fact": f"f{i}"}}
    result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "Remember two things."},
    *_tool_round(1),
    *_tool_round(2)[:1],
    {"role": "user", "content": [*_tool_round(2)[1]["content"], {"type": "text", "text": "And?"}]},
    {"role": "assistant", "content": "Done."},
]


@pytest.mark.parametrize(
    ("starts", "why"),
    [([0, 2], "tool_result"), ([0, 6], "outside"), ([1], "begin with 0"), ([0, 3, 3], "sorted")],
)
def test_explicit_turn_starts_are_checked(starts: list[int], why: str) -> None:
    """check_turn_starts: a start at a tool_result (it would split a call from its result),
    past the end, not from 0, or repeated is an InputError."""
    from memlife.errors import InputError
    from memlife.online.history import check_turn_starts

    with pytest.raises(InputError, match=why):
        check_turn_starts(CONVERSATION, starts)
    assert check_turn_starts(CONVERSATION, [0, 5]) == [0, 5]


def test_tool_result_shapes_the_api_rejects_are_problems() -> None:
    """validate_history on a tool result: answered twice, placed after text, or a tool_use
    in a user message; each is a problem, never a valid history."""
    from memlife.online.history import validate_history

    use, result = CONVERSATION[1], CONVERSATION[2]["content"][0]
    text = {"type": "text", "text": "hi"}
    cases = {
        "answered twice": [CONVERSATION[0], use, {"role": "user", "content": [result, result]}],
        "must come first": [CONVERSATION[0], use, {"role": "user", "content": [text, result]}],
        "only belong in assistant": [{"role": "user", "content": [text, *use["content"]]}],
    }
    for why, msgs in cases.items():
        assert any(why in p for p in validate_history(msgs)), why


# -- the example agent -------------------------------------------------------------------------


@pytest.fixture()
def messages_server() -> Iterator[Any]:
    from tests.fakes.messages_api import MessagesServer

    with MessagesServer() as server:
        yield server


@pytest.fixture()
def agent(messages_server: Any, tmp_path: Path) -> Iterator[Any]:
    """The example agent over a real SQLite store and the fake Messages API."""
    from memlife.ledger import AccessLedger
    from memlife.online.agent import MemoryAgent
    from memlife.online.memory import LongTermMemory

    class Summarizer:
        def summarize(self, messages: Any) -> str:
            return "Earlier: small talk."

    with SqliteStore(tmp_path / "agent.db") as store:
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        client = messages_server.client(max_retries=0)
        yield MemoryAgent(mem, "u1", namespace=NS, client=client, summarizer=Summarizer())


def test_a_tool_use_stop_without_a_tool_call_ends_the_turn(
    messages_server: Any, agent: Any
) -> None:
    """send's ``or not uses``: a reply whose stop_reason says tool_use but that holds no
    tool_use block ends the turn (no empty tool-result message is sent, which the API
    would reject), and the history stays valid for the next turn."""
    from memlife.online.history import validate_history
    from tests.fakes.messages_api import text_reply

    messages_server.enqueue(text_reply("Hmm.", stop_reason="tool_use"), text_reply("Next."))
    reply = agent.send("Hello")
    assert (reply.steps, reply.stopped, reply.text) == (1, "tool_use", "Hmm.")
    assert len(messages_server.message_requests) == 1
    assert validate_history(agent.messages) == []


def test_remembering_an_erased_fact_is_a_tool_error_not_a_crash(
    messages_server: Any, agent: Any
) -> None:
    """_run_tool's ``except RememberRefused`` (before the InputError it subclasses): the
    model asks to save a fact the user had erased; the tool answers ``not_saved`` with the
    refusal's code (not INVALID_ARGUMENT), nothing is stored, the turn goes on."""
    from tests.fakes.messages_api import text_reply, tool_use_reply

    store = agent.memory.store
    store.add_tombstones([("u1", "gone", content_sha256(TEA), None)])
    messages_server.enqueue(tool_use_reply("remember", {"fact": TEA}), text_reply("Okay."))
    reply = agent.send("Remember my drink.")
    assert (reply.text, reply.steps) == ("Okay.", 2)
    result = messages_server.last_body["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert json.loads(result["content"]) == {"not_saved": "ERASED_CONTENT"}  # its own code
    assert store.page("u1", NS).records == []
