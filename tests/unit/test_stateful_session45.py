"""Stateful test of the lifecycle with the review queue, quarantine and erasure by subject
(audit 45e).

``test_stateful_lifecycle.py`` drives imports, remember, holds, erasure by id and killed
nights; ``test_stateful_review.py`` drives the queue over records with no consolidation.
This machine puts together what neither does: consolidating nights (local engine,
extractive consolidator, a policy copy with ``gate.required: false``) beside review
resolutions of every decision, erasure by subject, online quarantine with restore and
purge, a second tenant restating the first one's words in a shared namespace, and recall
checked after every step.

Invariants after every step: a held record is never changed or deleted; a record that
vanished has a delete/purge/erase receipt naming it (receipts hold no text); a superseded
record's chain ends at a live record of its own tenant and namespace; no replacement's
sources span tenants; an erased text is on no record of its tenant (unless a hold deferred
it); one finding is never open twice, and a kept one is not asked again while the record
says the same; recall returns only active records of the asking tenant, never erased text.
In the rules: a dry run changes nothing; a rerun of the same cutoff changes nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from memlife.erase import erase, release_hold
from memlife.errors import InputError, NotFoundError
from memlife.holds import place_hold
from memlife.importer import import_file
from memlife.model import Status
from memlife.online.memory import LongTermMemory, RememberRefused
from memlife.pipeline import RunConfig, run_local
from memlife.quarantine import purge, restore
from memlife.review_queue import ReviewQueue
from memlife.review_queue import resolve as resolve_item
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import operation_receipts
from tests.support.records import good

T0 = datetime(2025, 3, 3, 12, tzinfo=UTC)
ACTORS = ("a1", "a2")
KINDS = ("facts", "shared")
SUBJECTS = ("city", "tea", None)
FACTS = {
    "city": ("{a} lives in Paris", "{a} lives in Paris now", "{a} moved to Rome in spring"),
    "tea": ("{a} drinks green tea daily", "{a} drinks only black tea now", "{a} likes tea"),
    None: (
        "{a} drinks a large black coffee every morning",
        "{a} gave up coffee in October; the mornings are green tea now",
        "{a} has a dog named Rex",
    ),
}
DECISIONS = ("keep", "verify", "supersede", "delete", "dispute")
KEYS = ("MEMLIFE_HOME", "MEMLIFE_STORE", "MEMLIFE_RECEIPTS", "ANTHROPIC_API_KEY", "MEMLIFE_STATE")
GONE = ("delete", "purge", "erase")
LIVE = (Status.active.value, Status.pending_delete.value, Status.quarantined.value)
OPEN = ("open", "disputed")
LAPSING = ("STALE_VERIFICATION", "LOW_SCORE")  # a keep on these lapses after the policy's days
EXAMPLES = int(os.environ.get("AUDIT45E_EXAMPLES", "20"))


def event(text: str) -> None:
    """A statistic (``--hypothesis-show-statistics``); nothing outside a Hypothesis test."""
    try:
        hypothesis_event(text)
    except InvalidArgument:
        pass


def ns_of(actor: str, kind: str) -> str:
    """``facts``: deletion enforced, owner from the policy; ``shared``: one namespace both
    tenants write to, rollout only, no policy owner (a record without one is reviewed)."""
    return "/team/shared/facts" if kind == "shared" else f"/users/{actor}/facts"


def dump(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    con = sqlite3.connect(db)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            n: sorted(con.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr)
            for n in names
            if n != "leases"
        }
    finally:
        con.close()


class Audit45e(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.home = Path(self.tmp.name)
        self.saved = {k: os.environ.get(k) for k in KEYS}
        for k in ("ANTHROPIC_API_KEY", "MEMLIFE_STATE"):
            os.environ.pop(k, None)
        self.db = self.home / "memlife.db"
        self.receipts = self.home / "receipts"
        os.environ.update(
            MEMLIFE_HOME=str(self.home),
            MEMLIFE_STORE=f"sqlite:///{self.db}",
            MEMLIFE_RECEIPTS=f"file://{self.receipts}",
        )
        text = Path("policies/default.yaml").read_text()
        text = text.replace("required: true", "required: false")
        text = text.replace('version: "2026.11-default.4"', 'version: "2026.11-audit45e"')
        self.policy = self.home / "policy.yaml"
        self.policy.write_text(text)
        self.now = T0
        self.ticks = 0
        self.serial = 0
        self.last_night: datetime | None = None
        self.prev: dict[str, dict[str, Any]] = {}
        self.held: dict[str, dict[str, Any]] = {}  # id -> the record as held
        self.erased: dict[tuple[str, str], str] = {}  # (actor, text) -> erased record id
        self.texts: set[str] = set()
        self.purged: set[str] = set()  # ids a purge deleted (test_audit45e_purge.py)
        self.answered: dict[tuple[str, str, str, str], tuple[str, str | None, datetime]] = {}

    def teardown(self) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self.tmp.cleanup()

    # -- helpers ---------------------------------------------------------------------------
    def records(self) -> dict[str, dict[str, Any]]:
        with SqliteStore(self.db) as store:
            return {r.id: json.loads(r.to_json()) for r in store.iter_all()}

    def pick(self, n: int, pred: Any = None) -> str | None:
        recs = self.records()
        ids = sorted(i for i, r in recs.items() if pred is None or pred(r))
        return ids[n % len(ids)] if ids else None

    def at(self) -> datetime:
        self.ticks += 1
        return self.now + timedelta(seconds=self.ticks)

    def text(self, actor: str, subject: str | None, fact: int) -> str:
        self.serial += 1
        return FACTS[subject][fact].format(a=actor) + f" (ref {self.serial})."

    def items(self, states: tuple[str, ...] = ("open", "disputed", "waiting", "resolved")):
        with SqliteStore(self.db) as store:
            return ReviewQueue.for_store(store).list(states=states)

    def observe(self) -> None:
        self.prev = self.records()
        self.texts |= {r["content"] for r in self.prev.values()}

    def config(self, dry_run: bool) -> RunConfig:
        return RunConfig(dry_run=dry_run, now=self.now, policy=str(self.policy))

    def state(self) -> dict[str, Any]:
        files = {
            str(p): p.read_bytes()
            for p in self.receipts.rglob("*")
            if p.is_file() and "operations" in p.parts
        }
        return {"tables": dump(self.db), "receipts": files}

    def erased_now(self, actor: str, rid: str, content: str, out: dict[str, Any]) -> None:
        deferred = {*out.get("deferred", ()), *out.get("still_deferred", ())}
        recs = self.records()
        if rid in deferred or rid in self.held:
            return
        if any(recs.get(d, {}).get("content", "").find(content) >= 0 for d in deferred):
            return  # a held replacement carries it: the hold wins (Left)
        assert rid not in recs, f"{rid} erased, still there"
        event("erased")
        self.erased[(actor, content)] = rid

    @initialize()
    def seed(self) -> None:
        for actor in ACTORS:
            for subject in ("city", "tea"):
                for fact, age in ((0, 40), (1, 10)):
                    self.import_line(actor, "facts", subject, fact, False, True, age)
            for fact, age in ((0, 40), (1, 2)):  # a probable update, no owner: review items
                self.import_line(actor, "shared", None, fact, False, False, age)
        self.observe()
        self.night(False)  # the queue starts with items to resolve

    # -- rules: users ------------------------------------------------------------------------
    @rule(actor=st.sampled_from(ACTORS), kind=st.sampled_from(KINDS),
          subject=st.sampled_from(SUBJECTS), fact=st.integers(0, 2), expired=st.booleans(),
          owned=st.booleans(), age=st.integers(0, 60), sensitive=st.booleans())  # fmt: skip
    def import_line(self, actor: str, kind: str, subject: str | None, fact: int, expired: bool,
                    owned: bool, age: int, sensitive: bool = False) -> None:  # fmt: skip
        content = self.text(actor, subject, fact)
        line = good(
            f"{actor}-i{self.serial}", actor_id=actor, namespace=ns_of(actor, kind),
            subject=subject, content=content, owner="team-a" if owned else None,
            created_at=(self.now - timedelta(days=age)).isoformat(),
            last_verified_at=(self.now - timedelta(days=age)).isoformat(),
            expires_at=(self.now - timedelta(days=1)).isoformat() if expired else None,
            retention_class="sensitive" if sensitive else "standard",
        )  # fmt: skip
        src = self.home / "in.jsonl"
        src.write_text(json.dumps(line) + "\n")
        with SqliteStore(self.db) as store:
            import_file(store, src, now=self.at())

    @rule(actor=st.sampled_from(ACTORS), kind=st.sampled_from(KINDS),
          subject=st.sampled_from(SUBJECTS), fact=st.integers(0, 2))  # fmt: skip
    def remember(self, actor: str, kind: str, subject: str | None, fact: int) -> None:
        content = self.text(actor, subject, fact)
        with SqliteStore(self.db) as store, LongTermMemory(store) as mem:
            try:
                mem.remember(actor, ns_of(actor, kind), subject, content, at=self.at())
            except RememberRefused:
                pass

    @rule(n=st.integers(0, 99), other=st.booleans())
    def restate(self, n: int, other: bool) -> None:
        """A tenant says a stored record's words again; ``other``: the other tenant says
        them, in the shared namespace (it must never refresh the first tenant's record)."""
        rid = self.pick(n)
        if rid is None:
            return
        r = self.records()[rid]
        actor = r["actor_id"]
        if other:
            actor = [a for a in ACTORS if a != actor][0]
        ns = ns_of(actor, "shared") if other else r["namespace"]
        with SqliteStore(self.db) as store, LongTermMemory(store) as mem:
            try:
                res = mem.remember(actor, ns, None, r["content"], at=self.at())
            except RememberRefused:
                return
        if other:
            assert res.record_id != rid or res.created, "another tenant refreshed the record"

    @rule(n=st.integers(0, 99))
    def hold_place(self, n: int) -> None:
        rid = self.pick(n)
        if rid is None:
            return
        with SqliteStore(self.db) as store:
            place_hold(store, ids=[rid], actor=self.records()[rid]["actor_id"], now=self.at())
        self.held.setdefault(rid, self.records()[rid])

    @precondition(lambda self: bool(self.held))
    @rule(n=st.integers(0, 99))
    def hold_release(self, n: int) -> None:
        rid = sorted(self.held)[n % len(self.held)]
        with SqliteStore(self.db) as store:
            release_hold(store, [rid], now=self.at())
        del self.held[rid]

    @rule(n=st.integers(0, 99))
    def erase_id(self, n: int) -> None:
        rid = self.pick(n)
        if rid is None:
            return
        r = self.records()[rid]
        with SqliteStore(self.db) as store:
            out = erase(store, r["actor_id"], ids=[rid], now=self.at())
        self.erased_now(r["actor_id"], rid, r["content"], out)

    @rule(actor=st.sampled_from(ACTORS), subject=st.sampled_from(("city", "tea")))
    def erase_subject(self, actor: str, subject: str) -> None:
        before = {i: r for i, r in self.records().items()
                  if r["actor_id"] == actor and r["subject"] == subject}  # fmt: skip
        with SqliteStore(self.db) as store:
            try:
                out = erase(store, actor, subject=subject, now=self.at())
            except (InputError, NotFoundError):
                return
        for rid, r in before.items():
            if r["subject"] == subject:
                self.erased_now(actor, rid, r["content"], out)

    @rule(n=st.integers(0, 99))
    def quarantine(self, n: int) -> None:
        rid = self.pick(n, lambda r: r["status"] == "active")
        if rid is None:
            return
        with SqliteStore(self.db) as store, LongTermMemory(store) as mem:
            mem.set_status([rid], "quarantined", actor=self.records()[rid]["actor_id"])

    @rule(n=st.integers(0, 99))
    def restore(self, n: int) -> None:
        rid = self.pick(n, lambda r: r["status"] == "quarantined")
        if rid is None:
            return
        with SqliteStore(self.db) as store:
            try:
                restore(store, [rid], now=self.at())
            except (InputError, NotFoundError):
                pass

    @rule(days=st.sampled_from([0, 1, 30]))
    def purge(self, days: int) -> None:
        """The grace is wall-clock time in quarantine: purge at the wall clock."""
        with SqliteStore(self.db) as store:
            out = purge(store, days)
        self.purged |= {o["record_id"] for o in out["operations"] if o["outcome"] == "deleted"}

    @rule(actor=st.sampled_from(ACTORS), subject=st.sampled_from(SUBJECTS), fact=st.integers(0, 2))
    def recall(self, actor: str, subject: str | None, fact: int) -> None:
        query = FACTS[subject][fact].format(a=actor)
        with SqliteStore(self.db) as store, LongTermMemory(store) as mem:
            hits = mem.recall(actor, query, k=8, threshold=0.0)
        recs = self.records()
        for h in hits:
            r = recs.get(h.record.id)
            assert r is not None, f"recall returned a deleted record {h.record.id}"
            assert r["status"] == "active", f"recall returned a {r['status']} record"
            assert r["actor_id"] == actor, "recall returned another tenant's record"
            for (a, text), _ in self.erased.items():
                assert a != actor or text not in r["content"], "recall returned erased text"

    @rule(n=st.integers(0, 99), decision=st.sampled_from(DECISIONS))
    def resolve(self, n: int, decision: str) -> None:
        items = sorted(self.items(OPEN), key=lambda i: i.item_id)
        if not items:
            return
        item = items[n % len(items)]
        with SqliteStore(self.db) as store:
            try:
                resolve_item(store, item.item_id, decision, "rev@example.com",
                             policy=str(self.policy))  # fmt: skip
            except (InputError, NotFoundError) as exc:
                event(f"resolve {decision} refused {type(exc).__name__}")
                return
        event(f"resolve {decision} {item.reason}")
        if decision in ("keep", "verify") and item.content_sha256:
            key = (item.actor_id, item.namespace, item.record_id, item.reason)
            self.answered[key] = (item.content_sha256, item.pair_id, self.now)

    @rule(n=st.integers(0, 99), decision=st.sampled_from(DECISIONS))
    def resolve_again(self, n: int, decision: str) -> None:
        self.resolve(n, decision)  # a rule of its own: resolutions drawn more often

    @rule(days=st.sampled_from([1, 3, 10, 40]))
    def advance(self, days: int) -> None:
        self.now += timedelta(days=days)
        self.ticks = 0

    # -- rules: nights -----------------------------------------------------------------------
    @rule()
    def dry_run(self) -> None:
        before = dump(self.db)
        summary = run_local(self.config(dry_run=True))
        assert summary.status == "success", summary.status
        after = dump(self.db)
        for t in set(before) | set(after):
            if t in ("runs", "run_attempts", "operations"):
                continue
            assert before.get(t) == after.get(t), f"a dry run changed {t}"

    @precondition(lambda self: self.last_night is None or self.now > self.last_night)
    @rule(rerun=st.booleans())
    def night(self, rerun: bool) -> None:
        summary = run_local(self.config(dry_run=False))
        assert summary.status == "success", (summary.status, summary.failed_shards)
        self.last_night = self.now
        for k, v in summary.lifecycle.items():
            if v and k != "processed":
                event(f"night {k}")
        for k, v in summary.other.items():
            if isinstance(v, int) and v and k.startswith("review"):
                event(f"night {k}")
        if rerun:
            first = self.state()
            again = run_local(self.config(dry_run=False))
            assert again.status == "success", again.status
            assert self.state() == first, "a rerun of the same night changed something"

    @rule()
    def next_night(self) -> None:
        """A day on, then a night (a rule of its own: nights drawn more often)."""
        self.now += timedelta(days=1)
        self.night(False)

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def held_untouched(self) -> None:
        now = self.records()
        for rid, was in self.held.items():
            assert now.get(rid) == was, f"held {rid} changed or deleted"

    @invariant()
    def vanished_have_receipts(self) -> None:
        now = self.records()
        ops = operation_receipts(self.receipts)
        gone = {o["record_id"] for o in ops.values()
                if o["action"] in GONE and o["outcome"] in ("deleted", "already_absent")}  # fmt: skip
        vanished = set(self.prev) - set(now)
        assert vanished <= gone, f"deleted without a receipt: {sorted(vanished - gone)}"
        texts = [t.encode() for t in self.texts | {r["content"] for r in now.values()}]
        for p in self.receipts.rglob("*") if self.receipts.exists() else ():
            if p.is_file() and p.suffix != ".yaml":
                data = p.read_bytes()
                assert not any(t in data for t in texts), f"{p.name} holds record text"
        self.observe()

    @invariant()
    def chains_and_tenants(self) -> None:
        now = self.records()
        for rid, r in now.items():
            scope = (r["actor_id"], r["namespace"])
            for src in r["provenance"]["supersedes"]:
                s = now.get(src)
                assert s is None or (s["actor_id"], s["namespace"]) == scope, f"{rid} mixes"
            seen, cur = {rid}, r
            while cur["status"] == Status.superseded.value:
                to = cur["provenance"]["replaced_by"] or ""
                nxt = now.get(to)
                assert nxt is not None and nxt["id"] not in seen, f"{rid} points nowhere"
                assert (nxt["actor_id"], nxt["namespace"]) == scope, f"{rid} across tenants"
                seen.add(nxt["id"])
                cur = nxt
            else:
                assert cur["status"] in LIVE, f"{rid}: chain ends {cur['status']}"

    @invariant()
    def erased_text_gone(self) -> None:
        now = self.records()
        for (actor, text), rid in self.erased.items():
            for r in now.values():
                if r["actor_id"] == actor and text in r["content"]:
                    assert r["id"] in self.held, f"erased {rid}'s text on {r['id']}"

    @invariant()
    def review_findings_once(self) -> None:
        items = self.items()
        open_ = [(i.actor_id, i.namespace, i.record_id, i.reason) for i in items if i.state in OPEN]
        assert len(open_) == len(set(open_)), "one finding open twice"
        recs = self.records()
        for key, (sha, pair, _when) in self.answered.items():
            r = recs.get(key[2])
            if r is None or r["status"] != "active" or key[3] in LAPSING:
                continue
            if (r["actor_id"], r["namespace"]) != key[:2]:
                continue
            with SqliteStore(self.db) as store:
                if store.get(key[2]).sha256 != sha:
                    continue
            again = [i for i in items if i.state in OPEN and
                     (i.actor_id, i.namespace, i.record_id, i.reason) == key and i.pair_id == pair]  # fmt: skip
            assert not again, f"answered finding {key} asked again"


Audit45e.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=int(os.environ.get("AUDIT45E_STEPS", "15")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=not os.environ.get("AUDIT45E_RANDOM"),
)
TestAudit45e = Audit45e.TestCase

pytestmark = pytest.mark.filterwarnings("ignore")
