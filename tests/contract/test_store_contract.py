"""The MemoryStore contract, run against every backend, plus AgentCore-only behaviour.

SQLite runs on a tmp file; AgentCore runs through the real boto3 client against
``tests.fakes.agentcore.FakeAgentCore`` (HTTP on 127.0.0.1) with a moto DynamoDB sidecar.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from memlife.model import (
    MemoryRecord,
    MemoryType,
    Provenance,
    RetentionClass,
    Source,
    Status,
    content_sha256,
)
from memlife.stores import open_store
from memlife.stores.agentcore import (
    FIELD_MAP,
    INDEXED_KEYS,
    MAX_METADATA_KEYS,
    OVERFLOW_KEY,
    AgentCoreStore,
    QuotaExceeded,
    fits_metadata,
)
from memlife.stores.base import BadPageToken, MemoryStore, StoreError, iter_shard
from memlife.stores.sqlite import SqliteStore
from tests.fakes.agentcore import (
    META_VALUE_RE,
    AgentCoreHarness,
    FakeAgentCore,
    agentcore_store,
)

T0 = datetime(2026, 1, 2, 10, 0, 0, 123456, tzinfo=UTC)


def rec(i: int | str, actor: str = "u-1", ns: str = "/users/u-1/prefs", **kw: Any) -> MemoryRecord:
    rid = i if isinstance(i, str) else f"m-{i:04d}"
    fields: dict[str, Any] = {
        "id": rid,
        "actor_id": actor,
        "namespace": ns,
        "memory_type": MemoryType.semantic,
        "content": f"fact number {i}",
        "created_at": T0 + timedelta(minutes=i if isinstance(i, int) else 0),
    }
    fields.update(kw)
    return MemoryRecord(**fields)


def full_record() -> MemoryRecord:
    """Every field set, nothing at its default; timestamps given in a non-UTC zone."""
    cet = timezone(timedelta(hours=1))
    return MemoryRecord(
        id="m-full",
        actor_id="u-1",
        namespace="/users/u-1/prefs",
        memory_type=MemoryType.procedural,
        subject="beverage",
        content="Drinks only green tea, never coffee.",
        owner="team-personalization",
        confidence=0.37,
        source=Source.system_of_record,
        created_at=datetime(2026, 1, 2, 11, 0, 0, 1, tzinfo=cet),
        last_accessed_at=datetime(2026, 2, 3, 4, 5, 6, 7, tzinfo=UTC),
        access_count=42,
        last_verified_at=datetime(2026, 1, 5, 0, 0, tzinfo=cet),
        expires_at=datetime(2027, 1, 1, tzinfo=UTC),
        retention_class=RetentionClass.sensitive,
        status=Status.retained,
        status_changed_at=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        provenance=Provenance(
            source_event="evt-17",
            policy_version="2026.1",
            replaced_by="m-other",
            supersedes=["m-a", "m-b", "m-c"],
            content_sha256=content_sha256("Drinks only green tea, never coffee."),
        ),
    )


HARNESS_FAKE: list[FakeAgentCore] = []  # the module harness's fake, for contract tests


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    HARNESS_FAKE[:] = [h.fake]
    yield h
    h.close()


@pytest.fixture(params=["sqlite", "agentcore"])
def store(
    request: pytest.FixtureRequest, tmp_path: Any, harness: AgentCoreHarness
) -> Iterator[MemoryStore]:
    if request.param == "sqlite":
        s = SqliteStore(tmp_path / "m.db")
        yield s
        s.close()
    else:
        yield harness.store()


@pytest.fixture
def ac(harness: AgentCoreHarness) -> tuple[AgentCoreStore, FakeAgentCore]:
    return harness.store(), harness.fake


def all_ids(store: MemoryStore, actor: str, ns: str, page_size: int = 500) -> list[str]:
    return [r.id for p in iter_shard(store, actor, ns, page_size=page_size) for r in p.records]


# -- contract ---------------------------------------------------------------------------
def test_protocol(store: MemoryStore) -> None:
    assert isinstance(store, MemoryStore)


def test_round_trip_every_field(store: MemoryStore) -> None:
    r = full_record()
    assert store.put_many([r]).succeeded == ["m-full"]
    got = store.get("m-full")
    assert got == r
    assert got is not None and got.created_at.tzinfo is not None
    assert got.created_at == datetime(2026, 1, 2, 10, 0, 0, 1, tzinfo=UTC)
    assert isinstance(got.status, Status) and isinstance(got.memory_type, MemoryType)
    (paged,) = store.page("u-1", "/users/u-1/prefs").records
    assert paged == r
    assert store.get("nope") is None


def test_a_declared_hash_that_is_not_the_contents_is_stored_as_the_contents(
    store: MemoryStore,
) -> None:
    """A copy edited with ``model_copy`` keeps its old declared hash: every store writes the
    content's own (MemoryRecord.as_stored), so nothing reads new text as reviewed old text."""
    r = full_record()
    stale = r.model_copy(update={"content": "Drinks coffee now."})
    assert stale.sha256 == r.sha256
    store.put_many([stale])
    got = store.get("m-full")
    assert got is not None and got.content == "Drinks coffee now."
    assert got.sha256 == got.provenance.content_sha256 == content_sha256("Drinks coffee now.")


def test_defaults_round_trip(store: MemoryStore) -> None:
    r = rec(1)
    store.put_many([r])
    assert store.get(r.id) == r


def test_upsert_is_idempotent(store: MemoryStore) -> None:
    r = rec(1)
    for _ in range(3):
        assert store.put_many([r]).succeeded == [r.id]
    assert all_ids(store, "u-1", "/users/u-1/prefs") == [r.id]
    changed = r.model_copy(update={"content": "fact changed", "subject": "s2", "access_count": 3})
    store.put_many([changed])
    assert store.get(r.id) == changed
    assert all_ids(store, "u-1", "/users/u-1/prefs") == [r.id]


def test_actors_and_namespaces(store: MemoryStore) -> None:
    store.put_many(
        [
            rec(1, "u-1", "/users/u-1/prefs"),
            rec(2, "u-1", "/users/u-1/facts"),
            rec(3, "u-2", "/users/u-2/prefs"),
        ]
    )
    assert list(store.list_actors()) == ["u-1", "u-2"]
    assert store.list_namespaces("u-1") == ["/users/u-1/facts", "/users/u-1/prefs"]
    assert store.list_namespaces("u-2") == ["/users/u-2/prefs"]
    assert store.list_namespaces("u-3") == []


def test_shard_never_mixes_actors(store: MemoryStore) -> None:
    store.put_many([rec(1, "u-1", "/shared/ns"), rec(2, "u-2", "/shared/ns")])
    assert all_ids(store, "u-1", "/shared/ns") == ["m-0001"]
    assert all_ids(store, "u-2", "/shared/ns") == ["m-0002"]


@pytest.mark.parametrize("page_size", [1, 5, 7])
def test_paging_covers_every_record_once(store: MemoryStore, page_size: int) -> None:
    records = [rec(i) for i in range(23)] + [rec(100 + i, ns="/users/u-1/other") for i in range(4)]
    store.put_many(records)
    pages = list(iter_shard(store, "u-1", "/users/u-1/prefs", page_size=page_size))
    ids = [r.id for p in pages for r in p.records]
    assert sorted(ids) == sorted(r.id for r in records[:23])
    assert len(ids) == len(set(ids))
    assert all(len(p.records) <= page_size for p in pages)


def test_paging_filters_statuses(store: MemoryStore) -> None:
    store.put_many(
        [rec(i, status=Status.active if i % 3 else Status.superseded) for i in range(12)]
    )
    got = [
        r.id
        for p in iter_shard(
            store, "u-1", "/users/u-1/prefs", page_size=2, statuses=[Status.superseded]
        )
        for r in p.records
    ]
    assert sorted(got) == [f"m-{i:04d}" for i in range(12) if i % 3 == 0]  # order: store-defined


def test_paging_under_concurrent_inserts_and_deletes(store: MemoryStore) -> None:
    ns = "/users/u-1/prefs"
    store.put_many([rec(i) for i in range(0, 40, 2)])  # even ids 0..38
    doomed = {f"m-{i:04d}" for i in range(0, 40, 8)}  # deleted mid-walk
    stable = {f"m-{i:04d}" for i in range(0, 40, 2)} - doomed
    seen: list[str] = []
    token: str | None = None
    step = 0
    while True:
        page = store.page("u-1", ns, page_size=3, token=token)
        seen += [r.id for r in page.records]
        step += 1
        if step == 2:
            store.delete_many(sorted(doomed))
            store.put_many([rec(i) for i in range(1, 40, 2)])  # odd ids land everywhere
        if step == 4:
            store.put_many([rec(100 + i) for i in range(5)])
        if page.next_token is None:
            break
        token = page.next_token
    assert len(seen) == len(set(seen)), "a record was served twice"
    assert stable <= set(seen), f"skipped: {sorted(stable - set(seen))}"


def test_token_bound_to_shard(store: MemoryStore) -> None:
    store.put_many(
        [rec(i) for i in range(5)] + [rec(10 + i, ns="/users/u-1/other") for i in range(5)]
    )
    token = store.page("u-1", "/users/u-1/prefs", page_size=2).next_token
    assert token
    with pytest.raises(BadPageToken):
        store.page("u-1", "/users/u-1/other", page_size=2, token=token)
    with pytest.raises(BadPageToken):
        store.page("u-2", "/users/u-1/prefs", page_size=2, token=token)
    with pytest.raises(BadPageToken):
        store.page("u-1", "/users/u-1/prefs", page_size=2, token="not-a-token")
    assert store.page("u-1", "/users/u-1/prefs", page_size=2, token=token).records


def test_set_status(store: MemoryStore) -> None:
    store.put_many([rec(1), rec(2), rec(3)])
    at = datetime(2026, 4, 1, tzinfo=UTC)
    res = store.set_status(
        ["m-0001", "m-0002", "ghost"],
        Status.superseded,
        replaced_by="m-0003",
        policy_version="p-7",
        at=at,
    )
    assert sorted(res.succeeded) == ["m-0001", "m-0002"] and res.missing == ["ghost"]
    got = store.get("m-0001")
    assert got is not None
    assert got.status is Status.superseded and got.status_changed_at == at
    assert got.provenance.replaced_by == "m-0003" and got.provenance.policy_version == "p-7"
    assert got.content == "fact number 1"  # the rest is untouched
    res = store.set_status(["m-0001"], Status.active)
    got = store.get("m-0001")
    assert got is not None and got.status is Status.active and got.provenance.replaced_by is None
    assert got.provenance.policy_version == "p-7"


def test_delete_many_reports_missing(store: MemoryStore) -> None:
    store.put_many([rec(1), rec(2)])
    res = store.delete_many(["m-0001", "ghost", "m-0002"])
    assert sorted(res.succeeded) == ["m-0001", "m-0002"] and res.missing == ["ghost"]
    assert not res.failed
    again = store.delete_many(["m-0001"])
    assert again.missing == ["m-0001"] and not again.succeeded and not again.failed
    assert store.get("m-0001") is None


def test_batches_over_100_are_chunked(store: MemoryStore) -> None:
    records = [rec(i) for i in range(210)]
    assert len(store.put_many(records).succeeded) == 210
    assert len(all_ids(store, "u-1", "/users/u-1/prefs", page_size=500)) == 210
    res = store.set_status([r.id for r in records], Status.quarantined)
    assert len(res.succeeded) == 210
    res = store.delete_many([r.id for r in records])
    assert len(res.succeeded) == 210 and not res.failed
    assert all_ids(store, "u-1", "/users/u-1/prefs") == []
    if isinstance(store, AgentCoreStore):  # what AgentCore was actually sent
        fake = HARNESS_FAKE[0]
        for op in ("create", "update", "delete"):
            assert [len(p["records"]) for p in fake.ops(op)] == [100, 100, 10], op
        assert all(p["maxResults"] <= 100 for p in fake.ops("ListMemoryRecords"))
        assert all(p.get("clientToken") for p in fake.ops("create"))


# -- AgentCore only ---------------------------------------------------------------------
def test_three_of_hundred_deletes_fail(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, fake = ac
    ids = [f"m-{i:04d}" for i in range(100)]
    store.put_many([rec(i) for i in range(100)])
    bad = ["m-0007", "m-0042", "m-0099"]
    fake.fail_next_deletes(bad, 500)
    res = store.delete_many(ids)
    assert len(res.succeeded) == 97 and not res.missing
    assert sorted(f.id for f in res.failed) == bad
    assert all(f.retryable and f.code == "SERVICE" for f in res.failed)
    assert all(store.get(i) is not None for i in bad)
    retry = store.delete_many(bad + ["m-0001"])  # a rerun: already deleted is not a failure
    assert sorted(retry.succeeded) == bad and retry.missing == ["m-0001"] and not retry.failed


def test_per_item_throttling_is_retried(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, fake = ac
    store.put_many([rec(i) for i in range(10)])
    fake.fail_next_deletes(["m-0003", "m-0004"], 429, times=2)
    res = store.delete_many([f"m-{i:04d}" for i in range(10)])
    assert len(res.succeeded) == 10 and not res.failed
    assert len(fake.ops("delete")) == 3  # the first call plus two retries of the two items
    store.put_many([rec(1)])
    fake.fail_next_deletes(["m-0001"], 429, times=100)  # never lets up: bounded
    res = store.delete_many(["m-0001"])
    assert [(f.id, f.code, f.retryable) for f in res.failed] == [("m-0001", "THROTTLED", True)]


def test_request_throttling_retried_by_botocore(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, fake = ac
    fake.throttle_next(1, op="create")
    assert store.put_many([rec(1)]).succeeded == ["m-0001"]
    assert len(fake.ops("create")) == 2
    assert len(fake.records) == 1  # the retry did not duplicate the record


def test_quota_exceeded_stops_the_shard(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, fake = ac
    store.put_many([rec(i) for i in range(3)])
    fake.quota_next(1, op="create")
    with pytest.raises(StoreError) as exc:
        store.put_many([rec(i) for i in range(100, 250)])
    assert exc.value.code == "QUOTA_EXCEEDED" and isinstance(exc.value, QuotaExceeded)
    fake.quota_next(1, op="delete")
    with pytest.raises(StoreError, match="quota") as exc:
        store.delete_many(["m-0001"])
    assert exc.value.code == "QUOTA_EXCEEDED"
    fake.quota_next(1, op="ListMemoryRecords")
    with pytest.raises(StoreError) as exc:
        store.page("u-1", "/users/u-1/prefs")
    assert exc.value.code == "QUOTA_EXCEEDED"


def test_quota_partial_result_names_done_items(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, fake = ac
    store.put_many([rec(i) for i in range(102)])
    fake.fail_next_deletes(["m-0000"], 500)
    fake.quota_next(1, op="delete")
    with pytest.raises(QuotaExceeded) as exc:  # first chunk hits the quota
        store.delete_many([f"m-{i:04d}" for i in range(102)])
    assert exc.value.partial.succeeded == [] and len(fake.records) == 102
    fake.quota_next(1, op="delete", skip=1)  # now the second chunk does
    with pytest.raises(QuotaExceeded) as exc:
        store.delete_many([f"m-{i:04d}" for i in range(102)])
    assert len(exc.value.partial.succeeded) == 99
    # every item has a fate: the one the service failed, and the two the stop left undone
    failed = {f.id: (f.code, f.retryable) for f in exc.value.partial.failed}
    assert failed == {
        "m-0000": ("SERVICE", True),
        "m-0100": ("QUOTA_EXCEEDED", True),
        "m-0101": ("QUOTA_EXCEEDED", True),
    }


@pytest.mark.parametrize("op", ["delete", "create", "update"])
def test_a_quota_stop_on_a_retry_keeps_what_the_first_attempt_did(
    ac: tuple[AgentCoreStore, FakeAgentCore], op: str
) -> None:
    """The service does most of a batch and throttles three items; the request retrying
    those hits the quota. The partial result names what was done (and the sidecar knows
    it: a write is readable, a delete is gone), and only the three as stopped."""
    store, fake = ac
    ids = [f"m-{i:04d}" for i in range(20)]
    if op != "create":
        store.put_many([rec(i) for i in range(20)])
    throttled = set(ids[:3])
    fake.fail_next_items(op, throttled, 429)
    fake.quota_next(1, op=op, skip=1)
    with pytest.raises(QuotaExceeded) as exc:
        if op == "delete":
            store.delete_many(ids)
        else:
            store.put_many([rec(i, content=f"Version two of {i}.") for i in range(20)])
    done = set(ids) - throttled
    assert set(exc.value.partial.succeeded) == done
    assert {f.id: (f.code, f.retryable) for f in exc.value.partial.failed} == {
        i: ("QUOTA_EXCEEDED", True) for i in throttled
    }
    for i in done:
        got = store.get(i)
        assert got is None if op == "delete" else got.content == f"Version two of {int(i[2:])}."


def test_validation_names_the_record(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, fake = ac
    fake.reject_records(["m-0005"])
    res = store.put_many([rec(i) for i in range(10)])
    assert len(res.succeeded) == 9
    assert [(f.id, f.code, f.retryable) for f in res.failed] == [("m-0005", "VALIDATION", False)]
    # checked before sending: AgentCore's own limits
    res = store.put_many([rec("m-big", content="x" * 16_001), rec("m-ns", ns="/bad ns/!")])
    assert sorted((f.id, f.code, f.retryable) for f in res.failed) == [
        ("m-big", "VALIDATION", False),
        ("m-ns", "VALIDATION", False),
    ]


ADVERSARIAL = [
    "café",  # non-ASCII
    "a#b",  # disallowed punctuation
    "line\nbreak",  # whitespace the service allows but might normalise
    " padded ",
    "",
    "x" * 257,
    "sha256:" + "0" * 64,  # looks like our digest marker
    "ok value.with:all/allowed=chars+@-_",
]


def test_metadata_limits_with_adversarial_values(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, fake = ac
    records = []
    for i, v in enumerate(ADVERSARIAL):
        records.append(
            rec(
                f"id {i} {v}"[:256] if i != 4 else "plain-id",
                actor=f"actor!{i}" if i % 2 else "u-1",
                ns="/users/x/prefs",
                subject=v,
                owner=v + "-owner" * 40,
                provenance=Provenance(
                    source_event=v or None,
                    policy_version=v,
                    replaced_by=v,
                    supersedes=[f"s-{j}-{v}" for j in range(12)],
                ),
            )
        )
    res = store.put_many(records)
    assert not res.failed and len(res.succeeded) == len(records)
    for r in records:
        assert store.get(r.id) == r
    for actor in {r.actor_id for r in records}:
        paged = all_ids(store, actor, "/users/x/prefs", page_size=2)
        assert sorted(paged) == sorted(r.id for r in records if r.actor_id == actor)
    for stored in fake.records.values():
        meta = stored["metadata"]
        assert len(meta) <= MAX_METADATA_KEYS
        for key, value in meta.items():
            if "stringValue" in value:
                s = value["stringValue"]
                assert 1 <= len(s) <= 256 and META_VALUE_RE.fullmatch(s), (key, s)
    assert not fits_metadata("a#b") and fits_metadata("a b")


def test_overflow_is_consistent_when_agentcore_update_fails(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, fake = ac
    old = rec(1, owner="team #1")
    store.put_many([old])
    fake.fail_next_updates(["m-0001"], 500)
    res = store.put_many([old.model_copy(update={"owner": "team #2"})])
    assert res.failed and res.failed[0].retryable
    assert store.get("m-0001") == old  # metadata rules; the sidecar's newer blob is unused
    assert store.put_many([old.model_copy(update={"owner": "team #2"})]).succeeded
    got = store.get("m-0001")
    assert got is not None and got.owner == "team #2"


def test_interrupted_create_is_recovered_not_duplicated(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    store, fake = ac
    r = rec(1)
    store.put_many([r])
    # simulate a crash between BatchCreate and the sidecar recording the memoryRecordId
    item = store.sidecar.get("m-0001")
    assert item is not None
    store.sidecar.client.update_item(
        TableName=store.sidecar.table,
        Key={"pk": {"S": "rec#m-0001"}, "sk": {"S": "rec"}},
        UpdateExpression="REMOVE memory_record_id SET #s = :p",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":p": {"S": "pending"}},
    )
    assert store.get("m-0001") == r
    store.put_many([r.model_copy(update={"content": "after crash"})])
    assert len(fake.records) == 1
    got = store.get("m-0001")
    assert got is not None and got.content == "after crash"


def test_each_create_attempt_has_its_own_client_token(harness: AgentCoreHarness) -> None:
    """The same records written twice are two attempts: one token would let the service
    answer the second with the first (a record written, deleted, written again would never
    exist again). A retry of one attempt keeps its token
    (test_agentcore_create_attempts_and_actors)."""
    tokens = []
    for _ in range(2):
        store, fake = harness.store(), harness.fake
        store.put_many([rec(1), rec(2)])
        tokens.append(fake.ops("create")[0]["clientToken"])
    assert tokens[0] != tokens[1]


def test_fake_honours_client_token(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, fake = ac
    body = {
        "requestIdentifier": "r0",
        "namespaces": ["/n"],
        "content": {"text": "t"},
        "timestamp": T0,
        "metadata": {"memlife_id": {"stringValue": "x"}},
    }
    a = store.client.batch_create_memory_records(
        memoryId=fake.memory_id, records=[body], clientToken="tok"
    )
    b = store.client.batch_create_memory_records(
        memoryId=fake.memory_id, records=[body], clientToken="tok"
    )
    assert a["successfulRecords"] == b["successfulRecords"] and len(fake.records) == 1


def test_indexed_keys_and_mapping_table() -> None:
    indexed = {k["key"] for k in INDEXED_KEYS}
    assert {"status", "retention_class", "memory_type", "expires_at", "subject"} <= indexed
    assert {"memlife_id", "actor_id"} <= indexed and len(INDEXED_KEYS) <= 10
    keys = [f.key for f in FIELD_MAP if f.key] + [OVERFLOW_KEY]
    assert len(keys) == len(set(keys)) <= MAX_METADATA_KEYS
    assert all(META_VALUE_RE.fullmatch(k) for k in keys)


def test_missing_indexed_keys_reported(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, fake = ac
    assert store.missing_indexed_keys() == []
    fake.indexed_keys = [{"key": "status", "type": "STRING"}]
    store._memory = None
    assert "memlife_id" in store.missing_indexed_keys()


def test_native_records_are_adopted(harness: AgentCoreHarness) -> None:
    strategies = [
        {
            "strategyId": "facts-a1b2c3d4e5",
            "name": "facts",
            "type": "SEMANTIC",
            "namespaces": ["/users/{actorId}/facts"],
            "namespaceTemplates": ["/users/{actorId}/facts"],
        },
        {
            "strategyId": "summ-a1b2c3d4e5",
            "name": "summ",
            "type": "SUMMARIZATION",
            "namespaces": ["/summaries/{actorId}/{sessionId}"],
            "namespaceTemplates": ["/summaries/{actorId}/{sessionId}"],
        },
    ]
    store, fake = harness.store(strategies=strategies), harness.fake
    if True:  # keeps the block's shape readable
        fake.add_actor("u-9")
        mine = fake.add_native_record("/users/u-9/facts", "likes jazz", "facts-a1b2c3d4e5")
        fake.add_native_record("/users/u-8/facts", "not u-9's", "facts-a1b2c3d4e5")
        assert list(store.list_actors()) == ["u-9"]
        assert store.list_namespaces("u-9") == ["/users/u-9/facts"]
        (got,) = store.page("u-9", "/users/u-9/facts").records
        assert got.id == mine and got.actor_id == "u-9" and got.content == "likes jazz"
        assert got.source is Source.agent_inferred and got.status is Status.active
        assert store.get(mine) == got
        assert store.page("u-8", "/users/u-9/facts").records == []
        assert store.set_status([mine], Status.quarantined).succeeded == [mine]
        assert store.page("u-9", "/users/u-9/facts", statuses=[Status.active]).records == []
        res = store.delete_many([mine])
        assert res.succeeded == [mine]


def test_native_expiry_shows_in_get(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, fake = ac
    store.put_many([rec(1)])
    raw = fake.record_by_memlife_id("m-0001")
    assert raw is not None
    raw["expiresAt"] = datetime(2027, 5, 1, tzinfo=UTC).timestamp()
    got = store.get("m-0001")
    assert got is not None and got.expires_at == datetime(2027, 5, 1, tzinfo=UTC)


def test_open_store_by_url(harness: AgentCoreHarness) -> None:
    store, fake = harness.store(), harness.fake
    if True:
        url = (
            f"agentcore://{fake.memory_id}?region=us-east-1&endpoint_url={fake.endpoint_url}"
            f"&sidecar_table={store.sidecar.table}&max_attempts=2"
        )
        opened = open_store(url)
        assert isinstance(opened, AgentCoreStore) and opened.memory_id == fake.memory_id
        assert opened.put_many([rec(1)]).succeeded == ["m-0001"]
        assert store.get("m-0001") == rec(1)
        assert AgentCoreStore.from_url(opened.url).url == opened.url
        opened.close()
    with pytest.raises(ValueError, match="unknown parameter"):
        AgentCoreStore.from_url("agentcore://memlife_test-a1b2c3d4e5?regoin=us-east-1")


def test_sidecar_holds_no_content(ac: tuple[AgentCoreStore, FakeAgentCore]) -> None:
    store, _ = ac
    store.put_many([rec(1, content="SECRET-CONTENT", owner="a#b")])
    items = store.sidecar.client.scan(TableName=store.sidecar.table)["Items"]
    assert items and "SECRET-CONTENT" not in json.dumps(items)


def test_standalone_helper() -> None:
    """``agentcore_store()`` is the fixture other suites (e.g. the nightly e2e) reuse."""
    with agentcore_store() as (store, fake):
        store.put_many([rec(i, ns=f"/ns/{i % 3}") for i in range(6)])
        assert sum(len(store.list_namespaces(a)) for a in store.list_actors()) == 3
        assert len(fake.records) == 6
