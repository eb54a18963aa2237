"""Open review items a night no longer finds are closed (memlife.review_sweep): an owner was
set, or the record is gone. Before, such an item waited for a reviewer for ever: the
queue held questions nothing asked any more, and items about records removed on nights
before session 22 stayed open. A closing by memlife answers nothing: the finding, back,
is asked again. Scoped, failed and dry runs close nothing they did not plan; a dispute
stays; a rerun closes nothing the first attempt kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.review_queue import ReviewItem, ReviewQueue
from memlife.stores.sqlite import SqliteStore

DAY1 = datetime(2026, 1, 5, 8, tzinfo=UTC)
NIGHT1 = DAY1 + timedelta(days=2)
NIGHT2 = NIGHT1 + timedelta(days=1)
NIGHT3 = NIGHT2 + timedelta(days=1)
NS = "/team/notes"


def rec(rid: str, text: str, **kw: object) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": "u-7", "namespace": NS, "memory_type": "semantic",
        "content": text, "created_at": DAY1, "source": "agent_inferred", "confidence": 0.6, **kw,
    })  # fmt: skip


TEXTS = {
    "owned": "The team standup is at 9:30.",
    "gone": "The deploy key rotates every quarter.",
    "disputed": "The office closes on Fridays at noon.",
    "kept": "The printer is on the third floor.",  # still without an owner
}


class Home:
    def __init__(self, path: Path) -> None:
        self.path = path

    def store(self) -> SqliteStore:
        return SqliteStore(self.path / "memlife.db")

    def put(self, *records: MemoryRecord) -> None:
        store = self.store()
        try:
            store.put_many(list(records))
        finally:
            store.close()

    def items(self, *states: str) -> list[ReviewItem]:
        store = self.store()
        try:
            return ReviewQueue.for_store(store).list(states=states or ("open", "disputed"))
        finally:
            store.close()

    def missing_owner(self, rid: str, *states: str) -> list[ReviewItem]:
        found = self.items(*(states or ("open", "disputed", "resolved")))
        return [i for i in found if i.record_id == rid and i.reason == "MISSING_OWNER"]


@pytest.fixture()
def home(offline_home: Path) -> Home:
    h = Home(offline_home)
    h.put(*(rec(rid, text) for rid, text in TEXTS.items()))
    run_local(RunConfig(dry_run=False, now=NIGHT1))
    assert all(len(h.missing_owner(rid)) == 1 for rid in TEXTS)
    (disputed,) = h.missing_owner("disputed")
    store = h.store()
    try:
        queue = ReviewQueue.for_store(store)
        queue.close(disputed.item_id, state="disputed", decision="dispute", reviewer="cy",
                    at=NIGHT1, operation_id=None)  # fmt: skip
        store.delete_many(["gone"])  # removed outside any run: nothing closed its items
    finally:
        store.close()
    # owners set: the MISSING_OWNER findings no longer hold
    h.put(rec("owned", TEXTS["owned"], owner="platform"),
          rec("disputed", TEXTS["disputed"], owner="platform"))  # fmt: skip
    return h


def test_items_whose_finding_no_longer_holds_or_whose_record_is_gone_are_closed(
    home: Home,
) -> None:
    open_before = {i.item_id for i in home.items("open")}
    dry = run_local(RunConfig(dry_run=True, now=NIGHT2))
    assert dry.other["review_cleared"] == 1 and dry.other["review_record_gone"] >= 1, dry.other
    assert {i.item_id for i in home.items("open")} == open_before  # a dry run only counts
    scoped = run_local(RunConfig(dry_run=False, now=NIGHT2, namespaces=("/elsewhere/*",)))
    assert "review_cleared" not in scoped.other  # the shard was not planned: nothing closed
    assert {i.item_id for i in home.items("open")} == open_before

    night = run_local(RunConfig(dry_run=False, now=NIGHT2))
    (owned,) = home.missing_owner("owned")
    assert (owned.state, owned.decision) == ("resolved", "cleared")
    assert owned.reviewer == f"memlife:{night.run_id}"
    gone = [i for i in home.items("resolved") if i.record_id == "gone"]
    assert gone and {i.decision for i in gone} == {"record_gone"}
    assert night.other["review_cleared"] == 1
    assert night.other["review_record_gone"] == len(gone)
    (disputed,) = home.missing_owner("disputed")
    assert disputed.state == "disputed"  # a dispute waits for a person
    assert not {i.record_id for i in home.items("open")} & {"gone"}
    (kept,) = home.missing_owner("kept")  # found again: carried, not closed
    assert (kept.state, kept.nights, kept.last_seen_run) == ("open", 2, night.run_id)
    rerun = run_local(RunConfig(dry_run=False, now=NIGHT2))  # the same night: nothing more
    assert "review_cleared" not in rerun.other and "review_record_gone" not in rerun.other

    # the owner goes again: memlife's closing answered nothing, so the finding is asked again
    home.put(rec("owned", TEXTS["owned"]))
    again = run_local(RunConfig(dry_run=False, now=NIGHT3))
    assert again.other["review_asked_again"] >= 1, again.other
    reopened = home.missing_owner("owned", "open")
    assert len(reopened) == 1 and reopened[0].item_id != owned.item_id


# -- what the session's review of the first form found: findings a night never looked at --


def _only(h: Home, rid: str, reason: str) -> list[ReviewItem]:
    return [i for i in h.items("open", "disputed", "resolved")
            if i.record_id == rid and i.reason == reason]  # fmt: skip


def test_a_record_planned_as_a_delete_not_carried_out_keeps_its_items(offline_home: Path) -> None:
    """The first form closed every item the night did not find again: an expired record in
    a namespace where deletion is only proposed is planned `delete_expired`, its findings
    never looked at, and its MISSING_OWNER item was closed `cleared` though it has no
    owner. Items close on the store's evidence only."""
    h = Home(offline_home)
    h.put(rec("x", "The printer is on the third floor.", expires_at=NIGHT1 + timedelta(hours=12)))
    run_local(RunConfig(dry_run=False, now=NIGHT1))
    night = run_local(RunConfig(dry_run=False, now=NIGHT2))
    assert night.other["proposed_deletions"] == 1 and "review_cleared" not in night.other
    ((state, decision),) = [(i.state, i.decision) for i in _only(h, "x", "MISSING_OWNER")]
    assert (state, decision) == ("open", None)


def _coffee_tea_pair(offline_home: Path) -> tuple[Home, ReviewItem, str, datetime]:
    """x (coffee) -> a1 (gave up coffee for tea), one night run: the pair item x -> a1 is
    open. Returns the home, the item, a1's text and that night's cutoff."""
    h = Home(offline_home)
    coffee, tea = (
        "I drink a large black coffee every morning.",
        "I gave up coffee in October; my mornings are green tea now.",
    )
    later = DAY1 + timedelta(days=39)
    h.put(rec("x", coffee), rec("a1", tea, created_at=later))
    first = later + timedelta(days=2)
    run_local(RunConfig(dry_run=False, now=first))
    (item,) = _only(h, "x", "POSSIBLE_UPDATE")
    assert (item.state, item.pair_id) == ("open", "a1")
    return h, item, tea, first


def test_a_pair_whose_newer_record_is_merged_moves_to_the_merged_record(offline_home: Path) -> None:
    """x -> a1 is open; a duplicate of a1 arrives and the two merge. The first form closed
    x's item `cleared` (the planner lets x's pair wait a night for the merged record), then
    opened a new item x -> R: a close and a reopen per merge, its nights lost; where the merge
    was withheld, the finding was closed for good. Now the item stays, and is renewed for R."""
    h, item, tea, first = _coffee_tea_pair(offline_home)
    h.put(rec("a2", tea, created_at=first + timedelta(hours=1)))
    merged = run_local(RunConfig(dry_run=False, now=first + timedelta(days=1)))
    assert merged.lifecycle["consolidated"] == 1 and "review_cleared" not in merged.other
    after = run_local(RunConfig(dry_run=False, now=first + timedelta(days=2)))
    (moved,) = _only(h, "x", "POSSIBLE_UPDATE")
    assert moved.item_id == item.item_id and moved.state == "open"
    assert moved.pair_id not in ("a1", "a2") and after.other["review_pair_changed"] == 1


def test_a_run_at_an_earlier_cutoff_leaves_a_later_nights_item(offline_home: Path) -> None:
    """A retried earlier night (its own, older cutoff) after a later night found a record
    stale: at the older cutoff it is not stale yet, and the first form closed the later
    night's item `cleared` (resolved before it was opened)."""
    h = Home(offline_home)
    h.put(MemoryRecord.model_validate({
        "id": "p", "actor_id": "u-7", "namespace": "/team/runbooks", "memory_type": "procedural",
        "content": "Restart the queue worker with systemctl restart qw.", "created_at": DAY1,
        "source": "user_stated", "confidence": 0.9, "owner": "ops", "last_verified_at": DAY1,
    }))  # fmt: skip
    stale_at = DAY1 + timedelta(days=180)
    run_local(RunConfig(dry_run=False, now=stale_at + timedelta(hours=12)))
    (item,) = _only(h, "p", "STALE_VERIFICATION")
    early = run_local(RunConfig(dry_run=False, now=stale_at - timedelta(hours=12)))
    assert "review_cleared" not in early.other
    assert [(i.item_id, i.state) for i in _only(h, "p", "STALE_VERIFICATION")] == [
        (item.item_id, "open")
    ]


def test_a_low_score_risen_by_the_agents_reads_closes_its_item(offline_home: Path) -> None:
    """A procedural record scoring under its low score opens a LOW_SCORE item. The agent then
    recalls it often: the next night scores it above (its reads in the access ledger) and
    does not find it again. Before, the item waited for a reviewer for ever; now it is closed
    `cleared` on that evidence, and its twin that nobody read stays open. A retried earlier
    night, where the record still scores high (verification decays with time), closes
    nothing a later night found."""
    from memlife.ledger import AccessLedger
    from memlife.model import plan_view
    from memlife.plan import Planner
    from memlife.policy import load_policy

    h = Home(offline_home)
    night1 = DAY1 + timedelta(days=3 * 365)

    def runbook(rid: str) -> MemoryRecord:
        return MemoryRecord.model_validate({
            "id": rid, "actor_id": "u-7", "namespace": "/team/runbooks",
            "memory_type": "procedural", "content": f"Rotate the {rid} key with vault rotate.",
            "created_at": DAY1, "source": "agent_inferred", "confidence": 0.3, "owner": "ops",
            "last_verified_at": night1 - timedelta(days=170),
        })  # fmt: skip

    h.put(runbook("read"), runbook("unread"))
    early = night1 - timedelta(days=30)
    planners = {t: Planner(load_policy("policies/default.yaml"), t) for t in (early, night1)}
    view = plan_view(runbook("read"))
    assert planners[night1].low_score_finding(view)  # the premise: low at night 1 ...
    assert not planners[early].low_score_finding(view)  # ... and not yet 30 days before

    run_local(RunConfig(dry_run=False, now=night1))
    assert [i.state for i in _only(h, "read", "LOW_SCORE")] == ["open"]
    assert [i.state for i in _only(h, "unread", "LOW_SCORE")] == ["open"]

    retried = run_local(RunConfig(dry_run=False, now=early))
    assert "review_cleared" not in retried.other, retried.other
    assert [i.state for i in _only(h, "read", "LOW_SCORE")] == ["open"]

    ledger = AccessLedger(offline_home / "ledger", flush_seconds=None)
    for hour in range(12):
        ledger.append("u-7", "/team/runbooks", "read", at=night1 + timedelta(hours=hour + 1))
    ledger.close()
    night2 = run_local(RunConfig(dry_run=False, now=night1 + timedelta(days=1)))
    assert night2.other["review_cleared"] == 1, night2.other
    (read,) = _only(h, "read", "LOW_SCORE")
    assert (read.state, read.decision) == ("resolved", "cleared")
    (unread,) = _only(h, "unread", "LOW_SCORE")
    assert (unread.state, unread.nights) == ("open", 2)  # found again: carried


def test_a_pair_whose_newer_record_a_reviewer_superseded_is_closed_the_night_after(
    offline_home: Path,
) -> None:
    """Session 30 operator review: x -> a1 was open; a reviewer superseded a1 by b (which is
    no update of x). Nights later the item was still open, never found again nor closed,
    and its default decision refused (a1 "is not an active record"). Now the first night
    after the supersede that does not pair x again closes the item `cleared`."""
    from memlife.review_queue import resolve

    h, item, _, first = _coffee_tea_pair(offline_home)
    h.put(rec("b", "The printer is on the third floor.", created_at=first))
    (a1_item,) = [i for i in h.items("open") if i.record_id == "a1"]
    with h.store() as store:
        resolve(store, a1_item.item_id, "supersede", "ana", by="b",
                now=first + timedelta(hours=12))  # fmt: skip
        assert store.get("a1").status.value == "superseded"  # type: ignore[union-attr]
    night = run_local(RunConfig(dry_run=False, now=first + timedelta(days=1)))
    (closed,) = _only(h, "x", "POSSIBLE_UPDATE")
    assert (closed.state, closed.decision) == ("resolved", "cleared"), closed
    assert night.other["review_cleared"] >= 1


def test_an_item_an_earlier_version_opened_for_a_same_instant_pair_is_closed(
    offline_home: Path,
) -> None:
    """Session 30 review of the same-time rule: items opened before it for two records saved
    at one instant were never found again nor closed, and their default `supersede` retired
    the complementary fact. The sweep closes them `cleared`."""
    from memlife.review_queue import ReviewItem, ReviewQueue

    h = Home(offline_home)
    h.put(rec("x", "I drink a large black coffee every morning.", owner="team"),
          rec("y", "I gave up coffee in October; my mornings are green tea now.", owner="team"))  # fmt: skip
    opened = (DAY1 + timedelta(days=1)).isoformat()
    with h.store() as store:  # as the earlier version's night wrote it
        old = ReviewItem("rv-oldpair", "x", "POSSIBLE_UPDATE", "y", "u-7", NS, "semantic",
                         "team", 0.5, "open", None, None, 1, "old-run", opened, "old-run",
                         opened, None, None, store.get("x").sha256)  # type: ignore[union-attr]  # fmt: skip
        ReviewQueue.for_store(store).backend.write_night([], [old], "old-run", opened, [])
    night = run_local(RunConfig(dry_run=False, now=NIGHT2))
    (item,) = _only(h, "x", "POSSIBLE_UPDATE")
    assert (item.state, item.decision) == ("resolved", "cleared"), item
    assert night.other["review_cleared"] >= 1
