"""Stateful (model-based) test of the review queue across nights (session 41).

The machine drives real components: a SQLite store under a temporary MEMLIFE_HOME, real
nightly runs (``run_local``, apply and dry run, the extractive consolidator, no model key),
and the CLI (``review list``, ``review resolve``, ``hold place|release``, ``erase``) through
``tests.support.cli.invoke``. Two tenants (actors u-7 and u-8) each hold an older record
(coffee), a newer one (tea: a POSSIBLE_UPDATE pair with the older) and a note; records
without an owner are MISSING_OWNER findings.

Model: the records that should be live (per id: tenant, content, owner, held, pending
erasure), the snapshot of every held record, and the reviewer's answers (per tenant, record
and reason: the content hash and pair a keep or verify was made on).

Rules: write/refresh records (owner or not), change a record's content, give it an owner,
run a night (apply, dry run, rerun of the same cutoff), list the queue, resolve an open
item with each decision the CLI offers (keep, verify, supersede, delete, dispute), place
and release a legal hold, erase a record, advance the clock.

Invariants (after every step):
- every open item is listed once (CLI list == queue; one open item per finding) and the
  list filtered by actor holds only that tenant's items;
- after an apply night every open item names a live record of its own tenant (never an
  erased or deleted one);
- a reviewer's answer is not raised again while the record holds the answered content
  (and pair);
- held records are untouched (content, status) by nights and resolutions;
- the store holds exactly the model's live records, with the model's content and owner;
- a night's counts match the queue's change; a dry run and a rerun change nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from memlife.model import MemoryRecord, Status
from memlife.pipeline import RunConfig, run_local
from memlife.review_queue import ReviewItem, ReviewQueue
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

REPO = Path(__file__).resolve().parents[2]
DAY1 = datetime(2026, 1, 5, 8, tzinfo=UTC)
NS = "/team/notes"
ACTORS = ("u-7", "u-8")
SLOTS = ("old", "new", "note")
TEXTS = {
    "old": ("I drink a large black coffee every morning.", "I cycle to the office on Mondays."),
    "new": (
        "I gave up coffee in October; my mornings are green tea now.",
        "I moved to Berlin in March and now take the tram.",
    ),  # fmt: skip
    "note": ("Deploy with care and watch the dashboards.", "The quarterly report is due Friday."),
}
CREATED = {"old": DAY1, "new": DAY1 + timedelta(days=39), "note": DAY1}
OPEN = ("open", "disputed")
ALL = ("open", "disputed", "waiting", "resolved")
REVIEWER = "ana@example.com"
EXAMPLES = int(os.environ.get("STATEFUL_REVIEW_EXAMPLES", "12"))
CLOSING = ("review_items_closed", "review_cleared", "review_record_gone",
           "review_record_superseded", "review_moot_closed")  # fmt: skip


def rid(actor: str, slot: str) -> str:
    return f"{actor}-{slot}"


def make(actor: str, slot: str, text: int, owner: str | None) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid(actor, slot), "actor_id": actor, "namespace": NS, "memory_type": "semantic",
        "content": TEXTS[slot][text], "created_at": CREATED[slot], "source": "agent_inferred",
        "confidence": 0.6, "owner": owner, "subject": "deploy" if slot == "note" else None,
    })  # fmt: skip


def finding(i: ReviewItem) -> tuple[str, str, str, str]:
    return (i.actor_id, i.namespace, i.record_id, i.reason)


class ReviewMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="memlife-stateful-review-")
        self.saved = {k: os.environ.get(k) for k in
                      ("MEMLIFE_HOME", "MEMLIFE_STORE", "MEMLIFE_RECEIPTS", "ANTHROPIC_API_KEY",
                       "MEMLIFE_STATE")}  # fmt: skip
        self.cwd = os.getcwd()
        os.chdir(REPO)
        os.environ["MEMLIFE_HOME"] = self.dir
        for k in ("MEMLIFE_STORE", "MEMLIFE_RECEIPTS", "ANTHROPIC_API_KEY", "MEMLIFE_STATE"):
            os.environ.pop(k, None)
        self.path = os.path.join(self.dir, "memlife.db")
        self.clock = DAY1 + timedelta(days=41)
        # the model: live records (id -> content index, owner, actor), held ids and their
        # snapshot, pending erasures, the reviewer's answers, the last night
        self.live: dict[str, tuple[str, int, str | None]] = {}
        self.held: dict[str, tuple[str, str]] = {}
        self.pending_erase: set[str] = set()
        self.answers: dict[tuple[str, str, str, str], tuple[str, str | None]] = {}
        self.last_cutoff: datetime | None = None
        self.rerunnable = False
        self.after_night = self.rerunnable = False
        db = SqliteStore(self.path)
        records = [make(a, s, 0, None) for a in ACTORS for s in SLOTS]
        db.put_many(records)
        db.close()
        for r in records:
            self.live[r.id] = (r.actor_id, 0, None)

    def teardown(self) -> None:
        os.chdir(self.cwd)
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------------
    def db(self) -> SqliteStore:
        return SqliteStore(self.path)

    def items(self, states: tuple[str, ...] = ALL) -> dict[str, ReviewItem]:
        db = self.db()
        try:
            return {i.item_id: i for i in ReviewQueue.for_store(db).list(states=states)}
        finally:
            db.close()

    def record(self, record_id: str) -> MemoryRecord | None:
        db = self.db()
        try:
            return db.get(record_id)
        finally:
            db.close()

    def snapshot(self, r: MemoryRecord) -> tuple[str, str]:
        return (r.sha256, r.status.value)

    # -- rules: what a user or a second writer does ------------------------------------------
    @rule(actor=st.sampled_from(ACTORS), slot=st.sampled_from(SLOTS), text=st.integers(0, 1),
          owned=st.booleans())  # fmt: skip
    def write(self, actor: str, slot: str, text: int, owned: bool) -> None:
        """An import of the record (new, or over an active unheld one: content and owner)."""
        r_id = rid(actor, slot)
        cur = self.record(r_id)
        if cur is not None and (cur.held or cur.status is not Status.active):
            return
        owner = "team-notes" if owned else None
        new = make(actor, slot, text, owner)
        if cur is not None:
            new = cur.model_copy(update={"content": new.content, "owner": owner})
        db = self.db()
        try:
            db.put_many([new])
        finally:
            db.close()
        self.live[r_id] = (actor, text, owner)
        self.pending_erase.discard(r_id)
        self.after_night = self.rerunnable = False

    @rule(pick=st.integers(0, 30))
    def give_owner(self, pick: int) -> None:
        """An owner for the record of an open MISSING_OWNER item (its finding is gone)."""
        named = sorted(i.record_id for i in self.items(OPEN).values()
                       if i.reason == "MISSING_OWNER" and i.record_id in self.live)  # fmt: skip
        if named:
            r_id = named[pick % len(named)]
            actor, text, _ = self.live[r_id]
            self.write(actor, r_id.removeprefix(f"{actor}-"), text, True)

    @rule(dry=st.booleans(), rerun=st.booleans())
    def night(self, dry: bool, rerun: bool) -> None:
        """A night at the clock (one day on for an apply run), or again at the last cutoff."""
        if not self.rerunnable:  # a rerun is of a night nothing has changed since
            rerun = False
        if not rerun and not dry:
            self.clock += timedelta(days=1)
        cutoff = self.last_cutoff if rerun and self.last_cutoff else self.clock
        before = self.items()
        held_before = {i: self.record(i) for i in self.held}
        s = run_local(RunConfig(dry_run=dry, now=cutoff))
        assert s.status == "success", (s.status, s.failed_shards)
        after = self.items()
        for i, r in held_before.items():
            now = self.record(i)
            assert r is not None and now is not None and self.snapshot(now) == self.snapshot(r), i
        if dry:
            assert after == before, "a dry run changed the review queue"
            return
        if rerun:
            assert after == before, "a rerun of the same night changed the review queue"
            self.after_night = True
            return
        self.last_cutoff = cutoff
        self.rerunnable = True
        self.after_night = True
        c = s.other
        opened = [i for i, it in after.items() if it.state in OPEN and it.opened_run == s.run_id
                  and (i not in before or before[i].state == "waiting")]  # fmt: skip
        assert len(opened) == c.get("review_opened", 0), (opened, c)
        closed = [i for i, it in before.items() if it.state in OPEN + ("waiting",)
                  and after[i].state == "resolved"]  # fmt: skip
        assert all((after[i].reviewer or "").startswith("memlife:") for i in closed)
        assert len(closed) == sum(c.get(k, 0) for k in CLOSING), (closed, c)
        carried = [i for i, it in before.items() if it.state in OPEN
                   and after[i].state in OPEN and after[i].last_seen_run == s.run_id]  # fmt: skip
        assert len(carried) == c.get("review_carried", 0), (carried, c)

    @rule(days=st.integers(1, 5))
    def advance_clock(self, days: int) -> None:
        if self.clock + timedelta(days=days) < DAY1 + timedelta(days=110):
            self.clock += timedelta(days=days)

    @rule(actor=st.sampled_from(ACTORS))
    def list_queue(self, actor: str) -> None:
        code, out, err = invoke("review", "list", "--actor", actor, "--json")
        assert code == 0, err
        listed = json.loads(out)
        assert {i["actor_id"] for i in listed} <= {actor}, "another tenant's item listed"
        want = {i for i, it in self.items(OPEN).items() if it.actor_id == actor}
        assert sorted(i["item_id"] for i in listed) == sorted(want)

    @rule(pick=st.integers(0, 30),
          decision=st.sampled_from(("keep", "verify", "supersede", "delete", "dispute")))  # fmt: skip
    def resolve(self, pick: int, decision: str) -> None:
        open_items = sorted(self.items(OPEN).values(), key=lambda i: i.item_id)
        if not open_items:
            return
        item = open_items[pick % len(open_items)]
        rec = self.record(item.record_id)
        if rec is not None and (rec.actor_id, rec.namespace) != (item.actor_id, item.namespace):
            rec = None
        pair = self.record(item.pair_id) if item.pair_id else None
        refused = (
            (rec is None and decision != "keep")
            or (rec is not None and decision in ("verify", "supersede", "delete")
                and (item.content_sha256 != rec.sha256 or rec.held))
            or (rec is not None and decision == "verify" and rec.status is not Status.active)
            or (decision == "supersede" and (pair is None or pair.status is not Status.active))
        )  # fmt: skip
        # a record disputed in another of its items is never deleted (session 41)
        disputed_elsewhere = decision == "delete" and any(
            i.state == "disputed" and i.item_id != item.item_id
            and (i.record_id, i.actor_id, i.namespace)
            == (item.record_id, item.actor_id, item.namespace)
            for i in self.items().values()
        )  # fmt: skip
        self.rerunnable = False
        code, _, err = invoke("review", "resolve", item.item_id, "--decision", decision,
                              "--reviewer", REVIEWER)  # fmt: skip
        if disputed_elsewhere:
            assert code != 0 and "disputed" in err, f"deleted a disputed record: {err}"
        after = self.record(item.record_id)
        now_item = self.items()[item.item_id]
        if code != 0:
            assert refused or decision == "delete", (decision, err)
            assert err.strip().startswith("error:"), err
            assert after == rec, "a refused resolution changed the record"
            assert now_item.state == item.state, "a refused resolution closed the item"
            return
        assert not refused, f"{decision} on {item} should have been refused: {err}"
        assert now_item.decision == decision and now_item.reviewer == REVIEWER
        assert now_item.state == ("disputed" if decision == "dispute" else "resolved")
        if decision in ("keep", "dispute"):
            assert after == rec
        elif decision == "verify":
            assert after is not None and rec is not None and after.sha256 == rec.sha256
            assert after.last_verified_at is not None
        elif decision == "supersede":
            assert after is not None and after.status is Status.superseded
            assert after.provenance.replaced_by == item.pair_id
            self.live.pop(item.record_id, None)
        elif decision == "delete":
            assert after is None, "a delete decision left the record"
            self.live.pop(item.record_id, None)
            for r_id in list(self.live):  # what it replaced goes with it
                r = self.record(r_id)
                if r is None:
                    self.live.pop(r_id)
        if decision in ("keep", "verify") and item.content_sha256 is not None:
            # the answer is about the content the item was opened on (a keep on a record
            # changed since answers the old content: the new one is asked again)
            self.answers[finding(item)] = (item.content_sha256, item.pair_id)

    @rule(actor=st.sampled_from(ACTORS), slot=st.sampled_from(SLOTS), place=st.booleans())
    def hold(self, actor: str, slot: str, place: bool) -> None:
        r_id = rid(actor, slot)
        if r_id not in self.live or (place == (r_id in self.held)):
            return
        self.rerunnable = False
        code, _, err = invoke("hold", "place" if place else "release", "--id", r_id)
        assert code == 0, err
        if place:
            r = self.record(r_id)
            assert r is not None and r.held
            self.held[r_id] = self.snapshot(r)
        else:
            self.held.pop(r_id)
            if r_id in self.pending_erase:  # the deferred erasure applies now
                self.pending_erase.discard(r_id)
                self.live.pop(r_id)

    @rule(actor=st.sampled_from(ACTORS), slot=st.sampled_from(SLOTS))
    def erase(self, actor: str, slot: str) -> None:
        r_id = rid(actor, slot)
        if r_id not in self.live or r_id in self.pending_erase:
            return
        self.rerunnable = False
        code, _, err = invoke("erase", "--actor", actor, "--id", r_id, "--yes")
        assert code == 0, err
        if r_id in self.held:
            self.pending_erase.add(r_id)
        else:
            self.live.pop(r_id)
        self.answers = {k: v for k, v in self.answers.items() if k[2] != r_id}

    # -- invariants ----------------------------------------------------------------------------
    @invariant()
    def store_matches_model(self) -> None:
        db = self.db()
        try:
            for a in ACTORS:
                for s in SLOTS:
                    r_id = rid(a, s)
                    r = db.get(r_id)
                    if r_id not in self.live:
                        assert r is None or r.status is not Status.active, f"{r_id} back"
                        continue
                    actor, text, owner = self.live[r_id]
                    assert r is not None, f"{r_id} vanished"
                    assert (r.actor_id, r.content, r.owner) == (actor, TEXTS[s][text], owner)
                    if r_id in self.held:
                        assert self.snapshot(r) == self.held[r_id], f"held {r_id} touched"
        finally:
            db.close()

    @invariant()
    def open_items_once_and_live(self) -> None:
        open_items = list(self.items(OPEN).values())
        keys = [finding(i) for i in open_items]
        assert len(keys) == len(set(keys)), "one finding open twice"
        code, out, err = invoke("review", "list", "--json")
        assert code == 0, err
        listed = [i["item_id"] for i in json.loads(out)]
        assert len(listed) == len(set(listed)), "an item listed twice"
        assert sorted(listed) == sorted(i.item_id for i in open_items)
        if not self.after_night:
            return
        for i in open_items:
            r = self.record(i.record_id)
            assert r is not None, f"open item {i.item_id} names a gone record {i.record_id}"
            assert (r.actor_id, r.namespace) == (i.actor_id, i.namespace), "tenant mixed"
            assert i.record_id in self.live or r.status is not Status.active

    @invariant()
    def answered_not_raised_again(self) -> None:
        if not self.after_night:
            return
        open_items = self.items(OPEN).values()
        for key, (sha, pair) in self.answers.items():
            r = self.record(key[2])
            if r is None or r.sha256 != sha or r.status is not Status.active:
                continue
            again = [i for i in open_items if finding(i) == key and i.pair_id == pair]
            assert not again, f"answered finding {key} raised again: {again}"


ReviewMachine.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=25, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip
TestReviewQueueAcrossNights = ReviewMachine.TestCase
