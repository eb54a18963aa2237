"""Stateful (model-based) test of the nightly lifecycle on the embedded SQLite store, session 40.

The machine models two tenants (actors ``t1``, ``t2``), each with an enforced namespace
(``/users/A/facts``) and a rollout-only one (``/users/A/notes``), one enforced namespace
both write to (``/users/shared/facts``), and interleaves what users
do between nights with the nightly run itself (local engine, offline extractive
consolidator, an injected cutoff; a policy copy with ``gate.required: false`` so the night
consolidates and deletes without an evaluation set).

Rules: import a record (JSONL, ``import_file``; some hard-expired by ``expires_at``, some
expiring later, some without a subject), remember a fact (``LongTermMemory.remember``;
facts are near-duplicates of each other by subject), restate a stored record's exact text,
online forget (possibly asked as the other tenant), import a copy of a stored record's
text under a new id, import a hard-expired record and hold it at once, place and release a
legal hold
(``holds.place_hold``, ``erase.release_hold``), erase a record by id (``erase.erase``), an
apply night, a dry run, a rerun of the same night, advance the clock.

The model: every id ever seen with its tenant, namespace and text; the held records as
they were when held; the erased texts; the last night's state.

Invariants (after every step): a held record is never changed or deleted; every record
that vanished has a delete/erase receipt naming it and no such receipt names a present
record; receipts hold no record text; every superseded record's replacement chain ends at
an active record of its tenant and namespace (or one forgotten or quarantined, which its
sources follow), and when it was superseded its replacement
existed and was active, or one the user put out of recall online since (forgotten or
quarantined: a night killed between the replacement's write and its supersedes resumes
them, and the sources follow it as they would have) (an SQLite trigger logs each supersede
write); nothing of one
tenant appears under the other (ids, namespaces, sources, replacements, receipts' scopes);
an erased (not deferred) text appears in no table of any SQLite file under the home and in
no byte of those files. In the rules: a dry run changes no table; a rerun of the same night
changes no table and adds no receipt; after a night nothing hard-expired and not held
remains active in an enforced namespace.

Session 41, crashes: ``killed_night`` (and ``killed_night_rerun``, the same rule drawn more
often) runs an apply night armed with ``faults.inject(point, skip)`` at a drawn fault point of
the nightly run, killed once it passed it ``skip`` times; the rerun follows at once or after
other rules (the same cutoff: the same run id; a later night: its retry queue). Mid-crash
``check_invariants`` holds with only the journaled, unreceipted deletes in flight, and a night
killed at after_stage/after_gate changed no record; after the rerun ``check_invariants`` holds
with no gap and no unreceipted delete is left. New invariants: a record is deleted by one
operation (journal outcome and receipts); one consolidation's replacement is written once (the
journal per run, and an insert trigger per id and sources); the journal's operation for one
(run, kind, record) keeps its id. The gap allowance in the receipt invariant lasts only while
a killed night is not yet finished. A real bug it found, fixed: a replacement erased between
a crash and its rerun failed the resumed supersedes (REPLACEMENT_MISSING, the run
partial_failure); they are skipped now (``appliers.base.replacement_removed``), the test below.
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
from hypothesis import HealthCheck, Phase, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from memlife import faults
from memlife.erase import erase, release_hold
from memlife.faults import InjectedFault
from memlife.holds import place_hold
from memlife.importer import import_file
from memlife.journal import OpKind, operation_id
from memlife.model import Status, utcnow
from memlife.online.memory import LongTermMemory, RememberRefused
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import check_invariants, journaled_deletes, operation_receipts
from tests.support.records import good

T0 = datetime(2022, 1, 3, 12, tzinfo=UTC)
LATEST = datetime(2026, 1, 1, tzinfo=UTC)  # remember refuses a time past the wall clock
LIVE_ENDS = (Status.active.value, Status.pending_delete.value, Status.quarantined.value)
ACTORS = ("t1", "t2")
# facts: deletion enforced (default policy); notes: rollout only; shared: one namespace both
# tenants write to (a reader that drops the actor and keeps the namespace mixes them)
KINDS = ("facts", "notes", "shared")
FACTS = (
    ("city", "{a} lives in Paris"),
    ("city", "{a} lives in Paris now"),
    ("city", "{a} moved to Rome last spring"),
    ("tea", "{a} drinks green tea every morning"),
    ("tea", "{a} drinks only black tea now"),
    (None, "{a} has a dog named Rex"),
)
KEYS = ("MEMLIFE_HOME", "MEMLIFE_STORE", "MEMLIFE_RECEIPTS", "ANTHROPIC_API_KEY")
EXAMPLES = int(os.environ.get("MEMLIFE_STATEFUL_EXAMPLES", "6"))
NOSHRINK = bool(os.environ.get("MEMLIFE_STATEFUL_NOSHRINK"))  # a mutation hunt: no shrinking
DELETED = ("delete", "purge", "erase")
IN_FLIGHT_ACTS = ("erase", "hold", "restate", "forget")  # a user's act on a record in flight
AUDIT = """
CREATE TABLE IF NOT EXISTS t40_supersedes (record_id TEXT, replaced_by TEXT, repl_status TEXT,
    repl_actor TEXT, repl_ns TEXT, actor TEXT, ns TEXT);
CREATE TRIGGER IF NOT EXISTS t40_upd AFTER UPDATE ON records
WHEN NEW.status = 'superseded' AND (OLD.status != 'superseded'
    OR json_extract(OLD.provenance, '$.replaced_by') IS NOT
       json_extract(NEW.provenance, '$.replaced_by'))
BEGIN INSERT INTO t40_supersedes SELECT NEW.id, json_extract(NEW.provenance, '$.replaced_by'),
    r.status, r.actor_id, r.namespace, NEW.actor_id, NEW.namespace
    FROM (SELECT 1) LEFT JOIN records r ON r.id = json_extract(NEW.provenance, '$.replaced_by');
END;
CREATE TRIGGER IF NOT EXISTS t40_ins AFTER INSERT ON records WHEN NEW.status = 'superseded'
BEGIN INSERT INTO t40_supersedes SELECT NEW.id, json_extract(NEW.provenance, '$.replaced_by'),
    r.status, r.actor_id, r.namespace, NEW.actor_id, NEW.namespace
    FROM (SELECT 1) LEFT JOIN records r ON r.id = json_extract(NEW.provenance, '$.replaced_by');
END;
CREATE TABLE IF NOT EXISTS t41_inserts (record_id TEXT, supersedes TEXT);
CREATE TRIGGER IF NOT EXISTS t41_ins AFTER INSERT ON records WHEN NEW.id LIKE 'r-%'
BEGIN INSERT INTO t41_inserts VALUES (NEW.id, json_extract(NEW.provenance, '$.supersedes'));
END;
"""
# a nightly run's fault points (memlife/fault_points.py; the importer's are not on its path)
CRASH_POINTS = tuple(p for p in faults.POINTS if p not in faults.IMPORT_POINTS)


def event(text: str) -> None:
    """A statistic (``--hypothesis-show-statistics``); nothing outside a Hypothesis test."""
    try:
        hypothesis_event(text)
    except InvalidArgument:
        pass


def ns_of(actor: str, kind: str) -> str:
    return "/users/shared/facts" if kind == "shared" else f"/users/{actor}/{kind}"


def dump(db: Path, skip: tuple[str, ...] = ()) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of the SQLite file, sorted rows (the lease table is the run's own)."""
    con = sqlite3.connect(db)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            n: sorted(con.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr)
            for n in names
            if n not in skip
        }
    finally:
        con.close()


def waiting_out(records: dict[str, dict[str, Any]], *, mid_crash: bool = False) -> set[str]:
    """Superseded records whose replacement was forgotten or quarantined: they wait for it
    (memlife/orphans.py); and held ones whose replacement a later night superseded in its
    turn: a held record is never rewritten, so it points down the chain (status._repoint).
    ``mid_crash``: any record whose replacement is superseded (a night killed between that
    supersede and the hand-over of its sources, which the rerun does).
    ``check_invariants`` (an active replacement) knows none of these;
    ``supersedes_point_to_active_replacements`` checks their chains."""
    out = set()
    for rid, r in records.items():
        if r["status"] != Status.superseded.value:
            continue
        to = records.get(r["provenance"]["replaced_by"] or "", {}).get("status")
        down = to == Status.superseded.value
        held = r["retention_class"] == "legal_hold" and down
        if (
            held
            or (mid_crash and down)
            or to in (Status.pending_delete.value, Status.quarantined.value)
        ):
            out.add(rid)
    return out


def drop(records: dict[str, dict[str, Any]], ids: set[str]) -> dict[str, dict[str, Any]]:
    return {rid: r for rid, r in records.items() if rid not in ids}


class Lifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.home = Path(self.tmp.name)
        self.saved = {k: os.environ.get(k) for k in KEYS}
        os.environ.pop("ANTHROPIC_API_KEY", None)
        os.environ.update(
            MEMLIFE_HOME=str(self.home),
            MEMLIFE_STORE=f"sqlite:///{self.home / 'memlife.db'}",
            MEMLIFE_RECEIPTS=f"file://{self.home / 'receipts'}",
        )
        self.db = self.home / "memlife.db"
        self.receipts = self.home / "receipts"
        text = Path("policies/default.yaml").read_text()
        text = text.replace("required: true", "required: false")
        text = text.replace('version: "2026.11-default.4"', 'version: "2026.11-stateful40"')
        self.policy = self.home / "policy.yaml"
        self.policy.write_text(text)
        self.now = T0
        self.ticks = 0  # seconds past ``now`` of the last user action
        self.serial = 0
        self.known: dict[str, tuple[str, str, str]] = {}  # id -> actor, namespace, text
        self.held: dict[str, dict[str, Any]] = {}  # id -> the record as held
        self.erased: dict[str, str] = {}  # id -> its text (erased, not deferred)
        self.deferred: set[str] = set()  # erasure asked while held
        self.deferred_text: dict[str, str] = {}
        self.texts: set[str] = set()  # every record text ever stored
        self.out_online: set[str] = set()  # forgotten or quarantined online
        self.last_night: datetime | None = None
        self.night_state: dict[str, Any] | None = None  # tables and receipts after a night
        self.crashed: str | None = None  # the run id of a killed night not yet run to its end
        self.last_crash: datetime | None = None  # the cutoff of the last killed night
        self.op_ids: dict[tuple[str, str, str], str] = {}  # (run, kind, record) -> op id
        # op id -> (state rank, attempts, created_at, outcome once receipted): never back
        self.op_seen: dict[str, tuple[int, int, str, str | None]] = {}
        with SqliteStore(self.db) as store:
            store.connection.executescript(AUDIT)

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

    def pick(self, n: int, alive: bool = True) -> str | None:
        ids = sorted(self.records()) if alive else sorted(self.known)
        return ids[n % len(ids)] if ids else None

    def at(self) -> datetime:
        """The clock for a user action: it moves on (the same request at the same time is
        by design the same manual run, a rerun)."""
        self.ticks += 1
        return self.now + timedelta(seconds=self.ticks)

    def text(self, actor: str, fact: int) -> tuple[str | None, str]:
        self.serial += 1
        subject, template = FACTS[fact]
        return subject, f"{template.format(a=actor)} (ref {self.serial})."

    def observe(self) -> None:
        for rid, r in self.records().items():
            self.known.setdefault(rid, (r["actor_id"], r["namespace"], r["content"]))
            self.texts.add(r["content"])

    def changed(self) -> None:
        self.night_state = None
        self.observe()

    def state(self) -> dict[str, Any]:
        files = {
            str(p): p.read_bytes()
            for p in self.receipts.rglob("*")
            if p.is_file() and "operations" in p.parts
        }
        return {"tables": dump(self.db, skip=("leases",)), "receipts": files}

    @initialize()
    def seed(self) -> None:
        """Each tenant starts with near-duplicates in both namespaces (a night merges them)."""
        for actor in ACTORS:
            for kind in KINDS:
                for fact, age in ((0, 30), (1, 10), (3, 5)):
                    self.import_record(actor, kind, fact, None, age)

    # -- rules: what users do --------------------------------------------------------------
    @rule(actor=st.sampled_from(ACTORS), kind=st.sampled_from(KINDS), fact=st.integers(0, 5),
          expiry=st.sampled_from([None, -1, 5]), age=st.integers(0, 60))  # fmt: skip
    def import_record(self, actor: str, kind: str, fact: int, expiry: int | None, age: int) -> None:
        subject, content = self.text(actor, fact)
        rid = f"{actor}-i{self.serial}"
        line = good(
            rid, actor_id=actor, namespace=ns_of(actor, kind), subject=subject, content=content,
            created_at=(self.now - timedelta(days=age)).isoformat(),
            last_verified_at=(self.now - timedelta(days=age)).isoformat(),
            expires_at=None if expiry is None else (self.now + timedelta(days=expiry)).isoformat(),
        )  # fmt: skip
        src = self.home / "in.jsonl"
        src.write_text(json.dumps(line) + "\n")
        with SqliteStore(self.db) as store:
            rep = import_file(store, src, now=self.at())
        assert rep.imported == 1, rep.conflicts
        self.changed()

    @rule(actor=st.sampled_from(ACTORS), kind=st.sampled_from(KINDS), fact=st.integers(0, 5))
    def import_held_expired(self, actor: str, kind: str, fact: int) -> None:
        """A record held after its expiry passed (litigation on old data): a night must keep
        it (DELETE_DEFERRED). Picked at random, a held record is rarely an expired one."""
        self.import_record(actor, kind, fact, -1, 3)
        rid = f"{actor}-i{self.serial}"
        with SqliteStore(self.db) as store:
            place_hold(store, ids=[rid], actor=actor, now=self.at())
        self.held.setdefault(rid, self.records()[rid])
        self.changed()

    @rule(actor=st.sampled_from(ACTORS), kind=st.sampled_from(KINDS), fact=st.integers(0, 5))
    def remember(self, actor: str, kind: str, fact: int) -> None:
        subject, content = self.text(actor, fact)
        with SqliteStore(self.db) as store:
            mem = LongTermMemory(store)
            try:
                mem.remember(actor, ns_of(actor, kind), subject, content, at=self.at())
            finally:
                mem.close()
        self.changed()

    @rule(n=st.integers(0, 99))
    def restate(self, n: int) -> None:
        """A user says a stored record's exact words again (a held one too)."""
        rid = self.pick(n)
        if rid is None:
            return
        actor, ns, _ = self.known[rid]
        content = self.records()[rid]["content"]  # a rebuilt replacement keeps its id
        with SqliteStore(self.db) as store:
            mem = LongTermMemory(store)
            try:
                mem.remember(actor, ns, None, content, at=self.at())
            except RememberRefused as exc:
                assert exc.code == "ERASED_CONTENT" and rid in self.deferred, exc.code
            finally:
                mem.close()
        self.changed()

    @rule(n=st.integers(0, 99), kind=st.sampled_from(KINDS))
    def import_copy(self, n: int, kind: str) -> None:
        """An import brings a stored record's exact words back under a new id (an import
        does not merge with what is stored): an erasure of either must take both."""
        rid = self.pick(n)
        if rid is None:
            return
        actor, content = self.known[rid][0], self.records()[rid]["content"]
        self.serial += 1
        line = good(f"{actor}-c{self.serial}", actor_id=actor, namespace=ns_of(actor, kind),
                    content=content, created_at=self.now.isoformat(),
                    last_verified_at=self.now.isoformat())  # fmt: skip
        src = self.home / "in.jsonl"
        src.write_text(json.dumps(line) + "\n")
        with SqliteStore(self.db) as store:
            import_file(store, src, now=self.at())  # refused when the text was erased
        self.changed()

    @rule(n=st.integers(0, 99), as_other=st.booleans())
    def forget(self, n: int, as_other: bool) -> None:
        rid = self.pick(n)
        if rid is None:
            return
        actor = self.known[rid][0]
        asked = [a for a in ACTORS if a != actor][0] if as_other else actor
        before = self.records()[rid]
        with SqliteStore(self.db) as store:
            mem = LongTermMemory(store)
            try:
                mem.forget([rid], actor=asked)
            finally:
                mem.close()
        if as_other:  # another tenant's forget never touches the record
            assert self.records()[rid] == before, "forget as the other tenant changed it"
        else:
            self.out_online.add(rid)
        self.changed()

    @rule(n=st.integers(0, 99))
    def hold_place(self, n: int) -> None:
        rid = self.pick(n)
        if rid is None:
            return
        with SqliteStore(self.db) as store:
            place_hold(store, ids=[rid], actor=self.known[rid][0], now=self.at())
        now = self.records()
        assert now[rid]["retention_class"] == "legal_hold"
        self.held.setdefault(rid, now[rid])
        self.changed()

    @precondition(lambda self: bool(self.held))
    @rule(n=st.integers(0, 99))
    def hold_release(self, n: int) -> None:
        rid = sorted(self.held)[n % len(self.held)]
        with SqliteStore(self.db) as store:
            release_hold(store, [rid], now=self.at())
        del self.held[rid]
        present = self.records()
        for d in sorted(self.deferred - set(self.held)):  # erasures a hold pinned go ahead now
            if d not in present:
                self.deferred.discard(d)
                self.erased[d] = self.deferred_text[d]
        self.changed()

    @rule(n=st.integers(0, 99))
    def erase_record(self, n: int) -> None:
        rid = self.pick(n)
        if rid is None:
            return
        actor = self.known[rid][0]
        content = self.records()[rid]["content"]
        with SqliteStore(self.db) as store:
            out = erase(store, actor, ids=[rid], now=self.at())
        if rid in self.held or rid in out["deferred"] or rid in out.get("still_deferred", ()):
            assert self.held, f"{rid} deferred with no hold placed"  # pinned by a held record
            self.deferred.add(rid)
            self.deferred_text[rid] = content
        else:
            assert rid not in self.records(), "an erased record is still there"
            # a held record deferred by this erasure (a replacement) may carry the text: it
            # lives on until that hold goes (docs/adversarial-review.md, Left: the hold wins)
            now = self.records()
            kept = [d for d in (*out["deferred"], *out.get("still_deferred", ()))
                    if now.get(d, {}).get("content") == content]  # fmt: skip
            for d in kept:
                self.deferred.add(d)
                self.deferred_text[d] = content
            if not kept:
                self.erased[rid] = content
        self.changed()

    @precondition(lambda self: self.now < LATEST)
    @rule(days=st.sampled_from([1, 3, 8, 40, 120]))
    def advance_clock(self, days: int) -> None:
        self.now += timedelta(days=days)
        self.ticks = 0
        self.night_state = None

    # -- rules: the nightly run ------------------------------------------------------------
    def config(self, dry_run: bool) -> RunConfig:
        return RunConfig(dry_run=dry_run, now=self.now, policy=str(self.policy))

    @precondition(lambda self: self.last_night is None or self.now > self.last_night)
    @rule()
    def night(self) -> None:
        summary = run_local(self.config(dry_run=False))
        self.night_done(summary.status, summary.run_id)

    def night_done(self, status: str, run_id: str) -> None:
        """After an apply night ran to its end (a first run, or the rerun of a killed one)."""
        assert status == "success", status
        if self.crashed is not None:  # a killed night resumes: the rerun is the same run,
            event("a killed night resumed" + (" later" if self.now != self.last_crash else ""))
            # or a later night finishes what it left (the retry queue)
            assert self.now != self.last_crash or run_id == self.crashed, "run id changed"
            self.crashed = None
        self.last_night = self.now
        self.observe()
        self.night_state = self.state()
        for rid, r in self.records().items():  # hard expiry is an obligation
            if (
                r["expires_at"] is not None
                and datetime.fromisoformat(r["expires_at"]) <= self.now
                and r["namespace"].endswith("/facts")
                and r["status"] == Status.active.value
            ):
                assert r["retention_class"] == "legal_hold", f"{rid} expired, still active"

    @precondition(lambda self: self.night_state is not None)
    @rule()
    def rerun_same_night(self) -> None:
        assert self.last_night == self.now
        summary = run_local(self.config(dry_run=False))
        assert summary.status == "success", summary.status
        assert self.state() == self.night_state, "a rerun of the same night changed something"

    def journal_rows(self, sql: str) -> list[tuple[Any, ...]]:
        """``sql``'s rows from the journal; none before the first night (no table yet)."""
        con = sqlite3.connect(self.db)
        try:
            return con.execute(sql).fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            con.close()

    def journal(self) -> list[tuple[str, str, str, str, str | None, str | None, str]]:
        """The journal's rows: op id, run, kind, record, replacement, outcome, state."""
        return self.journal_rows(
            "SELECT operation_id, run_id, kind, record_id, replacement_id, outcome, state"
            " FROM operations ORDER BY operation_id"
        )

    def in_flight(self) -> list[str]:
        """Present records an unfinished operation of the journal names (its record or its
        replacement): PLANNED, APPLIED, or FAILED with a retry to come."""
        rows = self.journal_rows(
            "SELECT record_id, replacement_id FROM operations WHERE state IN "
            "('PLANNED', 'APPLIED') OR (state='FAILED' AND next_retry_at IS NOT NULL)"
        )
        return sorted({i for row in rows for i in row if i} & set(self.records()))

    @precondition(lambda self: self.crashed is not None)
    @rule(n=st.integers(0, 99), act=st.sampled_from(IN_FLIGHT_ACTS))
    def act_on_in_flight(self, n: int, act: str) -> None:
        """Between a killed night and its rerun a user acts on a record the killed night
        journaled an unfinished operation for (a delete planned, a source to supersede, a
        replacement written): erases, holds, restates or forgets it. Picked at random, such
        a record is rarely the one; the rerun must still delete it once, keep its ids."""
        ids = self.in_flight()
        if not ids:
            return
        event(f"in flight: {act}")
        idx = sorted(self.records()).index(ids[n % len(ids)])
        {"erase": self.erase_record, "hold": self.hold_place, "restate": self.restate,
         "forget": lambda i: self.forget(i, False)}[act](idx)  # fmt: skip

    @precondition(lambda self: self.last_night is None or self.now > self.last_night)
    @rule(point=st.sampled_from(CRASH_POINTS), skip=st.integers(0, 3))
    def killed_night_rerun(self, point: str, skip: int) -> None:
        self.killed_night(point, skip, rerun=True)  # a rule of its own: crashes drawn more

    @precondition(lambda self: self.last_night is None or self.now > self.last_night)
    @rule(actor=st.sampled_from(ACTORS), kind=st.sampled_from(("facts", "shared")),
          skip=st.integers(0, 1), act=st.sampled_from((None, *IN_FLIGHT_ACTS)),
          n=st.integers(0, 99), rerun=st.booleans())  # fmt: skip
    def killed_in_deletions(
        self, actor: str, kind: str, skip: int, act: str | None, n: int, rerun: bool
    ) -> None:
        """A hard-expired record is imported, then a night killed once its deletions are
        journaled (``after_journal_write`` past the groups a dry run proposes, which the
        night commits first): planned for deletion, none deleted yet (``killed_night``
        rarely gets past the groups, or finds nothing to delete). The user may then act on
        a record in flight (``act_on_in_flight``), and the night runs again at once or
        later: each record is deleted by one operation, receipted once."""
        self.import_record(actor, kind, 5, -1, 3)
        groups = run_local(self.config(dry_run=True)).other.get("consolidation_proposed", 0)
        self.killed_night("after_journal_write", groups + skip, rerun=False)
        if self.crashed is None:
            return
        event(f"killed in deletions: {len(journaled_deletes(self.db))} delete(s) journaled")
        if act is not None:
            self.act_on_in_flight(n, act)
        if rerun:
            self.night()
            assert not journaled_deletes(self.db), "a delete left unreceipted after the rerun"

    @precondition(lambda self: self.last_night is None or self.now > self.last_night)
    @rule(point=st.sampled_from(CRASH_POINTS), skip=st.integers(0, 3), rerun=st.booleans())
    def killed_night(self, point: str, skip: int, rerun: bool) -> None:
        """An apply night killed at a drawn fault point once it passed it ``skip`` times,
        then run again at once (``rerun``) or left to the rules in between and a later
        night (the same cutoff: the same run; a later one: its retry queue)."""
        before = self.records()
        try:
            with faults.inject(point, skip=skip):
                summary = run_local(self.config(dry_run=False))
        except InjectedFault:
            event(f"killed at {point}" + (", rerun at once" if rerun else ""))
        else:  # the point came by fewer times than that: the night ran to its end
            event("not killed: the night ran to its end")
            self.night_done(summary.status, summary.run_id)
            self.night_state = self.state()
            return
        stamp = f"{self.now:%Y%m%dT%H%M%SZ}-apply-"
        runs = {p.parent.name for p in self.receipts.glob(f"runs/*/*/*/{stamp}*/manifest.json")}
        assert len(runs) == 1, runs
        self.crashed, self.last_crash = runs.pop(), self.now
        self.observe()
        self.night_state = None
        # mid-crash: a record may be gone with its delete journaled, not yet receipted
        mid = self.records()
        waiting = waiting_out(before) | waiting_out(mid, mid_crash=True)  # the chain invariant's
        check_invariants(*(drop(r, waiting) for r in (before, mid)), self.receipts,
                         in_flight=journaled_deletes(self.db))  # fmt: skip
        if point in ("after_stage", "after_gate"):  # staged and evaluated, nothing written
            assert mid == before, f"a night killed at {point} changed a record"
        if not rerun:
            return
        summary = run_local(self.config(dry_run=False))
        assert summary.run_id == self.crashed, "the rerun is not the killed run"
        self.night_done(summary.status, summary.run_id)
        self.night_state = self.state()
        assert not journaled_deletes(self.db), "a delete left unreceipted after the rerun"
        after = self.records()
        waiting = waiting_out(before) | waiting_out(after)
        check_invariants(drop(before, waiting), drop(after, waiting), self.receipts)

    @rule()
    def dry_run(self) -> None:
        before = dump(self.db, skip=("leases",))
        run_local(self.config(dry_run=True))
        assert dump(self.db, skip=("leases",)) == before, "a dry run changed the store"

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def held_records_untouched(self) -> None:
        now = self.records()
        for rid, rec in self.held.items():
            assert now.get(rid) == rec, f"held record {rid} changed or vanished"

    @invariant()
    def every_vanished_record_has_a_receipt(self) -> None:
        present = set(self.records())
        ops = operation_receipts(self.receipts)
        deleted = {
            o["record_id"]
            for o in ops.values()
            if o["action"] in DELETED and o["outcome"] in ("deleted", "already_absent")
        }
        vanished = set(self.known) - present
        if self.crashed is not None:  # the only gap: between a crash and its rerun
            deleted |= journaled_deletes(self.db) & vanished
        assert vanished <= deleted, f"deleted without receipt: {sorted(vanished - deleted)}"
        assert not (deleted & present), f"delete receipt for present {sorted(deleted & present)}"
        for o in ops.values():  # tenants: each operation in its record's scope
            if o["record_id"] in self.known:
                actor, ns, _ = self.known[o["record_id"]]
                assert (o["scope"]["actor_id"], o["scope"]["namespace"]) == (actor, ns)

    @invariant()
    def one_delete_per_record(self) -> None:
        """Across every run, crashes and resumes included, a record is deleted by one
        operation (the journal) and one receipt says it was deleted."""
        deletes: dict[str, list[str]] = {}
        for op, _run, kind, rid, _repl, outcome, _state in self.journal():
            # an erasure deferred by a hold fails, and a new one deletes once it is released
            if kind in DELETED and outcome == "deleted":
                deletes.setdefault(rid, []).append(op)
        twice = {r: ops for r, ops in deletes.items() if len(ops) > 1}
        assert not twice, f"two delete operations for one record: {twice}"
        done = [
            o["record_id"]
            for o in operation_receipts(self.receipts).values()
            if o["action"] in DELETED and o["outcome"] == "deleted"
        ]
        assert len(done) == len(set(done)), "a record deleted twice (receipts)"

    @invariant()
    def one_write_per_consolidation(self) -> None:
        """One consolidation (one run's replacement over one set of sources) is written
        once: in the journal, and in the records table (an insert trigger). An erasure's
        rebuild keeps the replacement's id under its own run and other sources."""
        rows = self.journal()
        writes = [r[1:4:2] for r in rows if r[2] == "write_replacement" and r[5] == "written"]
        assert len(writes) == len(set(writes)), "a replacement written twice (journal)"
        con = sqlite3.connect(self.db)
        try:
            ins = con.execute("SELECT record_id, supersedes FROM t41_inserts").fetchall()
        finally:
            con.close()
        assert len(ins) == len(set(ins)), "one consolidation's replacement inserted twice"

    @invariant()
    def operation_ids_stable(self) -> None:
        """The journal's operation for one planned action (run, kind, record) keeps the id
        it first had: a new id on resume would replay the action. The id is the one the
        run derives again from its manifest's run key (journal.base.operation_id), so a
        rerun finds it; and an operation never moves back (state, attempts, when planned;
        a receipted one is never touched again), so a re-plan cannot reset one."""
        for op, run, kind, rid, _repl, _outcome, _state in self.journal():
            key = (run, kind, rid)
            assert self.op_ids.setdefault(key, op) == op, f"{key}: op id changed on resume"
            assert self.op_ids[key] == op
        keys = {
            p.parent.name: json.loads(p.read_text()).get("run_key")
            for p in self.receipts.glob("runs/*/*/*/*-apply-*/manifest.json")
        }
        rank = {"PLANNED": 0, "FAILED": 1, "APPLIED": 2, "RECEIPTED": 3}
        for op, run, kind, rid, reasons, state, attempts, created, outcome in self.rows():
            if keys.get(run) and "CONSOLIDATION_WITHDRAWN" not in reasons:  # keyed by its write
                assert op == operation_id(keys[run], OpKind(kind), [rid]), f"{op}: not derived"
            now = (rank[state], attempts, created, outcome if state == "RECEIPTED" else None)
            was = self.op_seen.setdefault(op, now)
            assert now[:2] >= was[:2] and now[2] == was[2], f"{op} moved back: {was} -> {now}"
            assert was[3] is None or was[3] == now[3], f"{op}: a receipted outcome changed"
            self.op_seen[op] = now

    def rows(self) -> list[tuple[Any, ...]]:
        """The journal's rows for ``operation_ids_stable``: op id, run, kind, record, reasons,
        state, attempts, created_at, outcome."""
        return self.journal_rows(
            "SELECT operation_id, run_id, kind, record_id, reasons, state, attempts,"
            " created_at, outcome FROM operations"
        )

    @invariant()
    def receipts_hold_no_text(self) -> None:
        texts = [t.encode() for t in self.texts]
        if not self.receipts.exists():
            return
        for p in self.receipts.rglob("*"):
            if p.is_file() and p.suffix != ".yaml":  # the policy copy
                data = p.read_bytes()
                hit = next((t for t in texts if t in data), None)
                assert hit is None, f"{p.name} holds record text"

    @invariant()
    def supersedes_point_to_active_replacements(self) -> None:
        now = self.records()
        for rid, r in now.items():
            assert r["namespace"] in {ns_of(r["actor_id"], k) for k in KINDS}, f"{rid} misfiled"
            for src in r["provenance"]["supersedes"]:
                if src in self.known:
                    assert self.known[src][:2] == (r["actor_id"], r["namespace"]), rid
            if r["status"] != Status.superseded.value:
                continue
            seen, cur = {rid}, r
            while cur["status"] == Status.superseded.value:
                nxt = now.get(cur["provenance"]["replaced_by"] or "")
                assert nxt is not None and nxt["id"] not in seen, f"{rid} points nowhere"
                assert (nxt["actor_id"], nxt["namespace"]) == (r["actor_id"], r["namespace"])
                seen.add(nxt["id"])
                cur = nxt
            # a replacement forgotten (pending its grace) or quarantined still exists: its
            # sources go with it when the night deletes it (memlife/orphans.py)
            assert cur["status"] in LIVE_ENDS, f"{rid}: chain ends {cur['status']}"
        con = sqlite3.connect(self.db)
        try:
            rows = con.execute("SELECT * FROM t40_supersedes").fetchall()
        finally:
            con.close()
        for rec, repl, status, r_actor, r_ns, actor, ns in rows:
            out = repl in self.out_online and status in LIVE_ENDS  # a resumed supersede
            assert status == Status.active.value or out, f"{rec} superseded by {repl} ({status})"
            assert (r_actor, r_ns) == (actor, ns), f"{rec} superseded across tenants"

    @invariant()
    def erased_text_is_nowhere(self) -> None:
        if not self.erased:
            return
        texts = set(self.erased.values())
        for path in sorted(self.home.rglob("*.db")):
            for table, rows in dump(path).items():
                for row in rows:
                    for cell in row:
                        if isinstance(cell, str | bytes):
                            s = cell if isinstance(cell, str) else cell.decode(errors="ignore")
                            hit = next((t for t in texts if t in s), None)
                            assert hit is None, f"erased text in {path.name}:{table}"
        for path in sorted(self.home.glob("*.db*")):
            data = path.read_bytes()
            hit = next((t for t in texts if t.encode() in data), None)
            assert hit is None, f"erased text in the bytes of {path.name}"


def test_a_forgotten_replacement_takes_its_sources_when_its_grace_ends() -> None:
    """A night merges t1's near-duplicates into a replacement; the user then forgets the
    replacement online. Its superseded sources keep pointing to it while it waits out its
    grace (served by no one: the fact is forgotten); the night after the grace deletes it
    and its sources with it, each with a receipt (memlife/orphans.py, REPLACEMENT_DELETED).
    (The machine's author first read the waiting state as a stranding: it is the design.)"""
    m = Lifecycle()
    try:
        m.seed()
        m.night()
        repl = next(r for r in m.records() if r.startswith("r-"))
        sources = m.records()[repl]["provenance"]["supersedes"]
        assert sources
        with SqliteStore(m.db) as store:
            mem = LongTermMemory(store)
            try:
                assert mem.forget([repl], actor=m.known[repl][0]) == [repl]
            finally:
                mem.close()
        m.changed()
        m.supersedes_point_to_active_replacements()
        m.now = utcnow() + timedelta(days=8)  # forget stamps the wall clock: 8 days past it
        m.night()
        now = m.records()
        assert repl not in now and not set(sources) & now.keys()
        m.every_vanished_record_has_a_receipt()
    finally:
        m.teardown()


def _killed_after_its_replacement(m: Lifecycle) -> str:
    """Seed ``m`` and kill its night after the first receipt (a replacement written, its
    sources' supersedes not done): the replacement's id."""
    m.seed()
    m.killed_night(point="after_receipt", skip=0, rerun=False)
    return next(r for r in m.records() if r.startswith("r-"))


def test_a_replacement_erased_between_a_crash_and_its_rerun() -> None:
    """A night killed after its first receipt (the replacement written, its supersedes not
    all done); the user erases the replacement; the rerun's supersede of a source found it
    gone and failed (REPLACEMENT_MISSING, FAILED, run partial_failure: session 41, found by
    this machine). Now skipped, as the write applier answers an erased source: the rerun
    succeeds (``night`` checks), no record points to the erased replacement, and every
    vanished record has its receipt."""
    m = Lifecycle()
    try:
        repl = _killed_after_its_replacement(m)
        with SqliteStore(m.db) as store:
            erase(store, m.known[repl][0], ids=[repl], now=m.at())
        m.changed()
        m.night()  # the rerun: the same cutoff, the same run
        now = m.records()
        assert repl not in now
        assert not [r for r, v in now.items() if v["provenance"].get("replaced_by") == repl]
        m.every_vanished_record_has_a_receipt()
    finally:
        m.teardown()


def test_a_replacement_forgotten_between_a_crash_and_its_rerun_stays_forgotten() -> None:
    """As above, but the user *forgets* the replacement online (pending_delete, out of
    recall at once). The resumed supersedes found it not active and failed
    (REPLACEMENT_MISSING, the run partial); the next night merged the still-active sources
    again into the same id, written over the forgotten record: active again, in recall
    (session 42, audit a). Must hold: the rerun and two later nights succeed, and the
    forgotten record is never active again."""
    m = Lifecycle()
    try:
        repl = _killed_after_its_replacement(m)
        with SqliteStore(m.db) as store:
            mem = LongTermMemory(store)
            try:
                assert mem.forget([repl], actor=m.known[repl][0]) == [repl]
            finally:
                mem.close()
        m.out_online.add(repl)
        statuses, seen = [], []
        for day in range(3):  # the rerun (the same cutoff), then two later nights
            m.now += timedelta(days=1 if day else 0)
            statuses.append(run_local(m.config(dry_run=False)).status)
            seen.append(m.records().get(repl, {}).get("status"))
        assert "active" not in seen, f"the forgotten {repl} is back in recall: {seen}"
        assert statuses == ["success"] * 3, statuses
        m.supersedes_point_to_active_replacements()  # the machine's invariant 3, as amended
    finally:
        m.teardown()


def test_a_replacement_quarantined_between_a_crash_and_its_rerun_stays_out_of_recall() -> None:
    """As above, with the replacement quarantined online instead (session 42, audit e): the
    resumed supersedes failed (REPLACEMENT_MISSING) and the next night wrote the replacement
    back active over the quarantined record. Must hold: the nights succeed and the
    quarantined record is never active again (a restore is the way back)."""
    m = Lifecycle()
    try:
        repl = _killed_after_its_replacement(m)
        with SqliteStore(m.db) as store:
            mem = LongTermMemory(store)
            try:
                assert mem.set_status([repl], "quarantined", actor=m.known[repl][0]) == [repl]
            finally:
                mem.close()
        m.out_online.add(repl)
        statuses, seen = [], []
        for day in range(3):  # the rerun (the same cutoff), then two later nights
            m.now += timedelta(days=1 if day else 0)
            statuses.append(run_local(m.config(dry_run=False)).status)
            seen.append(m.records().get(repl, {}).get("status"))
        assert "active" not in seen, f"the quarantined {repl} is back in recall: {seen}"
        assert statuses == ["success"] * 3, statuses
        m.supersedes_point_to_active_replacements()
    finally:
        m.teardown()


def test_a_replacement_superseded_online_between_a_crash_and_its_rerun_hands_its_sources_on() -> (
    None
):
    """As above, with the replacement superseded online by a newer record the user wrote.
    The resumed supersedes found it not active and failed (REPLACEMENT_MISSING, the run
    partial), leaving its sources active beside the newer record: the older facts served
    as current, and each later night merged them again (listed under "Left" in session
    42). Must hold: the rerun and a later night succeed, every source ends superseded,
    down the chain to the newer record, and the replacement is never active again."""
    m = Lifecycle()
    try:
        repl = _killed_after_its_replacement(m)
        actor, ns, _ = m.known[repl]
        sources = m.records()[repl]["provenance"]["supersedes"]
        with SqliteStore(m.db) as store:
            mem = LongTermMemory(store)
            try:
                newer = mem.remember(actor, ns, None, "Bought a tandem kayak in the spring.")
                assert newer.created
                done = mem.set_status(
                    [repl], "superseded", replaced_by=newer.record_id, actor=actor
                )
                assert done == [repl]
            finally:
                mem.close()
        m.changed()
        statuses, seen = [], []
        for day in range(2):  # the rerun (the same cutoff), then a later night
            m.now += timedelta(days=1 if day else 0)
            statuses.append(run_local(m.config(dry_run=False)).status)
            seen.append(m.records().get(repl, {}).get("status"))
        assert "active" not in seen, f"the superseded {repl} is back in recall: {seen}"
        assert statuses == ["success"] * 2, statuses
        now = m.records()
        assert {now[s]["status"] for s in sources if s in now} == {"superseded"}, sources
        m.supersedes_point_to_active_replacements()
        m.every_vanished_record_has_a_receipt()
    finally:
        m.teardown()


Lifecycle.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize=True,
    phases=[p for p in Phase if p is not Phase.shrink or not NOSHRINK],
)
TestLifecycle = Lifecycle.TestCase


@pytest.fixture(autouse=True)
def _knobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The size knobs are read at import; memlife refuses unknown MEMLIFE_ settings."""
    for var in ("MEMLIFE_STATEFUL_EXAMPLES", "MEMLIFE_STATEFUL_NOSHRINK"):
        monkeypatch.delenv(var, raising=False)


pytestmark = pytest.mark.filterwarnings("ignore")
