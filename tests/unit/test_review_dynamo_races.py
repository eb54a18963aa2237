"""The DynamoDB review queue's conditional writes, each forced into the window between its
read and its write (forty-second audit b): two resolvers at once, a reviewer's answer
landing between a night's lookup and its write, and memlife's own closing of a disputed
item. SQLite holds each of these in one statement; DynamoDB only by the write's condition,
which no earlier test reached (the pre-read answered first in every sequential test)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import memlife.state as state_mod
from memlife.review_queue import ReviewQueue, item_id
from memlife.review_queue.base import content_item_id
from memlife.review_queue.dynamodb import DynamoReviews
from memlife.state.dynamodb import DynamoState
from tests.support.aws_state import aws_state
from tests.unit.test_review_state import NIGHT, RemoteStore, _d

IID = item_id("r1", "MISSING_OWNER", "a", "/n")


@pytest.fixture()
def state(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoState]:
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    with aws_state("inprocess") as (url, st):
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: st})
        yield st


def _queue() -> ReviewQueue:
    """A queue as one process opens it (its own backend object)."""
    queue = ReviewQueue.for_store(RemoteStore())
    assert isinstance(queue.backend, DynamoReviews)
    return queue


def _after_read(monkeypatch: pytest.MonkeyPatch, queue: ReviewQueue, then: Any) -> None:
    """``queue``'s next read of items returns what it read, then ``then()`` runs (another
    process acting between this one's read and its write)."""
    backend = queue.backend
    real = backend.get_many
    fired: list[bool] = []

    def read(ids: Any) -> Any:
        seen = real(ids)
        if not fired:
            fired.append(True)
            then()
        return seen

    monkeypatch.setattr(backend, "get_many", read)


def test_two_resolvers_at_once_the_second_write_is_refused(state, monkeypatch) -> None:
    """Attacks the condition ``#s <> :resolved`` of ``DynamoReviews.close``'s transaction.
    Ana disputes the item; her process has read it open when Bob's keep lands. Her write
    must be refused: the item stays resolved with Bob's answer, and no dispute marker is
    left to protect the record (``disputed`` reads the markers)."""
    _queue().queue([_d("r1", 1.0)], budget=5, run_id="night-1", at=NIGHT)
    ana, bob = _queue(), _queue()
    _after_read(monkeypatch, ana, lambda: bob.close(
        IID, state="resolved", decision="keep", reviewer="bob", at=NIGHT, operation_id="op-b"))  # fmt: skip
    assert not ana.close(IID, state="disputed", decision="dispute", reviewer="ana", at=NIGHT,
                         operation_id="op-a")  # fmt: skip
    item = _queue().get(IID)
    assert item is not None
    assert (item.state, item.decision, item.reviewer) == ("resolved", "keep", "bob")
    assert _queue().disputed("a", "/n") == frozenset()


def test_a_night_does_not_carry_an_item_answered_after_its_lookup(state, monkeypatch) -> None:
    """Attacks ``#s <> :resolved`` of the carried items' update in ``write_night``. The
    night looks the finding up (open: carried), then a reviewer resolves the item before
    the night writes: the resolved item keeps its nights and last seen run."""
    _queue().queue([_d("r1", 1.0)], budget=5, run_id="night-1", at=NIGHT)
    night = _queue()
    _after_read(monkeypatch, night, lambda: _queue().close(
        IID, state="resolved", decision="keep", reviewer="bob", at=NIGHT, operation_id="op-b"))  # fmt: skip
    night.queue([_d("r1", 1.0)], budget=5, run_id="night-2", at=NIGHT + timedelta(days=1))
    item = _queue().get(IID)
    assert item is not None and item.state == "resolved"
    assert (item.nights, item.last_seen_run) == (1, "night-1")


def test_a_waiting_item_answered_after_the_lookup_is_not_moved_open(state, monkeypatch) -> None:
    """Attacks ``#s = :waiting`` of ``DynamoReviews._while_waiting`` (the move of a waiting
    item that opens tonight). A reviewer answers the waiting item between the night's lookup
    and its write: the answer stays, the item is not written back open over it."""
    first = _queue()
    first.queue([_d("r0", 2.0), _d("r1", 1.0)], budget=1, run_id="night-1", at=NIGHT, listed=5)
    assert _queue().get(IID).state == "waiting"  # type: ignore[union-attr]
    night = _queue()
    _after_read(monkeypatch, night, lambda: _queue().close(
        IID, state="resolved", decision="keep", reviewer="bob", at=NIGHT, operation_id="op-b"))  # fmt: skip
    night.queue([_d("r1", 1.0)], budget=5, run_id="night-2", at=NIGHT + timedelta(days=1),
                listed=5)  # fmt: skip
    item = _queue().get(IID)
    assert item is not None
    assert (item.state, item.decision, item.reviewer) == ("resolved", "keep", "bob")
    assert [i.item_id for i in _queue().list()] == [item_id("r0", "MISSING_OWNER", "a", "/n")]


def test_memlife_closing_a_disputed_item_keeps_no_operation_of_the_dispute(state) -> None:
    """Attacks the REMOVE of a ``None`` column in ``DynamoReviews.close``: a disputed item
    (its dispute's operation recorded) closed with no operation names no operation, as on
    SQLite (where the column is set NULL). Kept, the dispute's operation is read as the
    closing one (resolve's ``others``, ``review show``). Since audit 51b the night no longer
    closes a disputed item as moot (the record went back to the content a reviewer
    answered): the dispute stands; the close is then made here, as memlife's would be."""
    queue = _queue()
    queue.queue([_d("r1", 1.0)], budget=5, run_id="night-1", at=NIGHT)
    sha = "a" * 64  # the items' content hash (the findings above had none: record it)
    d1 = _d("r1", 1.0)
    d1.content_sha256 = sha
    queue.queue([d1], budget=5, run_id="night-2", at=NIGHT + timedelta(days=1))
    queue.close(IID, state="resolved", decision="keep", reviewer="bob", at=NIGHT,
                operation_id="op-keep")  # fmt: skip
    d2 = _d("r1", 1.0)
    d2.content_sha256 = "b" * 64  # other content: asked again under a follow-up item
    queue.queue([d2], budget=5, run_id="night-3", at=NIGHT + timedelta(days=2))
    follow = content_item_id(IID, sha)
    assert queue.close(follow, state="disputed", decision="dispute", reviewer="ana", at=NIGHT,
                       operation_id="op-dispute")  # fmt: skip
    # back to the answered content: the disputed follow-up stands (audit 51b)
    counts = _queue().queue([d1], budget=5, run_id="night-4", at=NIGHT + timedelta(days=3))
    assert "review_moot_closed" not in counts
    assert _queue().disputed("a", "/n") == frozenset({"r1"})
    assert _queue().close(follow, state="resolved", decision="answered_earlier",
                          reviewer="memlife:night-4", at=NIGHT, operation_id=None)  # fmt: skip
    item = _queue().get(follow)
    assert item is not None and (item.state, item.decision) == ("resolved", "answered_earlier")
    assert item.operation_id is None
    assert _queue().disputed("a", "/n") == frozenset()


@pytest.mark.parametrize("decision", ["erased", "keep"])
def test_an_erased_records_item_keeps_no_owner_on_dynamodb(state, decision: str) -> None:
    """As on SQLite (tests/unit/test_erasure_erased_owner.py, session 43): an item closed
    because its record was erased drops the record's owner (free text, the record's own);
    an item answered otherwise keeps it."""
    from memlife.plan import Reason

    queue, iid = _queue(), item_id("r1", "LOW_SCORE", "a", "/n")
    queue.queue([_d("r1", 1.0, Reason.LOW_SCORE)], budget=5, run_id="night-1", at=NIGHT)
    before = queue.get(iid)
    assert before is not None and before.owner
    assert queue.close(iid, state="resolved", decision=decision, reviewer="memlife:e",
                       at=NIGHT, operation_id="op-e")  # fmt: skip
    after = _queue().get(iid)
    assert after is not None
    assert (after.owner is None) is (decision == "erased"), after.owner
