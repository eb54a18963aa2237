"""Guards left untested by the twenty-sixth audit (session 37): the AgentCore store adapter.

Mapping limits (a metadata value of exactly 256 characters), per-item outcomes of the
write path, page tokens bound to their namespace, and two real bugs: a create the service
refused item by item is resent with the same clientToken (and answered with the same
failure), and a namespace move whose update failed leaves a record that can be neither
read nor erased by a store without a cached location (both fixed in session 37; their
tests fail on the old code).

Everything runs against the fake AgentCore behind real boto3 (``tests/fakes/agentcore.py``)
and moto's DynamoDB for the sidecar.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from memlife.model import MemoryRecord, Status
from memlife.stores.agentcore import AgentCoreStore, QuotaExceeded
from memlife.stores.agentcore.mapping import MAX_CONTENT, MAX_META_VALUE, encode_metadata
from memlife.stores.base import BadPageToken, StoreError
from tests.fakes.agentcore import AgentCoreHarness, ApiError, FakeAgentCore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rec(content: str = "likes tea", **kw: Any) -> MemoryRecord:
    fields: dict[str, Any] = {
        "id": "r1",
        "actor_id": "u1",
        "namespace": "/users/u1",
        "memory_type": "semantic",
        "content": content,
        "created_at": T0,
        **kw,
    }
    return MemoryRecord(**fields)


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture
def ac(harness: AgentCoreHarness) -> tuple[AgentCoreStore, FakeAgentCore]:
    return harness.store(), harness.fake


def fresh_store(harness: AgentCoreHarness) -> AgentCoreStore:
    """A second store over the same memory and sidecar, with empty read caches (another
    worker, or the next run)."""
    return AgentCoreStore(
        harness.fake.memory_id,
        endpoint_url=harness.fake.endpoint_url,
        sidecar_table=harness.sidecar_table,
        clients=harness.clients,
        retry_base_s=0.001,
    )


# -- mapping ---------------------------------------------------------------------------------
def test_a_metadata_value_of_exactly_256_chars_is_written_as_itself() -> None:
    """Attacks ``len(value) <= MAX_META_VALUE`` in ``mapping.py::fits_metadata``: the
    service takes 256 characters; a value of exactly that length stays filterable as
    itself (no digest, nothing in the overflow blob)."""
    subject = "s" * MAX_META_VALUE
    meta, blob = encode_metadata(rec(subject=subject))
    assert meta["subject"] == {"stringValue": subject}
    assert blob == {}
    meta, blob = encode_metadata(rec(subject=subject + "s"))
    assert meta["subject"]["stringValue"].startswith("sha256:")
    assert blob == {"subject": subject + "s"}


@pytest.mark.parametrize("value", [" padded", "padded ", "tab\tinside", "line\nbreak"])
def test_a_value_with_whitespace_the_service_may_not_keep_goes_to_the_blob(
    ac: tuple[AgentCoreStore, FakeAgentCore], value: str
) -> None:
    """Attacks ``value == value.strip()`` and the space-only class of ``_SAFE_VALUE_RE`` in
    ``mapping.py::fits_metadata``: surrounding or non-space whitespace is written as a
    digest, the value itself only in the overflow blob, and it reads back unchanged."""
    store, fake = ac
    meta, blob = encode_metadata(rec(owner=value))
    assert meta["owner"]["stringValue"].startswith("sha256:")
    assert blob == {"owner": value}
    assert store.put_many([rec(owner=value)]).succeeded == ["r1"]
    raw = fake.record_by_memlife_id("r1")
    assert raw is not None and raw["metadata"]["owner"]["stringValue"].startswith("sha256:")
    got = store.get("r1")
    assert got is not None and got.owner == value


def test_content_of_exactly_the_service_limit_is_written_one_more_is_refused_before_sending(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``len(record.content) > MAX_CONTENT`` in ``mapping.py::invalid_reason``:
    16,000 characters are AgentCore's limit, inclusive; 16,001 is a non-retryable
    VALIDATION item that never reaches the service (and never goes to the sidecar)."""
    store, fake = ac
    assert store.put_many([rec("x" * MAX_CONTENT)]).succeeded == ["r1"]
    creates = len(fake.ops("create"))
    out = store.put_many([rec("y" * (MAX_CONTENT + 1), id="r2")])
    assert [(f.id, f.code, f.retryable) for f in out.failed] == [("r2", "VALIDATION", False)]
    assert len(fake.ops("create")) == creates
    assert store.sidecar.get("r2") is None


def _answer_rewritten(
    fake: FakeAgentCore, monkeypatch: pytest.MonkeyPatch, op: str, edit: Any
) -> None:
    """The fake's ``op`` answers as usual, then ``edit(answer)`` rewrites what is reported
    (a service that leaves an item out, or reports it with a non-SUCCEEDED status)."""
    real = getattr(fake, f"_op_{op}")

    def answer(body: dict[str, Any], query: dict[str, Any], groups: tuple[str, ...]) -> Any:
        status, payload = real(body, query, groups)
        edit(payload)
        return status, payload

    monkeypatch.setattr(fake, f"_op_{op}", answer)


def test_an_update_the_service_does_not_report_is_not_counted_done(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the ``setdefault(..., Outcome(False, 500, "not reported ..."))`` fallback of
    ``transport.py::Transport._item_outcomes``: an item missing from both lists of the
    answer is a retryable SERVICE failure, never a success."""
    store, fake = ac
    assert store.put_many([rec(), rec(id="r2")]).succeeded == ["r1", "r2"]
    mrid = store.sidecar.get("r2")
    assert mrid is not None

    def drop_r2(payload: dict[str, Any]) -> None:
        payload["successfulRecords"] = [
            x for x in payload["successfulRecords"] if x["memoryRecordId"] != mrid.memory_record_id
        ]

    _answer_rewritten(fake, monkeypatch, "BatchUpdate", drop_r2)
    out = store.put_many([rec("v2"), rec("v2", id="r2")])
    assert out.succeeded == ["r1"]
    assert [(f.id, f.code, f.retryable) for f in out.failed] == [("r2", "SERVICE", True)]


def test_a_reported_item_whose_status_is_not_succeeded_is_a_failure(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``item.get("status", "SUCCEEDED") == "SUCCEEDED"`` in
    ``transport.py::Transport._item_outcomes``: an item listed among the successful ones
    but with status FAILED is not done."""
    store, fake = ac
    assert store.put_many([rec()]).succeeded == ["r1"]

    def mark_failed(payload: dict[str, Any]) -> None:
        for x in payload["successfulRecords"]:
            x["status"] = "FAILED"

    _answer_rewritten(fake, monkeypatch, "BatchUpdate", mark_failed)
    out = store.put_many([rec("v2")])
    assert out.succeeded == [] and [f.id for f in out.failed] == ["r1"]


def test_a_namespace_move_names_the_source_namespace_and_leaves_the_old_listing(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``body["sourceNamespaces"] = [old_ns[k]]`` in
    ``writes.py::ChunkWriter._update``: a record moved to another namespace is updated in
    place (no second copy) with the namespace it leaves named, so a stale move is refused."""
    store, fake = ac
    store.put_many([rec()])
    assert store.put_many([rec(namespace="/users/u1/moved")]).succeeded == ["r1"]
    sent = fake.ops("update")[-1]["records"][0]
    assert sent["sourceNamespaces"] == ["/users/u1"]
    assert len(fake.records) == 1
    assert store.page("u1", "/users/u1").records == []
    assert [r.id for r in store.page("u1", "/users/u1/moved").records] == ["r1"]


def test_a_namespace_is_registered_only_once_a_record_was_written_there(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``r.id in done`` in ``writes.py::ChunkWriter.write``: a create the service
    refused does not register its (actor, namespace) shard, so ``list_namespaces`` does not
    list a namespace that never held a record."""
    store, fake = ac
    store.put_many([rec()])
    fake.fail_next_creates(["r2"], 400)
    out = store.put_many([rec(id="r2", namespace="/users/u1/never")])
    assert [(f.code, f.retryable) for f in out.failed] == [("VALIDATION", False)]
    assert store.list_namespaces("u1") == ["/users/u1"]


def test_deleting_a_record_deleted_behind_our_back_is_missing_and_drops_the_sidecar_item(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``gone.append(e.key)`` on a 404 in ``writes.py::ChunkWriter.delete``: the
    record is reported missing and its sidecar item (ids, overflow blobs) goes too."""
    store, fake = ac
    store.put_many([rec(owner=" not metadata safe ")])
    assert store.sidecar.get("r1") is not None
    with fake.lock:
        fake.records.clear()
    out = store.delete_many(["r1"])
    assert out.missing == ["r1"] and out.succeeded == [] and out.failed == []
    assert store.sidecar.get("r1") is None


def test_one_of_our_records_is_not_readable_a_second_time_by_its_service_id(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``not is_ours(raw)`` in ``store.py::AgentCoreStore._fetch``: only a native
    record is read by its memoryRecordId; one of ours is read by our id alone, so no second
    copy of it (with lifecycle defaults) appears under the service's id."""
    store, _ = ac
    store.put_many([rec()])
    item = store.sidecar.get("r1")
    assert item is not None and item.memory_record_id is not None
    assert must_get(store, "r1").id == "r1"
    assert store.get(item.memory_record_id) is None
    assert store.get_many([item.memory_record_id, "r1"]).keys() == {"r1"}


def test_the_last_of_two_writes_of_one_id_in_a_batch_wins(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``{r.id: r for r in records}`` in ``store.py::AgentCoreStore.put_many``:
    two versions of one id in a batch are one write, the last one (as SQL upserts)."""
    store, fake = ac
    out = store.put_many([rec("first"), rec("second")])
    assert out.succeeded == ["r1"]
    assert len(fake.records) == 1
    assert must_get(store, "r1").content == "second"


def test_a_validation_error_on_a_read_withholds_the_message_that_quotes_the_request(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``if code not in _MESSAGE_KEPT`` in ``errors.py::store_error``: a
    ValidationException's message may quote what was sent; the StoreError that reaches
    logs and run records keeps the code, never that text. A throttle's message is kept."""
    store, fake = ac

    def refuse(body: dict[str, Any], query: dict[str, Any], groups: tuple[str, ...]) -> Any:
        raise ApiError(400, "ValidationException", "Value 'SECRET-7731' at 'namespace' failed")

    monkeypatch.setattr(fake, "_op_ListMemoryRecords", refuse)
    with pytest.raises(StoreError) as caught:
        store.page("u1", "/users/u1")
    assert caught.value.code == "VALIDATION"
    assert "SECRET-7731" not in str(caught.value)

    def deny(body: dict[str, Any], query: dict[str, Any], groups: tuple[str, ...]) -> Any:
        raise ApiError(403, "AccessDeniedException", "not allowed on memory X")

    monkeypatch.setattr(fake, "_op_ListMemoryRecords", deny)
    with pytest.raises(StoreError, match="not allowed on memory X"):
        store.page("u1", "/users/u1")


def test_a_failed_create_retried_with_other_lifecycle_values_is_a_new_request(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks the metadata part of ``transport.py::create_token``: the same attempt with
    other lifecycle values (same content) is another request; with the same token the
    service would refuse it (IdempotentParameterMismatch) as a non-retryable VALIDATION."""
    store, fake = ac
    fake.fail_next_creates(["r1"], 500)
    assert [f.code for f in store.put_many([rec()]).failed] == ["SERVICE"]
    out = store.put_many([rec(owner="ops", access_count=3)])
    assert out.succeeded == ["r1"], [(f.code, f.message) for f in out.failed]
    tokens = [p["clientToken"] for p in fake.ops("create")]
    assert len(tokens) == 2 and tokens[0] != tokens[1]
    assert must_get(store, "r1").owner == "ops"


def test_no_create_goes_out_after_a_quota_stop_met_while_bisecting(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``stop = stop_of(first)`` in ``transport.py::Transport._request_failed``:
    bisecting a refused batch, a quota stop met in the first half stops the shard; the
    second half is never sent, and every item's fate is in the partial result."""
    store, fake = ac
    fake.reject_records(["r0"])  # any batch holding r0 is refused as a whole
    # requests: [r0..r3] refused, [r0, r1] refused, [r0] refused, [r1] quota
    fake.quota_next(1, "create", skip=3)
    with pytest.raises(QuotaExceeded) as stop:
        store.put_many([rec(id=f"r{i}") for i in range(4)])
    part = stop.value.partial
    assert part.succeeded == []
    assert sorted((f.id, f.code) for f in part.failed) == [
        ("r0", "VALIDATION"),
        ("r1", "QUOTA_EXCEEDED"),
        ("r2", "QUOTA_EXCEEDED"),
        ("r3", "QUOTA_EXCEEDED"),
    ]
    assert len(fake.ops("create")) == 4
    assert fake.records == {}


def test_another_tenants_unreadable_record_does_not_break_my_listing(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks the ``actor_id`` metadata pre-filter of ``store.py::AgentCoreStore.page``:
    records of another actor in the same namespace are skipped before any decoding, so a
    record of theirs that does not decode never reaches (or breaks) my listing."""
    store, fake = ac
    store.put_many([rec(), rec(id="t2", actor_id="u2")])
    other = fake.record_by_memlife_id("t2")
    assert other is not None
    with fake.lock:
        other["metadata"]["created_at"] = {"stringValue": "not a time"}
    assert [r.id for r in store.page("u1", "/users/u1").records] == ["r1"]


def test_a_native_record_no_template_names_is_not_listed_as_the_callers(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``not native_ok`` in ``store.py::AgentCoreStore.page``: in a namespace no
    strategy template assigns, a record AgentCore extracted by itself belongs to no actor;
    it is not adopted by whichever actor pages that namespace."""
    store, fake = ac
    store.put_many([rec(namespace="/shared")])
    fake.add_native_record("/shared", "someone else's fact")
    assert [r.id for r in store.page("u1", "/shared").records] == ["r1"]


def test_a_whole_request_throttle_outlasting_botocore_is_retried_by_the_store(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``ThrottledException`` -> per-item 429 in
    ``transport.py::Transport._request_failed``: once botocore's own retries are spent
    (3 attempts here), the store's item retry sends the batch again and it lands."""
    store, fake = ac
    store.put_many([rec()])
    fake.throttle_next(6, "update")  # more than botocore's 3 attempts: twice over
    out = store.put_many([rec("after the throttle")])
    assert len(fake.ops("update")) == 7
    assert out.succeeded == ["r1"] and out.failed == []
    assert must_get(store, "r1").content == "after the throttle"


def test_a_refused_lookup_of_a_known_record_is_an_error_not_an_absence(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``quiet and`` in ``transport.py::Transport.get``: only a cached location may
    be refused quietly; a sidecar-resolved read the service denies raises (a caller that
    took it for absent would write or report the record as gone)."""
    store, fake = ac
    store.put_many([rec()])

    def deny(body: dict[str, Any], query: dict[str, Any], groups: tuple[str, ...]) -> Any:
        raise ApiError(403, "AccessDeniedException", "denied")

    monkeypatch.setattr(fake, "_op_GetMemoryRecord", deny)
    with pytest.raises(StoreError) as caught:
        store.set_status(["r1"], Status.quarantined)
    assert caught.value.code == "ACCESS_DENIED"


def test_a_delete_refused_as_a_whole_for_an_unknown_record_still_deletes_the_rest(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks the ``ResourceNotFoundException and op == "delete"`` bisection of
    ``transport.py::Transport._request_failed``: a service that refuses the whole delete
    for one unknown record is bisected; that one is missing, the others are deleted."""
    store, fake = ac
    store.put_many([rec(), rec(id="r2"), rec(id="r3")])
    first = fake.record_by_memlife_id("r1")
    assert first is not None
    with fake.lock:
        del fake.records[first["memoryRecordId"]]
        fake.missing_deletes = "request"
    out = store.delete_many(["r1", "r2", "r3"])
    assert out.missing == ["r1"] and sorted(out.succeeded) == ["r2", "r3"]
    assert fake.records == {}


def test_a_connection_failure_is_a_retryable_service_failure(
    harness: AgentCoreHarness, ac: tuple[AgentCoreStore, FakeAgentCore]
) -> None:
    """Attacks ``Outcome(False, 503, ...)`` for a ``BotoCoreError`` in
    ``transport.py::Transport._call``: a batch that never reached the service (connection
    refused) is retried on a later run, not given up as invalid."""
    import boto3
    from botocore.config import Config

    dead = boto3.session.Session(region_name="us-east-1").client(
        "bedrock-agentcore",
        endpoint_url="http://127.0.0.1:9",
        config=Config(retries={"mode": "standard", "max_attempts": 1}),
    )
    store = AgentCoreStore(
        harness.fake.memory_id,
        sidecar_table=harness.sidecar_table,
        clients=(dead, harness.clients[1], harness.clients[2]),
        retry_base_s=0.001,
    )
    out = store.put_many([rec()])
    assert [(f.code, f.retryable) for f in out.failed] == [("SERVICE", True)]


def test_a_failed_update_leaves_the_previous_overflow_readable(
    harness: AgentCoreHarness, ac: tuple[AgentCoreStore, FakeAgentCore]
) -> None:
    """Attacks ``KEEP_BLOBS`` in ``writes.py::ChunkWriter._stage``: the sidecar takes the
    new overflow blob before the update; when the update fails, AgentCore still holds the
    previous version, whose blob must still be in the sidecar for any reader."""
    store, fake = ac
    store.put_many([rec(owner=" first owner ")])
    fake.fail_next_updates(["r1"], 500)
    assert [f.code for f in store.put_many([rec(owner=" second owner ")]).failed] == ["SERVICE"]
    got = fresh_store(harness).get("r1")
    assert got is not None and got.owner == " first owner "


def test_a_record_deleted_behind_our_back_twice_is_created_twice(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``create_nonce=new_nonce()`` in ``writes.py::ChunkWriter._restage_pending``:
    each re-create after a 404 is a new attempt; reusing the live item's (empty) nonce
    makes the second re-create of the same values replay the first, long-deleted one."""
    store, fake = ac
    store.put_many([rec()])
    for _ in range(2):
        with fake.lock:
            fake.records.clear()  # e.g. the service's own expiry
        assert store.put_many([rec()]).succeeded == ["r1"]
        assert fake.record_by_memlife_id("r1") is not None


def test_a_cached_location_whose_overflow_changed_is_read_through_the_sidecar(
    harness: AgentCoreHarness, ac: tuple[AgentCoreStore, FakeAgentCore]
) -> None:
    """Attacks ``want and self._cache.blob(want) is None`` in
    ``store.py::AgentCoreStore._read_cached``: another writer gave the record a new
    overflow blob; a reader whose cache knows the location but not that blob falls back
    to the sidecar instead of failing with SIDECAR_MISMATCH."""
    store, _ = ac
    store.put_many([rec(owner=" first owner ")])
    assert must_get(store, "r1").owner == " first owner "
    other = fresh_store(harness)
    assert other.put_many([rec(owner=" second owner ")]).succeeded == ["r1"]
    assert must_get(store, "r1").owner == " second owner "


def test_a_native_record_is_erased_by_its_service_id(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks the native branch (``item is None and MEMORY_RECORD_ID_RE...``) of
    ``writes.py::ChunkWriter.delete``: a record AgentCore extracted by itself has no
    sidecar item; deleting it by its id (the one memlife reads it with) reaches it."""
    store, fake = ac
    rid = fake.add_native_record("/users/u1", "native fact")
    out = store.delete_many([rid])
    assert out.succeeded == [rid] and out.missing == []
    assert rid not in fake.records


def test_erasing_a_record_whose_create_crashed_before_the_sidecar_reaches_it(
    ac: tuple[AgentCoreStore, FakeAgentCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the pending recovery (``find_by_key``) in ``writes.py::ChunkWriter.delete``:
    a crash between BatchCreate and the sidecar's new id leaves the item pending while the
    record exists; an erasure then finds it by ``memlife_id`` and deletes it."""
    store, fake = ac
    real_put = store.sidecar.put_many
    calls: list[int] = []

    def crash_at_second(items: Any) -> dict[str, str]:
        calls.append(len(items))
        if len(calls) == 2:
            raise RuntimeError("crash")
        return real_put(items)

    monkeypatch.setattr(store.sidecar, "put_many", crash_at_second)
    with pytest.raises(RuntimeError, match="^crash$"):
        store.put_many([rec()])
    monkeypatch.setattr(store.sidecar, "put_many", real_put)
    assert fake.record_by_memlife_id("r1") is not None
    out = store.delete_many(["r1"])
    assert out.succeeded == ["r1"]
    assert fake.record_by_memlife_id("r1") is None and store.sidecar.get("r1") is None


# -- real bugs -------------------------------------------------------------------------------
def test_a_create_the_service_failed_item_by_item_succeeds_when_retried(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """``writes.py::ChunkWriter._create`` keeps a failed create's ``create_nonce``: the
    retry (the item was reported SERVICE, retryable) carries the same ``clientToken`` and
    the same body, and an idempotent service replays the first answer, the failure."""
    store, fake = ac
    fake.fail_next_creates(["r1"], 500)
    first = store.put_many([rec()])
    assert [(f.code, f.retryable) for f in first.failed] == [("SERVICE", True)]
    again = store.put_many([rec()])  # the scripted failure is spent: this one must land
    assert again.succeeded == ["r1"], [(f.code, f.message) for f in again.failed]
    assert fake.record_by_memlife_id("r1") is not None


def test_a_record_whose_namespace_move_failed_can_still_be_read_and_erased(
    harness: AgentCoreHarness, ac: tuple[AgentCoreStore, FakeAgentCore]
) -> None:
    """``writes.py::ChunkWriter._stage`` writes the sidecar's namespace before the update;
    a retryable update failure (500, throttled, quota) leaves AgentCore's record in the old
    namespace while ``_fetch`` and ``delete`` send the new one: GetMemoryRecord is refused
    (StoreError) and the delete fails non-retryably: an erasure that cannot happen."""
    store, fake = ac
    assert store.put_many([rec()]).succeeded == ["r1"]
    fake.fail_next_updates(["r1"], 500)
    moved = store.put_many([rec(namespace="/users/u1/moved")])
    assert [(f.code, f.retryable) for f in moved.failed] == [("SERVICE", True)]
    other = fresh_store(harness)
    got = other.get("r1")
    assert got is not None and got.content == "likes tea"
    gone = other.delete_many(["r1"])
    assert gone.succeeded == ["r1"], [(f.code, f.message) for f in gone.failed]
    assert fake.record_by_memlife_id("r1") is None


def test_a_page_token_edited_without_its_checksum_is_refused_as_a_bad_token(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks the checksum comparison in ``mapping.py::decode_token``: a token whose
    payload was edited (here: the service cursor swapped for one of another namespace's
    listing) is a ``BadPageToken``, refused before any call reaches the service."""
    store, fake = ac
    store.put_many([rec(id=f"r{i}") for i in range(3)] + [rec(id="o1", namespace="/users/u1/o")])
    store.put_many([rec(id="o2", namespace="/users/u1/o")])
    mine = store.page("u1", "/users/u1", page_size=1).next_token
    other = store.page("u1", "/users/u1/o", page_size=1).next_token
    assert mine is not None and other is not None
    raw_mine = base64.urlsafe_b64decode(mine).decode()
    raw_other = base64.urlsafe_b64decode(other).decode()
    check, payload = raw_mine[:16], json.loads(raw_mine[16:])
    payload[3] = json.loads(raw_other[16:])[3]  # the other listing's service cursor
    forged = base64.urlsafe_b64encode(
        (check + json.dumps(payload, separators=(",", ":"))).encode()
    ).decode()
    lists = len(fake.ops("ListMemoryRecords"))
    with pytest.raises(BadPageToken):
        store.page("u1", "/users/u1", page_size=1, token=forged)
    assert len(fake.ops("ListMemoryRecords")) == lists


def test_a_native_ttl_never_overrides_the_records_own_deadline(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``rec.expires_at is None`` in ``store.py::AgentCoreStore.get``: the service's
    ``expiresAt`` shows only when the record has no lifecycle deadline of its own."""
    store, fake = ac
    own = datetime(2026, 6, 1, tzinfo=UTC)
    store.put_many([rec(expires_at=own), rec(id="r2")])
    native = datetime(2026, 3, 1, tzinfo=UTC)
    with fake.lock:
        for r in fake.records.values():
            r["expiresAt"] = native.timestamp()
    first, second = must_get(store, "r1"), must_get(store, "r2")
    assert first.expires_at == own
    assert second.expires_at == native


def must_get(store: AgentCoreStore, rid: str) -> MemoryRecord:
    got = store.get(rid)
    assert got is not None
    return got


def test_reactivating_a_superseded_record_clears_its_replacement(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``replaced_by is not None or status is not Status.superseded`` in
    ``store.py::AgentCoreStore.set_status``: a record made active again no longer names a
    replacement, while superseding without naming one keeps the one it had."""
    store, _ = ac
    store.put_many([rec(), rec("likes green tea", id="r2")])
    assert store.set_status(["r1"], Status.superseded, replaced_by="r2").succeeded == ["r1"]
    assert store.set_status(["r1"], Status.superseded).succeeded == ["r1"]
    kept = must_get(store, "r1")
    assert kept.provenance.replaced_by == "r2"
    assert store.set_status(["r1"], Status.active).succeeded == ["r1"]
    back = must_get(store, "r1")
    assert back.status is Status.active and back.provenance.replaced_by is None


# -- per-item outcomes -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("http", "code", "retryable"),
    [
        (400, "VALIDATION", False),
        (409, "CONFLICT", True),
        (500, "SERVICE", True),
        (403, "HTTP_403", False),
    ],
)
def test_an_update_item_failure_is_reported_with_its_code_and_retryability(
    ac: tuple[AgentCoreStore, FakeAgentCore], http: int, code: str, retryable: bool
) -> None:
    """Attacks ``errors.py::item_code`` (each branch, and ``http >= 500`` at 500): the
    per-item ``errorCode`` decides whether the next run retries the record or gives up."""
    store, fake = ac
    assert store.put_many([rec(), rec(id="r2")]).succeeded == ["r1", "r2"]
    fake.fail_next_updates(["r1"], http)
    out = store.put_many([rec("likes green tea"), rec("likes coffee", id="r2")])
    assert out.succeeded == ["r2"]
    assert [(f.id, f.code, f.retryable) for f in out.failed] == [("r1", code, retryable)]


def test_a_throttled_item_is_retried_within_the_batch(
    ac: tuple[AgentCoreStore, FakeAgentCore],
) -> None:
    """Attacks ``transport.py::Transport.batch``'s retry of items answered 429: a single
    throttled item is resent (alone) and lands; the others are not sent twice."""
    store, fake = ac
    assert store.put_many([rec(), rec(id="r2")]).succeeded == ["r1", "r2"]
    fake.fail_next_updates(["r1"], 429)
    out = store.put_many([rec("likes green tea"), rec("likes coffee", id="r2")])
    assert sorted(out.succeeded) == ["r1", "r2"] and out.failed == []
    updates = fake.ops("update")
    assert [len(u["records"]) for u in updates] == [2, 1]
    got = store.get("r1")
    assert got is not None and got.content == "likes green tea"


def test_an_item_throttled_past_the_retries_is_throttled_and_retryable(
    harness: AgentCoreHarness,
) -> None:
    """Attacks ``range(self.item_retries + 1)`` in ``transport.py::Transport.batch``: with
    ``item_retries=2`` the item is sent three times, then reported THROTTLED, retryable."""
    store = harness.store(item_retries=2)
    fake = harness.fake
    assert store.put_many([rec()]).succeeded == ["r1"]
    fake.fail_next_updates(["r1"], 429, times=2)
    assert store.put_many([rec("after two throttles")]).succeeded == ["r1"]
    fake.fail_next_updates(["r1"], 429, times=3)
    out = store.put_many([rec("after three throttles")])
    assert [(f.code, f.retryable) for f in out.failed] == [("THROTTLED", True)]
