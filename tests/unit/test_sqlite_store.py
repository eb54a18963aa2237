"""SqliteStore: keyset paging stays exact while other connections insert and delete."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.model import MemoryRecord, MemoryType, Status, plan_view
from memlife.stores.base import BadPageToken, iter_shard
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 1, tzinfo=UTC)
ACTOR, NS = "u-1", "/users/u-1/facts"


def rec(rid: str, actor: str = ACTOR, ns: str = NS, **kw) -> MemoryRecord:
    base = dict(
        id=rid,
        actor_id=actor,
        namespace=ns,
        memory_type=MemoryType.semantic,
        content=f"Fact number {rid}.",
        created_at=NOW - timedelta(days=3),
        owner="team",
    )
    base.update(kw)
    return MemoryRecord(**base)


@pytest.fixture()
def db(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "m.db")
    yield s
    s.close()


def all_ids(store: SqliteStore, page_size: int, actor: str = ACTOR, ns: str = NS) -> list[str]:
    return [r.id for p in iter_shard(store, actor, ns, page_size=page_size) for r in p.records]


def test_round_trip_and_upsert(db: SqliteStore) -> None:
    r = rec(
        "m-1",
        subject="home",
        expires_at=NOW + timedelta(days=2),
        provenance={"source_event": "e", "supersedes": ["m-0"]},
    )
    assert db.put_many([r]).succeeded == ["m-1"]
    assert db.get("m-1") == r
    changed = r.model_copy(update={"content": "Changed."})
    db.put_many([changed])
    assert db.get("m-1").content == "Changed."
    assert db.count() == 1
    assert db.get("missing") is None


@pytest.mark.parametrize("page_size", [1, 2, 3, 7, 100])
def test_pages_cover_shard_once_in_id_order(db: SqliteStore, page_size: int) -> None:
    ids = [f"m-{i:03d}" for i in range(23)]
    db.put_many([rec(i) for i in reversed(ids)])
    db.put_many([rec("x-1", actor="u-2"), rec("x-2", ns="/users/u-1/other")])
    got = all_ids(db, page_size)
    assert got == ids
    pages = list(iter_shard(db, ACTOR, NS, page_size=page_size))
    assert all(len(p.records) <= page_size for p in pages)
    assert pages[-1].next_token is None
    assert all(p.next_token for p in pages[:-1])


def test_empty_shard(db: SqliteStore) -> None:
    p = db.page(ACTOR, NS, page_size=5)
    assert p.records == [] and p.next_token is None


def test_exact_multiple_has_no_empty_trailing_page(db: SqliteStore) -> None:
    db.put_many([rec(f"m-{i}") for i in range(6)])
    pages = list(iter_shard(db, ACTOR, NS, page_size=3))
    assert [len(p.records) for p in pages] == [3, 3]


def test_bad_tokens(db: SqliteStore) -> None:
    db.put_many([rec(f"m-{i}") for i in range(5)])
    tok = db.page(ACTOR, NS, page_size=2).next_token
    with pytest.raises(BadPageToken):
        db.page(ACTOR, "/users/u-1/other", page_size=2, token=tok)
    with pytest.raises(BadPageToken):
        db.page("u-2", NS, page_size=2, token=tok)
    with pytest.raises(BadPageToken):
        db.page(ACTOR, NS, page_size=2, token="!!not-a-token")
    with pytest.raises(ValueError):
        db.page(ACTOR, NS, page_size=0)


def test_status_filter(db: SqliteStore) -> None:
    db.put_many(
        [rec(f"m-{i}", status=Status.superseded if i % 2 else Status.active) for i in range(10)]
    )
    active = [
        r.id
        for p in iter_shard(db, ACTOR, NS, page_size=2, statuses=[Status.active])
        for r in p.records
    ]
    assert active == [f"m-{i}" for i in range(0, 10, 2)]


def test_page_views_match_records(db: SqliteStore) -> None:
    db.put_many(
        [
            rec(
                f"m-{i}",
                subject="s",
                last_accessed_at=NOW,
                access_count=i,
                content="Does not eat meat." if i % 2 else "Eats meat.",
            )
            for i in range(7)
        ]
    )
    token, views = None, []
    while True:
        page, token = db.page_views(ACTOR, NS, page_size=3, token=token)
        views += page
        if token is None:
            break
    assert views == [plan_view(r) for r in db.iter_all()]


def _interleaved(db: SqliteStore, writer: SqliteStore, page_size: int, seed: int) -> None:
    """Between every two pages the writer inserts before and after the cursor and deletes."""
    rng = random.Random(seed)
    stable = [f"m-{i:04d}" for i in range(0, 400, 4)]  # never touched by the writer
    churn = [f"m-{i:04d}" for i in range(2, 400, 4)]  # deleted at some point
    db.put_many([rec(i) for i in stable + churn])
    seen: list[str] = []
    token = None
    n = 0
    while True:
        page = db.page(ACTOR, NS, page_size=page_size, token=token)
        seen += [r.id for r in page.records]
        # concurrent changes: new ids anywhere in the key range, deletions of churn ids
        writer.put_many([rec(f"m-{rng.randrange(400):04d}{'abc'[n % 3]}-{n}") for _ in range(3)])
        if churn:
            writer.delete_many([churn.pop(rng.randrange(len(churn)))])
        n += 1
        token = page.next_token
        if token is None:
            break
    assert len(seen) == len(set(seen)), "a record was served twice"
    assert seen == sorted(seen), "pages went backwards"
    missing = set(stable) - set(seen)
    assert not missing, f"records present throughout were skipped: {sorted(missing)[:5]}"


@pytest.mark.parametrize("page_size", [1, 3, 10])
def test_paging_under_interleaved_inserts_and_deletes(tmp_path: Path, page_size: int) -> None:
    db = SqliteStore(tmp_path / "m.db")
    writer = SqliteStore(tmp_path / "m.db")  # a second connection to the same file
    try:
        _interleaved(db, writer, page_size, seed=page_size)
    finally:
        writer.close()
        db.close()


@pytest.mark.parametrize("page_size", [2, 5])
def test_paging_while_another_thread_writes(tmp_path: Path, page_size: int) -> None:
    path = tmp_path / "m.db"
    db = SqliteStore(path)
    stable = [f"m-{i:04d}" for i in range(0, 600, 3)]
    churn = [f"m-{i:04d}" for i in range(1, 600, 3)]
    db.put_many([rec(i) for i in stable + churn])
    stop = threading.Event()
    writes = {"inserted": 0, "deleted": 0}
    errors: list[BaseException] = []

    def writer() -> None:
        w = SqliteStore(path)
        rng = random.Random(1)
        try:
            k = 0
            while not stop.is_set():
                w.put_many([rec(f"m-{rng.randrange(600):04d}z{k}")])
                writes["inserted"] += 1
                if churn:
                    w.delete_many([churn.pop(rng.randrange(len(churn)))])
                    writes["deleted"] += 1
                k += 1
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            w.close()

    t = threading.Thread(target=writer)
    t.start()
    try:
        seen: list[str] = []
        for _ in range(3):  # several full passes while the writer keeps going
            seen = []
            token = None
            while True:
                page = db.page(ACTOR, NS, page_size=page_size, token=token)
                seen += [r.id for r in page.records]
                token = page.next_token
                if token is None:
                    break
            assert len(seen) == len(set(seen))
            assert not set(stable) - set(seen)
    finally:
        stop.set()
        t.join(10)
        db.close()
    assert not errors, errors
    assert writes["inserted"] > 0 and writes["deleted"] > 0, "the writer never ran concurrently"


def test_set_status_and_delete_report_missing(db: SqliteStore) -> None:
    db.put_many([rec("m-1"), rec("m-2")])
    at = NOW
    res = db.set_status(
        ["m-1", "gone"], Status.superseded, replaced_by="m-2", policy_version="p1", at=at
    )
    assert res.succeeded == ["m-1"] and res.missing == ["gone"]
    r = db.get("m-1")
    assert r.status is Status.superseded
    assert r.provenance.replaced_by == "m-2" and r.provenance.policy_version == "p1"
    assert r.status_changed_at == at
    res = db.delete_many(["m-2", "m-2", "nope"])
    assert res.succeeded == ["m-2"] and res.missing == ["m-2", "nope"]


def test_list_actors_and_namespaces(db: SqliteStore) -> None:
    db.put_many(
        [
            rec("a", actor="u-2", ns="/b"),
            rec("b", actor="u-1", ns="/z"),
            rec("c", actor="u-1", ns="/a"),
        ]
    )
    assert list(db.list_actors()) == ["u-1", "u-2"]
    assert db.list_namespaces("u-1") == ["/a", "/z"]


def test_insert_new_checks_tombstones_per_actor_content_and_sources(tmp_path: Path) -> None:
    """insert_new queries tombstones only for actors that have some (or records naming
    sources): each refusal below must still come out, and nothing else may be refused.
    Sources too are the actor's own: record ids are not unique across actors over time (an
    id an erasure freed can be taken by another actor), so u-1's erased m-erased does not
    refuse u-2's record naming an m-erased of its own (adversarial review)."""
    from memlife import tombstones
    from memlife.model import Provenance

    store = SqliteStore(tmp_path / "s.db")
    erased = rec("m-erased", content="Lives at 12 Elm Street.")
    tombstones.add(store, [erased])
    batch = [
        rec("m-1", content="lives at 12 elm street"),  # same text once folded
        rec("m-2", content="Lives at 12 Elm Street."),  # same text, exact
        rec("m-3", actor="u-2", ns="/users/u-2/facts", content="Lives at 12 Elm Street."),
        rec(
            "m-4",
            actor="u-2",
            ns="/users/u-2/facts",
            provenance=Provenance(supersedes=["m-erased"]),
        ),
        rec("m-5"),
        rec("m-6", provenance=Provenance(supersedes=["m-erased"])),  # u-1's own source
        # a tombstoned id with other content, created after the erasure (audit 49vi)
        rec("m-erased", content="Something new.", created_at=datetime.now(UTC)),
    ]
    res = store.insert_new(batch)
    codes = {f.id: f.code for f in res.failed}
    assert codes == {"m-1": "ERASED_CONTENT", "m-2": "ERASED_CONTENT", "m-6": "ERASED_SOURCE"}
    assert sorted(res.succeeded) == ["m-3", "m-4", "m-5", "m-erased"]
    assert store.get("m-3") is not None and store.get("m-1") is None
    store.close()


def test_none_still_binds_as_sql_null_with_the_store_s_adapter(tmp_path: Path) -> None:
    """The store registers an adapter for None (a write-speed fix): a None must still be
    NULL in SQL, for IS NULL filters, for NOT NULL constraints and on the way back."""
    import sqlite3

    assert (type(None), sqlite3.PrepareProtocol) in sqlite3.adapters
    con = sqlite3.connect(tmp_path / "n.db")
    con.execute("CREATE TABLE t (a TEXT, b TEXT NOT NULL)")
    con.execute("INSERT INTO t VALUES (?, ?)", (None, "x"))
    assert con.execute("SELECT count(*) FROM t WHERE a IS NULL").fetchone() == (1,)
    assert con.execute("SELECT a, typeof(a) FROM t").fetchone() == (None, "null")
    with pytest.raises(sqlite3.IntegrityError):
        con.execute("INSERT INTO t VALUES (?, ?)", ("y", None))
    with SqliteStore(tmp_path / "s.db") as store:
        store.put_many([rec("m-1", subject=None)])
        raw = store.connection.execute("SELECT typeof(subject) FROM records").fetchone()
        assert raw == ("null",) and store.get("m-1").subject is None  # type: ignore[union-attr]


def test_insert_rows_refuses_stored_ids_and_writes_the_rest_once(tmp_path: Path) -> None:
    """insert_rows first writes as if every id were new; a stored id makes it undo that
    attempt whole and refuse just the stored ids (ID_EXISTS), never overwriting them. The
    rows before and after the stored one in the batch are written exactly once."""
    from memlife.stores.sqlite import record_to_row

    with SqliteStore(tmp_path / "s.db") as store:
        store.put_many([rec("m-2", content="Stored first.")])
        batch = [rec(f"m-{i}", content=f"New text {i}.") for i in range(1, 5)]
        result = store.insert_rows([record_to_row(r) for r in batch])
        assert sorted(result.succeeded) == ["m-1", "m-3", "m-4"]
        assert [(f.id, f.code) for f in result.failed] == [("m-2", "ID_EXISTS")]
        assert store.get("m-2").content == "Stored first."  # type: ignore[union-attr]
        rows = store.connection.execute("SELECT id FROM records ORDER BY id").fetchall()
        assert rows == [("m-1",), ("m-2",), ("m-3",), ("m-4",)]
        # a second copy of an id inside one batch: the first is written, the second refused
        again = store.insert_rows([record_to_row(rec("m-5")), record_to_row(rec("m-5"))])
        assert again.succeeded == ["m-5"] and [f.code for f in again.failed] == ["ID_EXISTS"]
