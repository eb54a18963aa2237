"""Session 29 review of the online library: a duplicate refresh never throws away an explicit
save (lifetimes), refreshes are atomic under concurrent writers (real processes, one SQLite
file), and bad options, store URLs, actor ids and glob namespaces are refused up front."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife import Memory
from memlife.errors import InputError
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, MemoryType, Source, Status, utcnow
from memlife.online.memory import LongTermMemory
from memlife.settings import store_url_problem
from memlife.stores import open_store
from memlife.stores.sqlite import SqliteStore

PEN = "I am allergic to penicillin."
TEAL = "The user's favourite colour is teal."
NS = "/users/u1/facts"


@pytest.fixture()
def url(home: Path) -> str:
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'm.db'}"


@pytest.fixture()
def memory(url: str, home: Path) -> Iterator[Memory]:
    with Memory(url, ledger=home / "ledger") as m:
        yield m


def stored(m: Memory, rid: str) -> MemoryRecord:
    rec = m.store.get(rid)
    assert rec is not None
    return rec


# -- 1: a duplicate refresh keeps the longer lifetime ---------------------------------------


def test_semantic_save_of_a_year_old_episodic_fact_is_not_thrown_away(memory: Memory) -> None:
    now = utcnow()
    e = memory.remember(PEN, actor="u1", memory_type="episodic", at=now - timedelta(days=364))
    s = memory.remember(PEN, actor="u1", memory_type="semantic", source="user_confirmed")
    assert e.created and not s.created and s.id == e.id  # still one record of the text
    rec = stored(memory, s.id)
    assert rec.memory_type is MemoryType.semantic and rec.expires_at is None
    for later in (2, 400, 5000):  # what the nightly run asks: never past its deadline
        assert not memory.long_term.expired(rec, now + timedelta(days=later))
    assert rec.access_count == 1 and rec.last_verified_at is not None


def test_episodic_restatement_lives_as_long_as_a_new_episodic_record(memory: Memory) -> None:
    now = utcnow()
    e = memory.remember(PEN, actor="u1", memory_type="episodic", at=now - timedelta(days=364))
    memory.remember(PEN, actor="u1", memory_type="episodic")
    rec = stored(memory, e.id)
    assert rec.memory_type is MemoryType.episodic  # still an event, dated as it was
    assert rec.created_at < now - timedelta(days=363)
    assert not memory.long_term.expired(rec, now + timedelta(days=300))
    assert memory.long_term.expired(rec, now + timedelta(days=366))


def test_a_longer_lived_record_is_never_shortened_or_retyped(memory: Memory) -> None:
    s = memory.remember(PEN, actor="u1", memory_type="semantic")
    memory.remember(PEN, actor="u1", memory_type="episodic")
    rec = stored(memory, s.id)
    assert rec.memory_type is MemoryType.semantic and rec.expires_at is None
    p = memory.remember("Deploy with make release.", actor="u1", memory_type="procedural")
    store = memory.store
    store.put_many(
        [stored(memory, p.id).model_copy(update={"expires_at": utcnow() + timedelta(days=3)})]
    )
    memory.remember("Deploy with make release.", actor="u1", memory_type="semantic")
    rec = stored(memory, p.id)
    # a type without a TTL: only the explicit expiry goes, the stricter type stays
    assert rec.memory_type is MemoryType.procedural and rec.expires_at is None


# -- 2: refreshes are atomic -----------------------------------------------------------------


def _remember_many(home: str, url: str, n: int, start: Any, done: Any) -> None:
    os.environ["MEMLIFE_HOME"] = home
    try:
        with Memory(url, ledger=Path(home) / "ledger") as m:
            start.wait(timeout=120)  # both processes refresh at once
            done.put(sum(not m.remember(TEAL, actor="u1").created for _ in range(n)))
    except Exception as e:  # reported to the test, not lost in the child
        done.put(repr(e))


def test_two_processes_refreshing_one_fact_lose_no_access(url: str, home: Path) -> None:
    with Memory(url, ledger=home / "ledger") as m:
        rid = m.remember(TEAL, actor="u1").id
    ctx = mp.get_context("spawn")
    n = 200
    start, done = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_remember_many, args=(str(home), url, n, start, done)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    results = [done.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert results == [n, n]  # every call was a refresh of the one record
    with SqliteStore(url[len("sqlite:///") :]) as store:
        rec = store.get(rid)
        assert rec is not None and rec.access_count == 2 * n
        assert [r.id for p in [store.page("u1", NS, page_size=10)] for r in p.records] == [rid]


class WriterBeforeRefresh(SqliteStore):
    """Another connection (another process) writes right before the refresh's own write:
    after remember has read the record and decided what to change."""

    other: Callable[[], None] | None = None

    def refresh_active(self, *args: Any, **kw: Any) -> bool:
        fn, self.other = self.other, None
        if fn is not None:
            fn()
        return bool(super().refresh_active(*args, **kw))


def _set_expiry(path: Path, rid: str, when: datetime) -> Callable[[], None]:
    def write() -> None:  # what a LangGraph put with a TTL does in another process
        with SqliteStore(path) as other:
            rec = other.get(rid)
            assert rec is not None
            other.put_many([rec.model_copy(update={"expires_at": when, "access_count": 7})])

    return write


@pytest.fixture()
def racing(home: Path) -> Iterator[tuple[WriterBeforeRefresh, LongTermMemory]]:
    home.mkdir(parents=True, exist_ok=True)
    store = WriterBeforeRefresh(home / "m.db")
    m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    yield store, m
    m.close()
    store.close()


def test_a_refresh_never_reverts_a_concurrent_writers_expiry_or_count(
    home: Path, racing: tuple[WriterBeforeRefresh, LongTermMemory]
) -> None:
    store, m = racing
    path = home / "m.db"
    rid = m.remember("u1", NS, None, TEAL).record_id
    when = (utcnow() + timedelta(days=30)).replace(microsecond=0)
    store.other = _set_expiry(path, rid, when)
    assert not m.remember("u1", NS, None, TEAL).created
    rec = store.get(rid)
    assert rec is not None
    assert rec.expires_at == when and rec.access_count == 8  # theirs, plus our one


def test_a_lifetime_change_is_redone_over_a_concurrent_expiry(
    home: Path, racing: tuple[WriterBeforeRefresh, LongTermMemory]
) -> None:
    """The semantic restatement decided "no expiry" on its read; another writer then set a
    3-day expiry. The refresh must neither lose that write's count nor leave the fact to
    expire: it reads again and extends over the new expiry."""
    store, m = racing
    path = home / "m.db"
    old = utcnow() - timedelta(days=300)
    rid = m.remember("u1", NS, None, PEN, memory_type="episodic", at=old).record_id
    store.other = _set_expiry(path, rid, utcnow() + timedelta(days=3))
    assert not m.remember("u1", NS, None, PEN, memory_type="semantic").created
    rec = store.get(rid)
    assert rec is not None and rec.access_count == 8
    assert rec.memory_type is MemoryType.semantic and rec.expires_at is None


# -- 3: options checked up front --------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"threshold": 5}, "threshold"),
        ({"threshold": True}, "threshold"),
        ({"threshold": float("nan")}, "threshold"),
        ({"near_duplicate": "x"}, "near_duplicate"),
        ({"near_duplicate": -1.5}, "near_duplicate"),
    ],
)
def test_bad_memory_options_are_input_errors_naming_them(
    url: str, home: Path, options: dict[str, Any], named: str
) -> None:
    with pytest.raises(InputError, match=named):
        Memory(url, ledger=home / "ledger", **options)


def test_a_store_that_is_no_store_is_refused(home: Path) -> None:
    for bad in (123, b"sqlite:///x.db", Path("m.db")):
        with pytest.raises(InputError, match="store"):
            Memory(bad, ledger=home / "ledger")  # type: ignore[arg-type]


def test_long_term_memory_options_are_checked(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "m.db") as store:
        ledger = AccessLedger(home / "ledger")
        for options, named in (
            ({"page_size": 0}, "page_size"),
            ({"refresh_seconds": -1}, "refresh_seconds"),
            ({"content_max_bytes": 1.5}, "content_max_bytes"),
            ({"threshold": "0.3"}, "threshold"),
        ):
            with pytest.raises(InputError, match=named):
                LongTermMemory(store, ledger=ledger, **options)
        ok = LongTermMemory(store, ledger=ledger, threshold=-1, near_duplicate=1)
        assert (ok.threshold, ok.near_duplicate) == (-1, 1)


# -- 4: a sqlite URL with a query string or fragment ----------------------------------------


@pytest.mark.parametrize("tail", ["?mode=ro", "?", "#x", "?cache=shared#f"])
def test_sqlite_url_with_a_query_or_fragment_is_refused(home: Path, tail: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{home / 'm.db'}{tail}"
    assert store_url_problem(url) is not None  # what the CLI checks
    with pytest.raises(ValueError, match="query string or fragment"):
        open_store(url)
    with pytest.raises(ValueError, match="query string or fragment"):
        Memory(url, ledger=home / "ledger")
    assert sorted(p.name for p in home.iterdir()) == []  # no file 'm.db?mode=ro' made
    assert store_url_problem(f"sqlite:///{home / 'm.db'}") is None


# -- 6: forget returns each id once -----------------------------------------------------------


def test_forget_returns_each_changed_id_once(memory: Memory) -> None:
    a = memory.remember(PEN, actor="u1")
    b = memory.remember("I live in Lisbon.", actor="u1")
    assert memory.forget([a.id, a.id, b.id, a.id], actor="u1") == [a.id, b.id]
    c = memory.remember("I play the viola.", actor="u1")
    assert memory.long_term.forget([c.id, c.id]) == [c.id]
    assert stored(memory, c.id).status is Status.pending_delete


# -- 7: actor ids that would name another actor ---------------------------------------------


BAD_ACTORS = [
    "u1\u200b",  # zero-width space (Cf)
    "\u200bu1",
    "u1\u00ad",  # soft hyphen (Cf)
    "u1 ",
    " u1",
    "u1\n",
    "u\x001",  # Cc
    "u\t1",
    "u1\u2028",  # line separator
    "ｕ1",  # fullwidth: NFKC 'u1'
    "a/b",
    "u1/../u2",
    "/",
]


@pytest.mark.parametrize("actor", BAD_ACTORS)
def test_actor_ids_that_look_like_another_are_refused(memory: Memory, actor: str) -> None:
    with pytest.raises(InputError, match="actor") as err:
        memory.remember("I collect stamps.", actor=actor)
    assert actor.strip() not in str(err.value) or actor.strip() in ("", "/")  # never quoted
    with pytest.raises(InputError, match="actor"):
        memory.recall("stamps", actor=actor)
    with pytest.raises(InputError, match="actor"):
        memory.long_term.remember(actor, NS, None, "I collect stamps.")
    assert list(memory.store.list_actors()) == []  # nothing written


def test_plain_actor_ids_still_work(memory: Memory) -> None:
    for actor in ("u1", "U1", "user 1", "Zoë", "user@example.com", "工程师-7"):
        r = memory.remember("I collect stamps.", actor=actor, namespace="/users/x/facts")
        assert r.created and stored(memory, r.id).actor_id == actor
        assert [h.id for h in memory.recall("stamps", actor=actor, threshold=-1)] == [r.id]


# -- 8: glob characters in a namespace ------------------------------------------------------


@pytest.mark.parametrize(
    "ns", ["/users/*/facts", "/users/u1/**", "/users/u1/fa*ts", "/*", "/users/u1/*x"]
)
def test_glob_namespaces_are_refused(memory: Memory, ns: str) -> None:
    with pytest.raises(InputError, match="namespace"):
        memory.remember("I collect stamps.", actor="u1", namespace=ns)
    with pytest.raises(InputError, match="namespace"):
        memory.recall("stamps", actor="u1", namespace=ns)
    assert list(memory.store.list_actors()) == []


def test_a_star_namespace_stored_before_the_rule_stays_readable(memory: Memory) -> None:
    old = MemoryRecord(
        id="m-old-star",
        actor_id="u1",
        namespace="/users/*/facts",
        memory_type=MemoryType.semantic,
        content="I collect stamps.",
        source=Source.user_stated,
        created_at=utcnow() - timedelta(days=30),
    )
    memory.store.put_many([old])
    hits = memory.recall("stamps", actor="u1", namespace="/users/*/facts", threshold=-1)
    assert [h.id for h in hits] == ["m-old-star"]
    with pytest.raises(InputError, match="namespace"):  # another actor has none such
        memory.recall("stamps", actor="u2", namespace="/users/*/facts")
