"""Session 26 findings in the online library: erasures racing remember and set_status, a
naive ``at``, and bad arguments that did not say which argument was wrong.

The races are forced at the exact point the finding names by a real second process (a
``memlife`` erasure in another interpreter, committing to the same SQLite file), run from
a hook around the store or subject-table call the window opens after.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memlife import Memory
from memlife.errors import InputError
from memlife.inferred import InferredSubjects
from memlife.ledger import AccessLedger
from memlife.model import content_sha256
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[2]
NS = "/users/u1/facts"


@pytest.fixture()
def db(home: Path) -> Path:
    return home / "memlife.db"


@pytest.fixture()
def mem(db: Path, home: Path) -> Iterator[LongTermMemory]:
    store = SqliteStore(db)
    m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    yield m
    m.close()
    store.close()


def erase_in_another_process(db: Path, actor: str, ids: list[str] | None = None) -> None:
    """A ``delete all my data`` job in another interpreter: erases ``ids`` (every record of
    ``actor`` when None) from the same store file, and commits before it returns."""
    script = textwrap.dedent(f"""
        from memlife.erase import erase
        from memlife.stores.base import iter_shard
        from memlife.stores.sqlite import SqliteStore
        s = SqliteStore({str(db)!r})
        ids = {ids!r}
        if ids is None:
            ids = [r.id for ns in s.list_namespaces({actor!r})
                   for p in iter_shard(s, {actor!r}, ns) for r in p.records]
        erase(s, {actor!r}, ids=ids)
        s.close()
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO, env=env, timeout=300)


def rows(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # a table never created holds nothing
        return []
    finally:
        con.close()


# -- 1: an erasure committed after remember's insert, before its subject key is written ---


def test_an_erasure_after_remembers_insert_leaves_no_subject_words(
    mem: LongTermMemory, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """remember wrote the inferred subject key (a few of the fact's words) after its insert,
    outside its transaction, and never looked again: an erasure committing in between had
    already dropped the keys it knew, and the erased words stayed in inferred_subjects."""
    fact = "Diagnosed with bipolar disorder in March"
    mem.remember("u1", NS, None, "Prefers tea over coffee")
    real_put = InferredSubjects.put

    def put_after_an_erasure(self: InferredSubjects, *a: Any, **kw: Any) -> None:
        erase_in_another_process(db, "u1")  # the erasure commits in the window
        real_put(self, *a, **kw)

    monkeypatch.setattr(InferredSubjects, "put", put_after_an_erasure)
    got = mem.remember("u1", NS, None, fact)
    monkeypatch.setattr(InferredSubjects, "put", real_put)

    assert rows(db, "SELECT count(*) FROM records WHERE actor_id='u1'") == [(0,)]
    assert (got.record_id,) in rows(db, "SELECT record_id FROM tombstones")
    left = rows(db, "SELECT record_id, subject FROM inferred_subjects")
    assert not [r for r in left if r[0] == got.record_id], left
    assert not [r for r in left if any(w in r[1] for w in ("bipolar", "diagnosed"))], left
    assert mem.recall("u1", "bipolar disorder diagnosis", threshold=-1.0) == []


# -- 2: set_status(active) re-embedding a record an erasure removed meanwhile -------------


def test_reactivation_racing_an_erasure_keeps_no_vector_of_the_erased_text(
    mem: LongTermMemory, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """set_status([id], "active") embedded the record into the shard after its status write,
    with no look for tombstones: an erasure committing in between (it drops the vector
    first) had the erased text's vector and token codes stored again, for good."""
    fact = "Was treated for opioid addiction at Ridgeview clinic"
    rid = mem.remember("u1", NS, "health", fact).record_id
    mem.remember("u1", NS, "drink", "Prefers tea over coffee")
    mem.recall("u1", "tea")  # the shard is loaded
    assert mem.forget([rid]) == [rid]  # "forget that" ...
    real = SqliteStore.set_status_unless_held

    def status_then_an_erasure(self: SqliteStore, *a: Any, **kw: Any) -> Any:
        out = real(self, *a, **kw)
        erase_in_another_process(db, "u1", [rid])  # the erasure commits in the window
        return out

    monkeypatch.setattr(SqliteStore, "set_status_unless_held", status_then_an_erasure)
    mem.set_status([rid], "active")  # ... then "undo"
    monkeypatch.setattr(SqliteStore, "set_status_unless_held", real)

    assert rows(db, "SELECT count(*) FROM records WHERE id=?", rid) == [(0,)]
    assert rows(db, "SELECT count(*) FROM tombstones WHERE record_id=?", rid) == [(1,)]
    sha = content_sha256(fact)
    assert rows(db, "SELECT model_id FROM embeddings WHERE content_sha256=?", sha) == []
    assert [h.record.content for h in mem.recall("u1", "opioid addiction clinic")] == []


# -- 3: a naive `at` on the refresh path; a naive time already stored ---------------------


def test_a_naive_at_is_refused_on_the_duplicate_path_too(db: Path, home: Path) -> None:
    """The refresh wrote a naive ``at`` unchecked (model_copy validates nothing): the record
    then held a naive time that every aware comparison (LangGraph get/search) crashed on."""
    with Memory(f"sqlite:///{db}", ledger=home / "ledger") as m:
        # first said before the times below: a refresh never moves recency back (session 27)
        first = m.remember(
            "Drinks only green tea", actor="u1", at=datetime(2026, 11, 30, tzinfo=UTC)
        )
        before = m.store.get(first.id)
        with pytest.raises(InputError, match=r"\bat\b.*time zone"):
            m.remember("Drinks only green tea", actor="u1", at=datetime(2026, 12, 1, 9, 0))
        assert m.store.get(first.id) == before  # nothing written
        # an aware time in another zone is kept as the same instant, in UTC
        plus2 = datetime(2026, 12, 1, 11, 0, tzinfo=timezone(timedelta(hours=2)))
        assert not m.remember("Drinks only green tea", actor="u1", at=plus2).created
        after = m.store.get(first.id)
        assert after is not None and after.last_accessed_at == plus2
        assert after.last_accessed_at.utcoffset() == timedelta(0)


def test_a_naive_time_already_stored_does_not_crash_the_users_reads(db: Path, home: Path) -> None:
    """Rows written before the fix hold naive times: LangGraph's get, search and put over
    such a record read them as UTC instead of raising TypeError."""
    pytest.importorskip("langgraph.store.base")
    from memlife.integrations.langgraph import MemlifeStore

    with Memory(f"sqlite:///{db}", ledger=home / "ledger") as m:
        first = m.remember("Drinks only green tea", actor="u1")
        con = sqlite3.connect(db)
        with con:
            con.execute(
                "UPDATE records SET last_accessed_at=?, last_verified_at=? WHERE id=?",
                ("2026-12-01T09:00:00", "2026-12-01T09:00:00", first.id),
            )
        con.close()
        lg = MemlifeStore(m)
        item = lg.get(("users", "u1", "facts"), first.id)
        assert item is not None and item.value == {"content": "Drinks only green tea"}
        assert item.updated_at.tzinfo is not None
        assert [i.key for i in lg.search(("users", "u1"))] == [first.id]
        assert [i.key for i in lg.search(("users", "u1"), query="green tea")] == [first.id]
        lg.put(("users", "u1", "facts"), first.id, {"content": "Drinks only black tea"})
        again = lg.get(("users", "u1", "facts"), first.id)
        assert again is not None and again.value == {"content": "Drinks only black tea"}


# -- 4: bad arguments are input errors naming the argument, and store nothing -------------

BAD: list[tuple[str, Callable[[Memory], Any], str]] = [
    ("remember namespace=5", lambda m: m.remember("likes tea", actor="u1", namespace=5), "namespace"),
    ("remember namespace=b''", lambda m: m.remember("likes tea", actor="u1", namespace=b"/x"), "namespace"),
    ("remember at naive", lambda m: m.remember("likes tea", actor="u1", at=datetime(2026, 1, 1)), r"\bat\b"),
    ("remember at text", lambda m: m.remember("likes tea", actor="u1", at="2026-01-01"), r"\bat\b"),
    ("remember at number", lambda m: m.remember("likes tea", actor="u1", at=1767225600), r"\bat\b"),
    ("remember source", lambda m: m.remember("likes tea", actor="u1", source="bogus"), "source"),
    ("remember memory_type", lambda m: m.remember("likes tea", actor="u1", memory_type="x"), "memory_type"),
    ("remember actor=5", lambda m: m.remember("likes tea", actor=5), "actor"),
    ("forget None", lambda m: m.forget(None, actor="u1"), "ids"),
    ("forget 5", lambda m: m.forget(5, actor="u1"), "ids"),
    ("forget [5]", lambda m: m.forget([5], actor="u1"), "ids"),
    ("forget b''", lambda m: m.forget(b"m-1", actor="u1"), "ids"),
    ("recall namespace=5", lambda m: m.recall("tea", actor="u1", namespace=5), "namespace"),
    ("get id=5", lambda m: m.get(5, actor="u1"), "record_id"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "name"), [(c, n) for _, c, n in BAD], ids=[b[0] for b in BAD])
def test_bad_arguments_are_input_errors_naming_the_argument(
    db: Path, home: Path, call: Callable[[Memory], Any], name: str
) -> None:
    with Memory(f"sqlite:///{db}", ledger=home / "ledger") as m:
        with pytest.raises(InputError, match=name):
            call(m)
        assert m.recall("tea", actor="u1", threshold=-1.0) == []  # nothing stored
    assert rows(db, "SELECT count(*) FROM records") in ([(0,)], [])


def test_the_engines_own_arguments_are_checked_too(mem: LongTermMemory) -> None:
    """LongTermMemory (Memory.long_term) is public too: the same checks, the same names."""
    rid = mem.remember("u1", NS, None, "Has a dog named Rex.").record_id
    for call, name in [
        (lambda: mem.remember("u1", 5, None, "x"), "namespace"),  # type: ignore[arg-type]
        (lambda: mem.remember("u1", NS, None, "x", source="nope"), "source"),
        (lambda: mem.remember("u1", NS, None, "x", at=datetime(2026, 1, 1)), r"\bat\b"),
        (lambda: mem.set_status(None, "active"), "record_ids"),  # type: ignore[arg-type]
        (lambda: mem.set_status([rid], "gone"), "status"),
        (lambda: mem.forget(5), "record_ids"),  # type: ignore[arg-type]
        (lambda: mem.recall("u1", "dog", namespace=5), "namespace"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(InputError, match=name):
            call()
    (hit,) = mem.recall("u1", "dog")
    assert hit.record.id == rid and hit.record.access_count == 0


# -- the session's second review: a status write that breaks an invariant ------------------
def test_a_status_write_cannot_leave_a_record_superseded_by_nothing(
    mem: LongTermMemory,
) -> None:
    """`set_status([id], "superseded")` with no replacement, or one that does not exist, is
    another actor's, or is the record itself, left a record superseded by nothing
    (invariant 3); "retained" pinned a record as a hold does, with no receipt.
    Each is an InputError now, and nothing is written."""
    ns = "/users/u1/facts"
    a = mem.remember("u1", ns, None, "Lives in Lisbon.").record_id
    b = mem.remember("u1", ns, None, "Moved to Porto in May.").record_id
    other = mem.remember("u2", "/users/u2/facts", None, "Likes jazz.").record_id
    for replaced_by in (None, "nope", other, a):
        with pytest.raises(InputError):
            mem.set_status([a], "superseded", replaced_by=replaced_by)
    with pytest.raises(InputError):
        mem.set_status([a], "retained")
    with pytest.raises(InputError):
        mem.set_status([a], "pending_delete", replaced_by=b)
    assert mem.store.get(a).status.value == "active"
    assert mem.set_status([a], "superseded", replaced_by=b) == [a]
    assert mem.store.get(a).provenance.replaced_by == b
