"""DynamoDB review items: listing what is open reads the sparse ``open`` index, not every
item ever resolved; items of before the index are still listed, and indexed by the next
night that writes the queue. In-process moto and a moto server over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import memlife.state as state_mod
from memlife.plan import Action, Decision, Reason
from memlife.review_queue import ReviewQueue
from memlife.review_queue.base import OPEN_STATES
from memlife.review_queue.dynamodb import BUCKETS, INDEXED, DynamoReviews
from memlife.state.dynamodb import OPEN_INDEX, DynamoState
from tests.support.aws_state import aws_state

NIGHT = datetime(2026, 11, 1, 2, 15, tzinfo=UTC)


class RemoteStore:
    connection = None


@pytest.fixture(params=["inprocess", "server"])
def state(request, tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoState]:
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    with aws_state(request.param) as (url, st):
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: st})
        yield st


def _d(rid: str, priority: float = 1.0) -> Decision:
    return Decision(rid, "a", "/n", Action.review, [Reason.MISSING_OWNER], 0.5,
                    priority=priority, memory_type="semantic")  # fmt: skip


def _queue() -> ReviewQueue:
    queue = ReviewQueue.for_store(RemoteStore())
    assert isinstance(queue.backend, DynamoReviews)
    return queue


def _resolve(queue: ReviewQueue, iid: str, state: str = "resolved") -> None:
    assert queue.close(iid, state=state, decision="keep", reviewer="rita", at=NIGHT,
                       operation_id=None)  # fmt: skip


def _indexed_ids(state: DynamoState) -> set[str]:
    return {raw["sk"]["S"] for b in range(BUCKETS)
            for raw in state.query(f"rvopen#{b}", index=OPEN_INDEX)}  # fmt: skip


class Reads:
    """Items the table read for Query calls (ScannedCount), counted at the client."""

    def __init__(self, state: DynamoState) -> None:
        self.scanned = 0
        state.ddb.meta.events.register("after-call.dynamodb.Query", self._count)

    def _count(self, parsed: dict[str, Any], **_: Any) -> None:
        self.scanned += int(parsed.get("ScannedCount", 0))


def test_listing_open_items_reads_what_is_open_not_what_was_resolved(state) -> None:
    queue = _queue()
    queue.queue([_d(f"r{i}", float(i)) for i in range(30)], budget=30, run_id="n1", at=NIGHT)
    items = queue.list()
    for item in items[:26]:
        _resolve(queue, item.item_id)
    _resolve(queue, items[26].item_id, state="disputed")  # disputed waits for a reviewer too
    want = {i.item_id for i in items[26:]}
    assert _indexed_ids(state) == want

    reads = Reads(state)
    listed = _queue().list()
    assert {i.item_id for i in listed} == want
    assert {i.item_id: i.state for i in listed}[items[26].item_id] == "disputed"
    # the open items' index entries, not the 26 resolved items (the item partitions held 30)
    assert reads.scanned == len(want)
    # resolved items are still listed when asked for (from the item partitions)
    resolved = _queue().list(states=("resolved",))
    assert {i.item_id for i in resolved} == {i.item_id for i in items[:26]}


def _as_before_the_index(state: DynamoState) -> None:
    """The table as a version without the index left it: no index keys, no INDEXED."""
    for b in range(BUCKETS):
        for raw in state.query(f"rv#{b}"):
            state.ddb.update_item(TableName=state.table, Key={"pk": raw["pk"], "sk": raw["sk"]},
                                  UpdateExpression="REMOVE open_pk, open_sk")  # fmt: skip
    state.ddb.delete_item(TableName=state.table, Key=INDEXED)


def test_items_of_before_the_index_are_listed_then_indexed_by_the_next_night(state) -> None:
    queue = _queue()
    queue.queue([_d(f"r{i}") for i in range(6)], budget=6, run_id="n1", at=NIGHT)
    before = sorted(queue.list(), key=lambda i: i.record_id)  # r0 .. r5
    _as_before_the_index(state)
    assert _indexed_ids(state) == set()

    old = _queue()
    assert {i.item_id for i in old.list()} == {i.item_id for i in before}  # read as before
    _resolve(old, before[0].item_id)  # a reviewer resolves one the index never held
    # the next night carries the open ones and opens one more: every open item is indexed
    counts = old.queue([_d(f"r{i}") for i in range(1, 7)], budget=6, run_id="n2",
                       at=NIGHT + timedelta(days=1))  # fmt: skip
    assert (counts["review_carried"], counts["review_opened"]) == (5, 1)
    assert state.get(INDEXED) is not None
    open_ids = {i.item_id for i in before[1:]} | {i.item_id for i in _queue().list()}
    assert _indexed_ids(state) == open_ids and len(open_ids) == 6
    assert {i.item_id for i in _queue().list()} == open_ids


def test_the_backfill_leaves_out_an_item_a_reviewer_resolves_meanwhile(state, monkeypatch) -> None:
    """The backfill reads the open items, then gives each the index's keys: an item
    resolved between the two stays out of the index (its write is conditional)."""
    queue = _queue()
    queue.queue([_d("r1"), _d("r2")], budget=2, run_id="n1", at=NIGHT)
    _as_before_the_index(state)
    backend = _queue().backend
    assert isinstance(backend, DynamoReviews)
    snapshot = list(backend._scan(OPEN_STATES))  # what the backfill read
    gone, kept = (raw["sk"]["S"] for raw in snapshot)
    _resolve(queue, gone)
    monkeypatch.setattr(backend, "_scan", lambda states: iter(snapshot))
    backend._backfill()
    assert _indexed_ids(state) == {kept}
    assert [i.item_id for i in _queue().list()] == [kept]


def test_the_night_lists_what_it_wrote_before_the_index_shows_it(state, monkeypatch) -> None:
    """The index is eventually consistent, and the night lists the open items right after
    writing them (the sweep, the removed records' items): what this process wrote open is
    read beside the index (session 24 review: with the index lagging, a backfill night
    listed none of its 7 open items)."""
    queue = _queue()
    queue.queue([_d(f"r{i}") for i in range(6)], budget=10, run_id="n1", at=NIGHT)
    _as_before_the_index(state)
    lagging = {b: list(state.query(f"rvopen#{b}", index=OPEN_INDEX)) for b in range(BUCKETS)}
    real = DynamoState.query

    def index_as_before(self, pk: str, *, index: str | None = None, **kw: Any) -> Any:
        if index:  # the index as it was before tonight's writes reached it
            return iter(lagging[int(pk.split("#")[1])])
        return real(self, pk, index=index, **kw)

    monkeypatch.setattr(DynamoState, "query", index_as_before)
    night = _queue()
    night.queue([_d(f"r{i}") for i in range(7)], budget=10, run_id="n2",
                at=NIGHT + timedelta(days=1))  # fmt: skip
    backend = night.backend
    assert isinstance(backend, DynamoReviews)
    truth = {raw["sk"]["S"] for raw in backend._scan(OPEN_STATES)}
    assert len(truth) == 7
    assert {i.item_id for i in backend.list(OPEN_STATES)} == truth
