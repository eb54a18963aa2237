"""Guards left untested by the twenty-ninth audit (session 37): the online library's
long-term side (``memlife/online/memory.py``, ``memlife/online/index.py``,
``memlife/online/agent.py``, ``memlife/api.py``): what recall serves after another writer's
change, the shard index's upkeep, the public facade's actor scoping. Three tests
failed on the code before session 37 (recall across a namespace move, forget and remember
racing an id taken over by another actor).

Races are forced deterministically: a SqliteStore subclass lets another connection (what
another process does) write at the exact point a test names, then goes on as usual.
Real components: the SQLite store, the online library, its default embedder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife import Memory
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, Status, utcnow
from memlife.online.memory import LongTermMemory
from memlife.stores.base import BatchResult
from memlife.stores.sqlite import SqliteStore

NS = "/users/u-1/facts"
NOTES = "/users/u-1/notes"


class RaceStore(SqliteStore):
    """Runs ``before_read`` (another writer, its own connection) once, right before the
    next ``get_many``, ``before_get`` before the next ``get``, ``before_page`` before the next ``page`` and ``before_status`` before
    the next guarded status write: after every check the caller made, before the read or
    write itself."""

    before_read: Callable[[], None] | None = None
    before_status: Callable[[], None] | None = None
    before_get: Callable[[], None] | None = None
    before_page: Callable[[], None] | None = None

    def page(self, *args: Any, **kw: Any) -> Any:
        fn, self.before_page = self.before_page, None
        if fn is not None:
            fn()
        return super().page(*args, **kw)

    def get(self, record_id: str) -> MemoryRecord | None:
        fn, self.before_get = self.before_get, None
        if fn is not None:
            fn()
        return super().get(record_id)

    def get_many(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        fn, self.before_read = self.before_read, None
        if fn is not None:
            fn()
        return super().get_many(ids)

    def set_status_unless_held(self, ids: Sequence[str], status: Status, **kw: Any) -> BatchResult:
        fn, self.before_status = self.before_status, None
        if fn is not None:
            fn()
        return super().set_status_unless_held(ids, status, **kw)


def other_writer(db: Path, fn: Callable[[SqliteStore], None]) -> Callable[[], None]:
    def run() -> None:
        with SqliteStore(db) as other:
            fn(other)

    return run


def moved(rec: MemoryRecord | None, **update: Any) -> MemoryRecord:
    assert rec is not None
    return rec.model_copy(update=update)


# -- 1. REAL BUG: recall's re-read checks actor and status, not the namespace asked for ----
def test_recall_in_one_namespace_never_serves_a_record_now_in_another(tmp_path: Path) -> None:
    """Attacks the missing namespace check beside ``rec.actor_id != actor`` in
    ``memlife/online/memory.py::LongTermMemory.recall``. Recall ranks from its shard of
    (u-1, facts), then reads the hits. Another writer, in between, deletes the record and
    writes u-1's note under the same id in another namespace (an import with its own ids):
    recall scoped to facts must not serve a note."""
    db = tmp_path / "m.db"
    store = RaceStore(db)
    with store, Memory(store, ledger=tmp_path / "ledger") as m:
        mine = m.remember("My locker code is 4812.", actor="u-1", namespace=NS).id
        m.remember("I like hiking on Sundays.", actor="u-1", namespace=NS)
        assert [h.id for h in m.recall("locker code", actor="u-1", namespace=NS, k=1)] == [mine]
        note = moved(store.get(mine), namespace=NOTES, content="Locker code 9999 is a note.")

        def swap(other: SqliteStore) -> None:
            other.delete_many([mine])
            other.put_many([note])

        store.before_read = other_writer(db, swap)
        hits = m.recall("locker code", actor="u-1", namespace=NS, k=1)
        assert all(h.namespace == NS for h in hits), [(h.id, h.namespace) for h in hits]


# -- 2. REAL BUG: Memory.forget checks the actor on a read, writes without it ----------------
def test_forget_never_marks_another_actors_record_that_took_over_the_id(tmp_path: Path) -> None:
    """Attacks ``memlife/api.py::Memory.forget``'s actor scoping (``_own_active``): the check
    is a read, the write (``set_status_unless_held``) has no actor condition. Another
    writer deletes u-1's record and writes u-2's under the same id (an import with its own
    ids) between the two: u-1's forget must not hide, and the next night delete, u-2's."""
    db = tmp_path / "m.db"
    store = RaceStore(db)
    with store, Memory(store, ledger=tmp_path / "ledger") as m:
        mine = m.remember("My locker code is 4812.", actor="u-1", namespace=NS).id
        theirs = moved(store.get(mine), actor_id="u-2", namespace="/users/u-2/facts",
                       content="Bob's locker code is 1234.")  # fmt: skip

        def swap(other: SqliteStore) -> None:
            other.delete_many([mine])
            other.put_many([theirs])

        store.before_status = other_writer(db, swap)
        m.forget(mine, actor="u-1")
        after = store.get(mine)
        assert after is not None and after.actor_id == "u-2"
        assert after.status is Status.active


# -- 3. expiry: the instant of the deadline is already past it -----------------------------
@pytest.fixture()
def long_term(tmp_path: Path) -> Any:
    with SqliteStore(tmp_path / "m.db") as store:
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        yield mem
        mem.close()


def record(**kw: Any) -> MemoryRecord:
    base = dict(id="m-x", actor_id="u-1", namespace=NS, memory_type="semantic",
                content="Parks on level 3.", created_at=utcnow() - timedelta(days=2))  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


def test_a_record_is_expired_at_the_instant_of_its_expires_at(long_term: LongTermMemory) -> None:
    """Attacks ``stored_time(rec.expires_at) <= now`` in
    ``memlife/online/memory.py::LongTermMemory.expired`` (``<`` served a record at its
    deadline, as recall and ``Memory.get`` both ask ``expired``)."""
    at = utcnow().replace(microsecond=0) + timedelta(hours=1)
    rec = record(expires_at=at)
    assert long_term.expired(rec, at)
    assert not long_term.expired(rec, at - timedelta(microseconds=1))


def test_a_record_is_expired_when_its_ttl_has_just_run_out(long_term: LongTermMemory) -> None:
    """Attacks ``age.total_seconds() >= ttl * 86400`` in ``LongTermMemory.expired``: an
    episodic record (default policy: 365 days, no ``expires_at``) is past its deadline at
    exactly 365 days of age, not one instant later."""
    created = utcnow().replace(microsecond=0) - timedelta(days=400)
    rec = record(memory_type="episodic", created_at=created)
    assert long_term.expired(rec, created + timedelta(days=365))
    assert not long_term.expired(rec, created + timedelta(days=365, microseconds=-1))


# -- 4. REAL BUG: remember's duplicate refresh never checks whose record it refreshes ------
def test_remember_never_refreshes_another_actors_record_under_a_reused_id(
    tmp_path: Path,
) -> None:
    """Attacks the missing actor (and namespace) check in
    ``memlife/online/memory.py::LongTermMemory._refresh`` (recall drops such a record;
    remember's refresh does not). u-1's shard holds X saying the fact; another writer
    deletes X and writes u-2's record under the same id saying the same words (an import
    with its own ids) after the shard's staleness check, before the refresh reads X. u-1
    saying the fact again must store it for u-1, and leave u-2's record as it was."""
    db = tmp_path / "m.db"
    fact = "I am allergic to penicillin."
    store = RaceStore(db)
    with store, Memory(store, ledger=tmp_path / "ledger") as m:
        mine = m.remember(fact, actor="u-1", namespace=NS).id
        theirs = moved(store.get(mine), actor_id="u-2", namespace="/users/u-2/facts")

        def swap(other: SqliteStore) -> None:
            other.delete_many([mine])
            other.put_many([theirs])

        store.before_get = other_writer(db, swap)
        again = m.remember(fact, actor="u-1", namespace=NS)
        owner = store.get(again.id)
        assert owner is not None and owner.actor_id == "u-1", "u-1's fact stored nowhere"
        bobs = store.get(mine)
        assert bobs is not None and bobs.access_count == theirs.access_count


# -- 5. staleness: a foreign write landing during our own shard load ----------------------
def test_a_foreign_write_during_a_shard_load_makes_every_other_shard_recheck(
    tmp_path: Path,
) -> None:
    """Attacks ``before != self._seen_marker`` in
    ``memlife/online/memory.py::LongTermMemory._own_write``. The notes shard is loaded;
    then a remember in facts loads that shard, and another process adds a note while the
    load reads (before remember takes its marker). Remember's own write then moves the
    marker again: taken as seen without that clause, the foreign note is absorbed and the
    notes shard, never re-checked, does not know it."""
    db = tmp_path / "m.db"
    store = RaceStore(db)
    with store, Memory(store, ledger=tmp_path / "ledger") as m:
        m.remember("Dentist appointment on Friday.", actor="u-1", namespace=NOTES)
        assert m.recall("dentist", actor="u-1", namespace=NOTES)  # notes shard loaded
        added: list[str] = []

        def add_note(other: SqliteStore) -> None:
            with Memory(other, ledger=tmp_path / "ledger2") as m2:
                added.append(m2.remember("Bought a red kayak.", actor="u-1", namespace=NOTES).id)

        store.before_page = other_writer(db, add_note)
        m.remember("Lives in Lisbon.", actor="u-1", namespace=NS)  # loads facts: the race
        assert added
        hits = m.recall("red kayak", actor="u-1", namespace=NOTES, k=2)
        assert added[0] in [h.id for h in hits]


# -- 6. the facade's actor: a blank one is refused, not read as nobody's ------------------
def test_forget_with_a_blank_actor_is_refused(tmp_path: Path) -> None:
    """Attacks ``not actor.strip()`` in ``memlife/api.py::_need_actor``: forget checks
    ownership by comparing actors, so a blank actor quietly forgot nothing (returned [])
    where every other call refuses it; ``forget`` must refuse it as ``remember`` does."""
    from memlife.errors import InputError

    with Memory(f"sqlite:///{tmp_path / 'm.db'}", ledger=tmp_path / "ledger") as m:
        rid = m.remember("Lives in Lisbon.", actor="u-1", namespace=NS).id
        with pytest.raises(InputError, match="actor is required"):
            m.forget(rid, actor="   ")
        assert m.get(rid, actor="u-1") is not None


# -- 7. the shard index's fingerprint follows the rows it drops ----------------------------
def test_a_forgotten_row_leaves_the_fingerprint_matching_the_store(tmp_path: Path) -> None:
    """Attacks ``a + sign * b`` in ``memlife/online/index.py::ShardIndex.shift``: our own
    forget drops a row and takes its share out of the shard's fingerprint. Another
    connection's write elsewhere then makes every shard compare fingerprints: this one
    still matches the store and is kept, not reloaded (added instead of taken out, the
    share left a fingerprint no store state has: a reload after every foreign write)."""
    db = tmp_path / "m.db"
    with SqliteStore(db) as store:
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        gone = mem.remember("u-1", NS, None, "Parks on level 3.").record_id
        mem.remember("u-1", NS, None, "Walks the dog at seven.")
        assert mem.recall("u-1", "parking level", namespace=NS)
        loads = mem.load_count
        assert mem.forget([gone]) == [gone]
        with SqliteStore(db) as other:  # another process writes another shard
            LongTermMemory(other, ledger=AccessLedger(tmp_path / "l2")).remember(
                "u-1", NOTES, None, "Bought a red kayak."
            )
        hits = mem.recall("u-1", "dog walk", namespace=NS)
        assert gone not in [h.record.id for h in hits]
        assert mem.load_count == loads  # the fingerprint still matched: no reload
        mem.close()


# -- 8. a held record is never forgotten on a store without an in-transaction hold check ---
def test_forget_leaves_a_held_record_on_a_store_that_checks_no_hold(tmp_path: Path) -> None:
    """Attacks the ``not records[i].held`` filter in
    ``memlife/online/memory.py::LongTermMemory.set_status``. SQLite refuses a held record
    inside its status write as well; AgentCore's ``set_status`` (read-modify-write) checks
    nothing, so that filter is all that keeps a legal hold untouched there (invariant 1)."""
    from memlife.model import RetentionClass
    from tests.fakes.agentcore import agentcore_store

    with agentcore_store() as (store, _fake):
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        held = mem.remember("u-1", NS, None, "Signed the lease on March 3.").record_id
        free = mem.remember("u-1", NS, None, "Walks the dog at seven.").record_id
        rec = store.get(held)
        assert rec is not None
        store.put_many([rec.model_copy(update={"retention_class": RetentionClass.legal_hold})])
        assert mem.forget([held, free]) == [free]
        after = store.get(held)
        assert after is not None and after.status is Status.active
        assert after.retention_class is RetentionClass.legal_hold
        mem.close()


# -- 9. the example agent answers a tool it does not have, and runs nothing --------------
def test_the_agent_runs_no_tool_but_remember(tmp_path: Path) -> None:
    """Attacks ``if name != "remember"`` in ``memlife/online/agent.py::MemoryAgent._run_tool``:
    a model calling a tool the agent never offered (``forget_all``, with a ``fact``) gets
    an error result, and nothing is stored in the user's memory."""
    from memlife.online.agent import MemoryAgent
    from tests.fakes.messages_api import MessagesServer, text_reply, tool_use_reply

    class NoSummary:
        def summarize(self, messages: Any) -> str:
            return "nothing"

    with MessagesServer() as server, SqliteStore(tmp_path / "m.db") as store:
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        server.enqueue(
            tool_use_reply("forget_all", {"fact": "I hate all my memories."}), text_reply("Ok.")
        )
        agent = MemoryAgent(mem, "u-1", namespace=NS, client=server.client(max_retries=0),
                            summarizer=NoSummary())  # fmt: skip
        reply = agent.send("hello")
        assert reply.text == "Ok."
        result = server.last_body["messages"][-1]["content"][0]
        assert result["is_error"] is True and "unknown tool" in result["content"]
        assert store.page("u-1", NS).records == []
        mem.close()


# -- 10. a record made active again through set_status is recalled at once --------------
def test_a_record_made_active_again_here_is_recalled_without_a_reload(tmp_path: Path) -> None:
    """Attacks the ``status is Status.active and rid not in shard.row_of`` branch of
    ``memlife/online/memory.py::LongTermMemory.set_status``: our own write moves no
    foreign marker, so the loaded shard is trusted as is; without the row put back, the
    restored record stayed invisible to recall until some other writer forced a reload."""
    with SqliteStore(tmp_path / "m.db") as store:
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        rid = mem.remember("u-1", NS, None, "Parks on level 3.").record_id
        mem.remember("u-1", NS, None, "Walks the dog at seven.")
        assert mem.forget([rid]) == [rid]
        assert rid not in [h.record.id for h in mem.recall("u-1", "parking level", namespace=NS)]
        assert mem.set_status([rid], Status.active) == [rid]
        assert rid in [h.record.id for h in mem.recall("u-1", "parking level", namespace=NS)]
        mem.close()


def test_a_subject_that_is_not_text_is_dropped_and_the_fact_still_saved(tmp_path: Path) -> None:
    """Attacks ``isinstance(args.get("subject"), str)`` in ``MemoryAgent._run_tool``: the
    schema's optional subject sent as a number is set aside (None), the fact is saved;
    passed on, ``remember`` refused the whole call and the user's fact was lost."""
    from memlife.online.agent import MemoryAgent
    from tests.fakes.messages_api import MessagesServer, text_reply, tool_use_reply

    class NoSummary:
        def summarize(self, messages: Any) -> str:
            return "nothing"

    with MessagesServer() as server, SqliteStore(tmp_path / "m.db") as store:
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        server.enqueue(
            tool_use_reply("remember", {"fact": "I only drink green tea.", "subject": 7}),
            text_reply("Noted."),
        )
        agent = MemoryAgent(mem, "u-1", namespace=NS, client=server.client(max_retries=0),
                            summarizer=NoSummary())  # fmt: skip
        assert agent.send("I only drink green tea.").text == "Noted."
        assert "is_error" not in server.last_body["messages"][-1]["content"][0]
        assert [r.content for r in store.page("u-1", NS).records] == ["I only drink green tea."]
        mem.close()


def test_a_superseded_record_never_points_to_a_replacement_no_longer_active(
    tmp_path: Path,
) -> None:
    """Attacks ``by.status is not Status.active`` in
    ``memlife/online/memory.py::_check_replacement`` (invariant 3): a replacement already
    forgotten would leave the superseded record pointing to one the night deletes."""
    from memlife.errors import InputError

    with SqliteStore(tmp_path / "m.db") as store:
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        old = mem.remember("u-1", NS, None, "Parks on level 3.").record_id
        new = mem.remember("u-1", NS, None, "Parks on level 5 since May.").record_id
        assert mem.forget([new]) == [new]
        with pytest.raises(InputError, match="not an active record"):
            mem.set_status([old], Status.superseded, replaced_by=new)
        after = store.get(old)
        assert after is not None and after.status is Status.active
        mem.close()
