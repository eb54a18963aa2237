"""Guards left untested by the thirty-eighth audit (session 38): SQLite and AgentCore, one protocol.

A differential test: the embedded ``SqliteStore`` and the ``AgentCoreStore`` (the real boto3
client against ``tests.fakes.agentcore.FakeAgentCore``, the sidecar on moto DynamoDB, the
harness of ``tests/contract/test_store_contract.py``) are driven with the same calls and
their answers compared field by field. Documented differences are left out of the
comparison: the order of a page (AgentCore's, not by id), a namespace or actor still
listed after its last record went, no conditional delete of a held record, and the
de-duplication of ids repeated within one call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlife.model import MemoryRecord, MemoryType, Provenance, RetentionClass, Source, Status
from memlife.stores.agentcore import AgentCoreStore
from memlife.stores.base import BatchResult, MemoryStore, iter_shard
from memlife.stores.sqlite import SqliteStore
from tests.fakes.agentcore import AgentCoreHarness

T0 = datetime(2026, 1, 2, 10, 0, 0, 123456, tzinfo=UTC)
AT = datetime(2026, 3, 1, 12, 0, 0, 7, tzinfo=timezone(timedelta(hours=5)))


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture
def pair(harness: AgentCoreHarness, tmp_path: Any) -> Iterator[tuple[SqliteStore, AgentCoreStore]]:
    s = SqliteStore(tmp_path / "m.db")
    yield s, harness.store()
    s.close()


def rec(rid: str, actor: str = "u-1", ns: str = "/users/u-1/prefs", **kw: Any) -> MemoryRecord:
    fields: dict[str, Any] = {
        "id": rid,
        "actor_id": actor,
        "namespace": ns,
        "memory_type": MemoryType.semantic,
        "content": f"fact {rid}",
        "created_at": T0,
    }
    fields.update(kw)
    return MemoryRecord(**fields)


def outcome(res: BatchResult) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """A BatchResult as comparable data: succeeded, missing, failed (id, code)."""
    return sorted(res.succeeded), sorted(res.missing), sorted((f.id, f.code) for f in res.failed)


def shard(
    store: MemoryStore,
    actor: str,
    ns: str,
    page_size: int = 500,
    statuses: Sequence[Status] | None = None,
) -> list[MemoryRecord]:
    """Every record of a shard, each page no larger than asked, none served twice; sorted
    by id (AgentCore's order within a shard is its own: docs/agentcore.md)."""
    out: list[MemoryRecord] = []
    for page in iter_shard(store, actor, ns, page_size=page_size, statuses=statuses):
        assert len(page.records) <= page_size
        out += page.records
    ids = [r.id for r in out]
    assert len(ids) == len(set(ids)), f"a record served twice: {ids}"
    return sorted(out, key=lambda r: r.id)


def same(sql: SqliteStore, ac: AgentCoreStore, what: str, call: Any) -> Any:
    """``call(store)`` on both stores; the answers must be equal. Returns SQLite's."""
    a, b = call(sql), call(ac)
    assert a == b, f"{what}: sqlite {a!r} != agentcore {b!r}"
    return a


def fields_of(r: MemoryRecord | None) -> dict[str, Any] | None:
    """Every field; timestamps compare as instants (SQLite keeps a ``set_status`` time in
    the zone it was given, AgentCore writes UTC: the same instant)."""
    return None if r is None else r.model_dump()


# -- a scripted differential sequence -------------------------------------------------------
def seeds() -> list[MemoryRecord]:
    cet = timezone(timedelta(hours=1))
    return [
        rec("plain"),
        rec(
            "ü-id/ß #1",
            actor="акт 1",
            ns="/users/x/prefs",
            content="Я пью чай. 👍\u200b\r\nline\x00end\u2028" * 40,
            subject="é" * 300,
            owner=" padded ",
            provenance=Provenance(
                source_event="",
                policy_version="sha256:" + "0" * 64,
                replaced_by="r" * 257,
                supersedes=["a", "b"],
            ),
        ),
        rec(
            "limits",
            content="x" * 16_000,
            subject="s" * 256,
            owner="o" * 257,
            confidence=0.1 + 0.2,
            access_count=2**53,
            source=Source.system_of_record,
            created_at=datetime(1, 1, 1, tzinfo=UTC),
            last_accessed_at=datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            last_verified_at=datetime(2026, 1, 5, tzinfo=cet),
            expires_at=datetime(2027, 1, 1, tzinfo=cet),
            retention_class=RetentionClass.sensitive,
            status=Status.quarantined,
            status_changed_at=datetime(2026, 2, 1, tzinfo=cet),
        ),
        *(rec(f"ns-{i:02d}", ns=f"/users/u-1/n{i:02d}") for i in range(12)),
        *(rec(f"p-{i:02d}", status=list(Status)[i % len(Status)]) for i in range(9)),
        rec("shared", actor="u-2", ns="/users/u-1/prefs"),  # another actor, same namespace
    ]


def test_a_scripted_sequence_reads_alike_on_both_stores(
    pair: tuple[SqliteStore, AgentCoreStore],
) -> None:
    """Attacks every store guard the protocol names at once (page filters on actor and
    status, keyset bounds, ``set_status``'s provenance rules, ``delete_many``'s missing):
    a divergence between the backends is a guard one of them lost."""
    sql, ac = pair
    records = seeds()
    same(sql, ac, "put new", lambda s: outcome(s.put_many(records)))
    for r in records:
        got = same(sql, ac, f"get {r.id!r}", lambda s, r=r: fields_of(s.get(r.id)))
        assert got == fields_of(r)
    ids = [r.id for r in records] + ["absent"]
    same(sql, ac, "get_many", lambda s: {k: fields_of(v) for k, v in s.get_many(ids).items()})
    same(sql, ac, "actors", lambda s: list(s.list_actors()))
    for actor in ("u-1", "u-2", "акт 1", "nobody"):
        same(sql, ac, f"namespaces {actor}", lambda s, a=actor: s.list_namespaces(a))
    for page_size in (1, 2, 7):
        for statuses in (None, [Status.active], [Status.superseded, Status.quarantined]):
            same(
                sql,
                ac,
                f"page {page_size} {statuses}",
                lambda s, n=page_size, w=statuses: [
                    fields_of(r) for r in shard(s, "u-1", "/users/u-1/prefs", n, w)
                ],
            )
    # upsert: existing ids changed, one moved to another actor, one to another namespace
    moved = [
        rec("plain", content="changed", subject="s2", access_count=3),
        rec("p-00", actor="u-2", ns="/users/u-2/prefs"),
        rec("p-01", ns="/users/u-1/n00"),
    ]
    same(sql, ac, "put existing", lambda s: outcome(s.put_many(moved)))
    for actor, ns in (("u-1", "/users/u-1/prefs"), ("u-2", "/users/u-2/prefs")):
        same(sql, ac, f"shard {actor}", lambda s, a=actor, n=ns: [r.id for r in shard(s, a, n, 3)])
    same(sql, ac, "moved ns", lambda s: [r.id for r in shard(s, "u-1", "/users/u-1/n00", 1)])
    # status changes: replaced_by, policy_version, a missing id, an explicit time
    same(
        sql,
        ac,
        "supersede",
        lambda s: outcome(
            s.set_status(
                ["p-02", "absent", "ns-03"],
                Status.superseded,
                replaced_by="plain",
                policy_version="v9",
                at=AT,
            )
        ),
    )
    same(sql, ac, "re-activate", lambda s: outcome(s.set_status(["p-02"], Status.active, at=AT)))
    for rid in ("p-02", "ns-03"):
        got = same(sql, ac, f"after status {rid}", lambda s, r=rid: fields_of(s.get(r)))
        assert got is not None and got["status_changed_at"] == AT
    # deletes: present, absent, then again
    same(sql, ac, "delete", lambda s: outcome(s.delete_many(["plain", "absent", "ns-04"])))
    same(sql, ac, "delete again", lambda s: outcome(s.delete_many(["plain", "ns-04"])))
    same(sql, ac, "status of deleted", lambda s: outcome(s.set_status(["plain"], Status.active)))
    same(sql, ac, "gone", lambda s: (s.get("plain"), s.get_many(["plain", "ns-04"])))
    # the id written again under another actor after its delete
    same(sql, ac, "re-put", lambda s: outcome(s.put_many([rec("plain", actor="u-3", ns="/q")])))
    same(sql, ac, "re-put shard", lambda s: [fields_of(r) for r in shard(s, "u-3", "/q")])
    same(sql, ac, "old shard", lambda s: [r.id for r in shard(s, "u-1", "/users/u-1/prefs")])


# -- hypothesis: short random sequences --------------------------------------------------
IDS = ["a", "b", "c", "d"]
ACTORS = ["u-1", "u-2"]
SPACES = ["/n/x", "/n/y"]

op_put = st.tuples(
    st.just("put"),
    st.lists(
        st.tuples(
            st.sampled_from(IDS),
            st.sampled_from(ACTORS),
            st.sampled_from(SPACES),
            st.sampled_from(list(Status)),
            st.sampled_from(["t", "é long " * 50, "Ж"]),
        ),
        min_size=1,
        max_size=3,
        unique_by=lambda t: t[0],
    ),
)
op_status = st.tuples(
    st.just("status"),
    st.lists(st.sampled_from(IDS + ["zz"]), min_size=1, max_size=3, unique=True),
    st.sampled_from(list(Status)),
    st.sampled_from([None, "a", "zz"]),
    st.sampled_from([None, "v2"]),
)
op_delete = st.tuples(
    st.just("delete"), st.lists(st.sampled_from(IDS + ["zz"]), min_size=1, max_size=3, unique=True)
)


def apply(store: MemoryStore, op: tuple[Any, ...]) -> Any:
    if op[0] == "put":
        rs = [
            rec(i, actor=a, ns=n, status=s, content=c, retention_class=RetentionClass.standard)
            for i, a, n, s, c in op[1]
        ]
        # held records are left out: AgentCore has no conditional delete (documented)
        rs = [r.model_copy(update={"status": Status.active}) if r.held else r for r in rs]
        return outcome(store.put_many(rs))
    if op[0] == "status":
        status = Status.active if op[2] is Status.retained else op[2]
        return outcome(
            store.set_status(op[1], status, replaced_by=op[3], policy_version=op[4], at=AT)
        )
    return outcome(store.delete_many(op[1]))


def observe(store: MemoryStore) -> Any:
    shards = {(a, n): [fields_of(r) for r in shard(store, a, n, 2)] for a in ACTORS for n in SPACES}
    by_status = {
        (a, n): [r.id for r in shard(store, a, n, 1, [Status.active])]
        for a in ACTORS
        for n in SPACES
    }
    return shards, by_status, {i: fields_of(store.get(i)) for i in IDS}


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(st.one_of(op_put, op_status, op_delete), min_size=1, max_size=5))
def test_random_sequences_read_alike_on_both_stores(
    harness: AgentCoreHarness, tmp_path_factory: pytest.TempPathFactory, ops: list[Any]
) -> None:
    """Attacks the same guards as the scripted sequence, in orders nobody wrote by hand:
    an id moved between actors and namespaces, deleted and written again, its status
    changed while absent."""
    sql = SqliteStore(tmp_path_factory.mktemp("h") / "m.db")
    ac = harness.store()
    try:
        for op in ops:
            same(sql, ac, f"{op[0]}", lambda s, o=op: apply(s, o))
            same(sql, ac, f"after {op[0]}", observe)
    finally:
        sql.close()


# -- the string rule at its bounds ---------------------------------------------------------
@pytest.mark.parametrize(
    ("owner", "as_itself"),
    [
        ("o" * 256, True),  # the longest value written as itself
        ("o" * 257, False),
        ("a b", True),
        (" padded", False),  # surrounding whitespace is not trusted to round-trip
        ("padded ", False),
    ],
)
def test_the_string_rule_writes_a_value_as_itself_exactly_within_its_bounds(
    harness: AgentCoreHarness, owner: str, as_itself: bool
) -> None:
    """Attacks ``len(value) <= MAX_META_VALUE`` and ``value == value.strip()`` in
    ``memlife/stores/agentcore/mapping.py::fits_metadata``: docs/agentcore.md promises a
    value of 1..256 allowed characters without surrounding whitespace as itself (equality
    filters on it), every other as ``sha256:<hex>`` with the value in the sidecar."""
    ac = harness.store()
    r = rec("m1", owner=owner)
    assert ac.put_many([r]).succeeded == ["m1"]
    stored = harness.fake.record_by_memlife_id("m1")
    assert stored is not None
    written = stored["metadata"]["owner"]["stringValue"]
    assert (written == owner) is as_itself
    assert as_itself or written.startswith("sha256:")
    assert ac.get("m1") == r


# -- REAL BUG: access_count above 2**53 --------------------------------------------------
def test_an_access_count_above_2_53_reads_back_unchanged_on_both_stores(
    pair: tuple[SqliteStore, AgentCoreStore],
) -> None:
    """Attacks ``{"numberValue": float(value)}`` for ``kind == "int"`` in
    ``memlife/stores/agentcore/mapping.py::encode_metadata``: the model takes any count up
    to 2**63 - 1 (SQLite INTEGER); a put both stores report succeeded must read back equal."""
    sql, ac = pair
    r = rec("m1", access_count=2**53 + 1)
    same(sql, ac, "put", lambda s: outcome(s.put_many([r])))
    same(sql, ac, "get", lambda s: fields_of(s.get("m1")))


def test_a_record_at_the_models_largest_access_count_stays_readable(
    pair: tuple[SqliteStore, AgentCoreStore],
) -> None:
    """Attacks the same float encoding: ``float(2**63 - 1)`` is ``2**63``, above the
    model's ``le=2**63 - 1``, so decode_record refuses the record AgentCore accepted;
    its whole shard then fails to page (the nightly run cannot read that actor)."""
    sql, ac = pair
    records = [rec("big", access_count=2**63 - 1), rec("other")]
    same(sql, ac, "put", lambda s: outcome(s.put_many(records)))
    same(sql, ac, "get", lambda s: fields_of(s.get("big")))
    same(sql, ac, "page", lambda s: [r.id for r in shard(s, "u-1", "/users/u-1/prefs")])


# -- page tokens -----------------------------------------------------------------------------
def test_a_page_token_with_a_wrong_checksum_is_refused_like_sqlites_foreign_token(
    pair: tuple[SqliteStore, AgentCoreStore],
) -> None:
    """Attacks the checksum comparison in ``memlife/stores/agentcore/mapping.py::
    decode_token``: a token edited by hand (same memory, actor and namespace, another
    cursor) must be ``BadPageToken``, as a token SQLite did not issue is."""
    import base64

    from memlife.stores.base import BadPageToken

    sql, ac = pair
    records = [rec(f"m{i}") for i in range(3)]
    same(sql, ac, "put", lambda s: outcome(s.put_many(records)))
    token = ac.page("u-1", "/users/u-1/prefs", page_size=1).next_token
    assert token is not None
    raw = base64.urlsafe_b64decode(token.encode()).decode()
    forged = base64.urlsafe_b64encode(("0" * 16 + raw[16:]).encode()).decode()
    assert forged != token
    with pytest.raises(BadPageToken):
        ac.page("u-1", "/users/u-1/prefs", page_size=1, token=forged)
    with pytest.raises(BadPageToken):
        sql.page("u-1", "/users/u-1/prefs", page_size=1, token=forged)


# -- records AgentCore extracted itself --------------------------------------------------
FACTS = [
    {
        "strategyId": "facts-a1b2c3d4e5",
        "name": "facts",
        "type": "SEMANTIC",
        "namespaces": ["/users/{actorId}/facts"],
        "namespaceTemplates": ["/users/{actorId}/facts"],
    }
]


def test_a_native_record_is_active_to_a_status_filter_as_a_sqlite_record_is(
    harness: AgentCoreHarness, tmp_path: Any
) -> None:
    """Attacks ``wanted and Status.active.value not in wanted`` in
    ``memlife/stores/agentcore/store.py::AgentCoreStore.page``: an adopted native record
    is active, so a page of superseded or quarantined records (the applier's walk from held
    superseded records) must not serve it, as SQLite does not serve an active record."""
    ac = harness.store(strategies=FACTS)
    mine = harness.fake.add_native_record("/users/u-9/facts", "likes jazz", "facts-a1b2c3d4e5")
    sql = SqliteStore(tmp_path / "m.db")
    try:
        sql.put_many([rec(mine, actor="u-9", ns="/users/u-9/facts", content="likes jazz")])
        for statuses in ([Status.superseded], [Status.quarantined, Status.superseded]):
            same(
                sql,
                ac,
                f"{statuses}",
                lambda s, w=statuses: shard(s, "u-9", "/users/u-9/facts", 5, w),
            )
            assert shard(ac, "u-9", "/users/u-9/facts", 5, statuses) == []
        ids = same(
            sql,
            ac,
            "active",
            lambda s: [r.id for r in shard(s, "u-9", "/users/u-9/facts", 5, [Status.active])],
        )
        assert ids == [mine]
    finally:
        sql.close()


def test_a_records_own_deadline_wins_over_agentcores_native_ttl(harness: AgentCoreHarness) -> None:
    """Attacks ``rec.expires_at is None`` in ``memlife/stores/agentcore/store.py::
    AgentCoreStore.get``: the native ``expiresAt`` shows only where the record has no
    lifecycle deadline of its own (docs/agentcore.md); a record's own one must read back."""
    ac = harness.store()
    own = datetime(2026, 6, 1, tzinfo=UTC)
    r = rec("m1", expires_at=own)
    ac.put_many([r])
    raw = harness.fake.record_by_memlife_id("m1")
    assert raw is not None
    raw["expiresAt"] = datetime(2027, 5, 1, tzinfo=UTC).timestamp()
    got = ac.get("m1")
    assert got is not None and got.expires_at == own
    assert got == r


# -- an id that is another record's AgentCore id ---------------------------------------------
def test_the_agentcore_id_of_a_memlife_record_is_no_record_id_to_reads(
    pair: tuple[SqliteStore, AgentCoreStore], harness: AgentCoreHarness
) -> None:
    """Attacks ``not is_ours(raw)`` in ``memlife/stores/agentcore/store.py::
    AgentCoreStore._fetch``: an id shaped like AgentCore's own (``mem-...``) is adopted only
    for a native record; the memoryRecordId of a record memlife wrote (``x``) names no
    record, as on SQLite (else it reads as a second copy of ``x``, or fails)."""
    sql, ac = pair
    same(sql, ac, "put", lambda s: outcome(s.put_many([rec("x")])))
    raw = harness.fake.record_by_memlife_id("x")
    assert raw is not None
    native_id = raw["memoryRecordId"]
    same(sql, ac, "get", lambda s: s.get(native_id))
    same(sql, ac, "get_many", lambda s: s.get_many([native_id, "x"]).keys())
    same(sql, ac, "status", lambda s: outcome(s.set_status([native_id], Status.quarantined)))
    same(sql, ac, "x untouched", lambda s: fields_of(s.get("x")))


def test_deleting_by_a_memlife_records_agentcore_id_deletes_nothing(
    pair: tuple[SqliteStore, AgentCoreStore], harness: AgentCoreHarness
) -> None:
    """Attacks the native-record branch of ``memlife/stores/agentcore/writes.py::
    ChunkWriter.delete``: it sends BatchDelete for any ``mem-...`` id the sidecar does not
    know, without the ``not is_ours(raw)`` check ``_fetch`` makes, so a delete the store's
    own reads call absent removes record ``x`` under another name (no result, so no
    receipt, names ``x``; its sidecar item stays)."""
    sql, ac = pair
    same(sql, ac, "put", lambda s: outcome(s.put_many([rec("x"), rec("y")])))
    raw = harness.fake.record_by_memlife_id("x")
    assert raw is not None
    native_id = raw["memoryRecordId"]
    same(sql, ac, "delete", lambda s: outcome(s.delete_many([native_id])))
    same(sql, ac, "x still there", lambda s: fields_of(s.get("x")))
    same(sql, ac, "shard", lambda s: [r.id for r in shard(s, "u-1", "/users/u-1/prefs")])


def test_a_record_written_under_another_records_agentcore_id_is_a_new_record(
    pair: tuple[SqliteStore, AgentCoreStore], harness: AgentCoreHarness
) -> None:
    """Attacks ``not is_ours(raw)`` in ``memlife/stores/agentcore/writes.py::
    ChunkWriter._current_items``: only a native record is adopted by a write naming its
    AgentCore id; a write naming the memoryRecordId of memlife record ``x`` is a record
    of its own (on SQLite, a new id), never an overwrite of ``x``."""
    sql, ac = pair
    x = rec("x", content="x's own text")
    same(sql, ac, "put x", lambda s: outcome(s.put_many([x])))
    raw = harness.fake.record_by_memlife_id("x")
    assert raw is not None
    other = rec(raw["memoryRecordId"], actor="u-2", ns="/users/u-2/prefs", content="another")
    same(sql, ac, "put other", lambda s: outcome(s.put_many([other])))
    assert same(sql, ac, "x", lambda s: fields_of(s.get("x"))) == fields_of(x)
    assert same(sql, ac, "other", lambda s: fields_of(s.get(other.id))) == fields_of(other)
    same(sql, ac, "u-1", lambda s: [r.id for r in shard(s, "u-1", "/users/u-1/prefs")])


def test_a_write_that_failed_lists_no_actor_or_namespace(
    pair: tuple[SqliteStore, AgentCoreStore], harness: AgentCoreHarness
) -> None:
    """Attacks ``r.id in done`` in ``memlife/stores/agentcore/writes.py::ChunkWriter.write``
    (the shard registry): a create AgentCore failed wrote nothing, so, as on SQLite, its
    actor and namespace are not listed (the nightly run would page a shard of nobody)."""
    sql, ac = pair
    same(sql, ac, "put", lambda s: outcome(s.put_many([rec("x")])))
    harness.fake.fail_next_creates(["y"], 400)
    res = ac.put_many([rec("y", actor="u-7", ns="/users/u-7/new")])
    assert [f.id for f in res.failed] == ["y"] and not res.succeeded
    assert list(ac.list_actors()) == list(sql.list_actors()) == ["u-1"]
    assert ac.list_namespaces("u-7") == sql.list_namespaces("u-7") == []


@pytest.mark.parametrize("last_id", [None, 5])
def test_a_sqlite_page_token_whose_cursor_is_not_an_id_is_refused(
    tmp_path: Any, last_id: object
) -> None:
    """Attacks ``isinstance(last_id, str)`` in ``memlife/stores/sqlite.py::_decode_token``:
    a token naming the right actor and namespace but a cursor that is no id (``id > NULL``
    matches nothing, ``id > 5`` everything) must be ``BadPageToken``, as AgentCore's
    checksum refuses a token it did not issue, never a page that skips or repeats."""
    import base64
    import json

    from memlife.stores.base import BadPageToken

    sql = SqliteStore(tmp_path / "m.db")
    try:
        sql.put_many([rec("m1"), rec("m2")])
        raw = json.dumps(["u-1", "/users/u-1/prefs", last_id]).encode()
        token = base64.urlsafe_b64encode(raw).decode()
        with pytest.raises(BadPageToken):
            sql.page("u-1", "/users/u-1/prefs", page_size=1, token=token)
    finally:
        sql.close()


def test_a_status_change_scoped_to_an_actor_leaves_another_actors_record_of_that_id(
    tmp_path: Any,
) -> None:
    """Attacks ``row[3] != actor`` in ``memlife/stores/sqlite.py::SqliteStore._set_status``:
    ``set_status_unless_held(actor=...)`` must answer a row of another actor (an id another
    actor's record took over since the caller read it) as missing and leave it as it is."""
    sql = SqliteStore(tmp_path / "m.db")
    try:
        theirs = rec("x", actor="u-2", ns="/users/u-2/prefs")
        sql.put_many([theirs])
        res = sql.set_status_unless_held(["x"], Status.quarantined, at=AT, actor="u-1")
        assert outcome(res) == ([], ["x"], [])
        assert sql.get("x") == theirs
        res = sql.set_status_unless_held(["x"], Status.quarantined, at=AT, actor="u-2")
        assert outcome(res) == (["x"], [], [])
    finally:
        sql.close()
