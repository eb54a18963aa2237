"""Findings past the nightly budget wait by name and age into a later night's budget, on
every backend (SQLite, DynamoDB in-process and over HTTP). Before, they were only counted
(`review_waiting`): no one could list them, and a steady stream of higher-priority findings
kept a low one waiting for ever (docs/adversarial-review.md, session 26 "Left")."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from memlife.plan import Reason
from memlife.review_queue import ReviewQueue, item_id
from memlife.review_queue.base import content_item_id
from tests.unit.test_review_state import NIGHT, _d, store  # noqa: F401 (its fixture, F811 below)

WAITING = ("waiting",)


def _night(queue: ReviewQueue, n: int, low_priority: float = 0.5, **kw: object) -> dict:
    """Night ``n``: two new findings of priority 3 (records h{n}a, h{n}b) and the low one."""
    ds = [_d(f"h{n}a", 3.0), _d(f"h{n}b", 3.0), _d("low", low_priority)]
    at = NIGHT + timedelta(days=n)
    return dict(queue.queue(ds, budget=2, run_id=f"night-{n}", at=at, **kw))  # type: ignore[arg-type]


def test_a_low_finding_waits_by_name_and_ages_into_a_later_budget(store) -> None:  # noqa: F811
    queue = ReviewQueue.for_store(store)
    counts = _night(queue, 0, listed=10, age_per_day=0.5)
    assert (counts["review_opened"], counts["review_waiting"]) == (2, 1)
    assert counts["review_waiting_listed"] == 1
    [low] = queue.list(states=WAITING)
    assert (low.record_id, low.state, low.first_seen_at) == ("low", "waiting", NIGHT.isoformat())
    assert low.item_id == item_id("low", Reason.MISSING_OWNER.value, "a", "/n")
    assert {i.record_id for i in queue.list()} == {"h0a", "h0b"}  # waiting is not open
    # priority 0.5 against 3.0 each night: 0.5 + 0.5 a day passes 3.0 after five days
    opened_on = None
    for n in range(1, 8):
        counts = _night(queue, n, listed=10, age_per_day=0.5)
        if counts.get("review_opened_waited"):
            opened_on = n
            break
        assert queue.get(low.item_id).state == "waiting"  # type: ignore[union-attr]
    assert opened_on == 6
    item = queue.get(low.item_id)
    assert item is not None and item.state == "open" and item.opened_run == "night-6"
    assert item.first_seen_at == NIGHT.isoformat()  # how long it waited stays known
    assert item.priority == 0.5  # the record's own priority; the gain is the queue's
    # a rerun of that night opens nothing more: what it opened (low and one of the two new
    # ones) counts against its budget
    again = _night(queue, 6, listed=10, age_per_day=0.5)
    assert again.get("review_opened", 0) == 0 and again["review_carried"] == 2
    assert queue.get(low.item_id).opened_run == "night-6"  # type: ignore[union-attr]


def test_without_ageing_a_stream_of_higher_findings_keeps_it_waiting(store) -> None:  # noqa: F811
    """The control: the same nights with no gain a day never open the low finding."""
    queue = ReviewQueue.for_store(store)
    for n in range(8):
        counts = _night(queue, n, listed=10, age_per_day=0.0)
        assert not counts.get("review_opened_waited")
    [low] = queue.list(states=WAITING)
    assert low.record_id == "low" and low.first_seen_at == NIGHT.isoformat()


def test_only_the_best_listed_wait_by_name_the_rest_are_counted(store) -> None:  # noqa: F811
    queue = ReviewQueue.for_store(store)
    ds = [_d(f"r{i}", float(i)) for i in range(10)]
    counts = queue.queue(ds, budget=3, run_id="n1", at=NIGHT, listed=4, age_per_day=0.1)
    assert (counts["review_opened"], counts["review_waiting"]) == (3, 7)
    assert counts["review_waiting_listed"] == 4
    assert sorted(i.record_id for i in queue.list(states=WAITING)) == ["r3", "r4", "r5", "r6"]
    # found again the next night: listed once, not written again, first seen kept
    queue.queue(ds, budget=0, run_id="n2", at=NIGHT + timedelta(days=1), listed=4)
    waiting = {i.record_id: i for i in queue.list(states=WAITING)}
    assert set(waiting) == {"r3", "r4", "r5", "r6"}
    assert {i.first_seen_at for i in waiting.values()} == {NIGHT.isoformat()}


def test_a_dry_run_lists_nothing(store) -> None:  # noqa: F811
    queue = ReviewQueue.for_store(store)
    ds = [_d(f"r{i}", float(i)) for i in range(5)]
    counts = queue.queue(ds, budget=1, run_id="n1", at=NIGHT, listed=10, dry_run=True)
    assert counts["review_waiting_listed"] == 4
    assert queue.list(states=("open", "waiting")) == []


def test_a_waiting_finding_on_other_content_is_first_found_again(store) -> None:  # noqa: F811
    """The record changed while its finding waited: the finding about the new content is
    new, so its age starts again (a waiting row is no answer to keep)."""
    queue = ReviewQueue.for_store(store)
    old = dataclasses.replace(_d("low", 0.5), content_sha256="v1")
    queue.queue([_d("h", 3.0), old], budget=1, run_id="n1", at=NIGHT, listed=5)
    later = NIGHT + timedelta(days=3)
    new = dataclasses.replace(_d("low", 0.5), content_sha256="v2")
    queue.queue([new], budget=0, run_id="n2", at=later, listed=5, age_per_day=1.0)
    [low] = queue.list(states=WAITING)
    assert (low.content_sha256, low.first_seen_at) == ("v2", later.isoformat())


def test_a_reviewer_can_answer_a_waiting_finding_before_it_opens(store) -> None:  # noqa: F811
    queue = ReviewQueue.for_store(store)
    queue.queue([_d("h", 3.0), _d("low", 0.5)], budget=1, run_id="n1", at=NIGHT, listed=5)
    [low] = queue.list(states=WAITING)
    assert queue.close(low.item_id, state="resolved", decision="keep", reviewer="ana",
                       at=NIGHT, operation_id=None)  # fmt: skip
    counts = queue.queue([_d("low", 0.5)], budget=5, run_id="n2", at=NIGHT + timedelta(days=1),
                         listed=5)  # fmt: skip
    assert counts["review_closed_earlier"] == 1 and counts.get("review_opened", 0) == 0
    assert queue.list(states=WAITING) == [] and "low" not in {i.record_id for i in queue.list()}


def test_the_waiting_list_stays_its_listed_length_night_after_night(store) -> None:  # noqa: F811
    """Review of the change: each night wrote its best waiting findings and none went, so a
    stream of new, better findings grew the list by ``listed`` a night (3, 6, 9, ...). The
    findings a night's list leaves out are dropped from it (counted, as before lists)."""
    queue = ReviewQueue.for_store(store)
    for n in range(5):
        ds = [_d(f"n{n}k{k}", 10.0 * n + k) for k in range(5)]
        ds += [_d(f"n{m}k{k}", 10.0 * m + k) for m in range(n) for k in range(5)]
        counts = queue.queue(ds, budget=1, run_id=f"night-{n}", at=NIGHT + timedelta(days=n),
                             listed=3, age_per_day=0.0)  # fmt: skip
        waiting = sorted(i.record_id for i in queue.list(states=WAITING))
        assert waiting == [f"n{n}k{k}" for k in (1, 2, 3)]  # the best after the one opened
        assert counts.get("review_waiting_dropped", 0) == (3 if n else 0)


def test_a_waiting_follower_of_an_answered_finding_is_closed_when_the_content_returns(
    store,  # noqa: F811
) -> None:
    """Review of the change: a reviewer keeps x for content c1; x changes to c2 and the
    finding about c2 waits (budget spent); x goes back to c1. An open follower was closed
    as moot; a waiting one was never found again and waited for ever."""
    queue = ReviewQueue.for_store(store)
    x1 = dataclasses.replace(_d("x", 1.0), content_sha256="c1")
    queue.queue([x1], budget=1, run_id="n1", at=NIGHT, listed=5)
    first = queue.get(item_id("x", Reason.MISSING_OWNER.value, "a", "/n"))
    assert first is not None
    queue.close(first.item_id, state="resolved", decision="keep", reviewer="ana", at=NIGHT,
                operation_id=None)  # fmt: skip
    x2 = dataclasses.replace(_d("x", 1.0), content_sha256="c2")
    queue.queue([_d("h1", 9.0), x2], budget=1, run_id="n2", at=NIGHT + timedelta(days=1),
                listed=5)  # fmt: skip
    follower = queue.get(content_item_id(first.item_id, "c1"))
    assert follower is not None and follower.state == "waiting"
    counts = queue.queue([_d("h2", 9.0), x1], budget=1, run_id="n3",
                         at=NIGHT + timedelta(days=2), listed=5)  # fmt: skip
    assert counts["review_moot_closed"] == 1
    closed = queue.get(follower.item_id)
    assert closed is not None and (closed.state, closed.decision) == (
        "resolved",
        "answered_earlier",
    )


def test_a_waiting_finding_found_again_is_seen_again(store) -> None:  # noqa: F811
    """Review of the change: found night after night, a waiting item kept nights 1 and the
    night it was listed as last seen."""
    queue = ReviewQueue.for_store(store)
    for n in range(4):
        queue.queue([_d(f"h{n}", 9.0), _d("low", 0.5)], budget=1, run_id=f"n{n}",
                    at=NIGHT + timedelta(days=n), listed=5)  # fmt: skip
    [low] = queue.list(states=WAITING)
    assert (low.nights, low.last_seen_run, low.first_seen_at) == (4, "n3", NIGHT.isoformat())


def test_dynamodb_lists_what_is_open_without_reading_what_waits(store, monkeypatch) -> None:  # noqa: F811
    """Review of the change: waiting items shared the open index's partitions, so `review
    list` and every night read every waiting item to find the open ones."""
    queue = ReviewQueue.for_store(store)
    if not hasattr(queue.backend, "state"):
        pytest.skip("DynamoDB only")
    queue.queue([_d(f"r{i}", float(i)) for i in range(60)], budget=1, run_id="n1", at=NIGHT,
                listed=59)  # fmt: skip
    fresh = ReviewQueue.for_store(store)  # another process: `memlife review list`
    read: list[object] = []
    batch_get = fresh.backend.state.batch_get
    monkeypatch.setattr(fresh.backend.state, "batch_get",
                        lambda keys: (read.extend(keys), batch_get(keys))[1])  # fmt: skip
    assert [i.record_id for i in fresh.list()] == ["r59"]
    assert len(read) == 1
    assert len(fresh.list(states=WAITING)) == 59
    # disputed while it waits: listed as open from then on
    [w] = [i for i in fresh.list(states=WAITING) if i.record_id == "r0"]
    assert fresh.close(w.item_id, state="disputed", decision="dispute", reviewer="ana",
                       at=NIGHT, operation_id=None)  # fmt: skip
    assert {i.record_id for i in ReviewQueue.for_store(store).list()} == {"r59", "r0"}


def test_a_crash_between_the_nights_writes_then_an_answer_still_opens_what_aged(
    store,  # noqa: F811
    monkeypatch,
) -> None:
    """Review of the change (DynamoDB writes a night item by item): the night's new waiting
    items were written before the ones that open after waiting. Killed in between, and a
    reviewer answering a new waiting item, the rerun counted that item against the night's
    budget (it was written by this run) and opened nothing. The aged item is written first."""
    queue = ReviewQueue.for_store(store)
    if not hasattr(queue.backend, "state"):
        pytest.skip("SQLite writes the night in one transaction")
    queue.queue([_d("h0", 9.0), _d("low", 0.5)], budget=1, run_id="n1", at=NIGHT, listed=5)
    night = [_d("low", 0.5), _d("h2", 9.0), _d("h3", 1.0)]  # low gains 10 in ten days
    at = NIGHT + timedelta(days=10)
    ddb = queue.backend.state.ddb
    put, inserts = ddb.put_item, []

    def killed_at_the_second_insert(**kw: object) -> object:
        if kw.get("ConditionExpression") == "attribute_not_exists(pk)":
            inserts.append(kw)
            if len(inserts) == 2:
                raise KeyboardInterrupt("killed")
        return put(**kw)

    monkeypatch.setattr(ddb, "put_item", killed_at_the_second_insert)
    with pytest.raises(KeyboardInterrupt):
        queue.queue(night, budget=1, run_id="n2", at=at, listed=5, age_per_day=1.0)
    monkeypatch.setattr(ddb, "put_item", put)
    for w in queue.list(states=WAITING):  # a reviewer answers what the night listed
        if w.opened_run == "n2":
            queue.close(w.item_id, state="resolved", decision="keep", reviewer="ana", at=at,
                        operation_id=None)  # fmt: skip
    queue.queue(night, budget=1, run_id="n2", at=at, listed=5, age_per_day=1.0)
    opened = {i.record_id for i in queue.list() if i.opened_run == "n2"}
    assert opened == {"low"}
