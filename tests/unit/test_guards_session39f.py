"""Guards left untested by the thirty-ninth audit (session 39, f): several nights in a row
on REAL unlabelled memories (LoCoMo observations as an agent saves them: no subject, no
owner, agent_inferred) with an adversarial user between the nights.

Three actors (two LoCoMo speakers of conv-26 and one of conv-30), a few hundred records in
``/users/<actor>/facts`` (deletion enforced). Between the nights the user restates and
changes facts online, forgets, places a legal hold and releases it later, erases by id and
by subject, resolves review items through the CLI, runs a dry run between two apply runs,
and one night is killed at a fault point and rerun. After every night: DESIGN invariants
(tests/support/lifecycle.check_invariants), ``receipts verify``, no resolved review finding
opened again, held records unchanged, erased text nowhere under MEMLIFE_HOME.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.erase import erase, release_hold
from memlife.faults import InjectedFault, inject
from memlife.holds import place_hold
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, MemoryType, Source, Status
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local
from memlife.review_queue import ReviewQueue
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.gate import write_cases
from tests.support.lifecycle import check_invariants, snapshot

LOCOMO = Path(__file__).parents[3] / "shared" / "data" / "locomo10.json"
# forget() stamps the wall clock (it takes no ``at``): the nights run from tomorrow on
NIGHT1 = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
POLICY = "policies/default.yaml"
SPEAKERS = {"conv-26": ("Caroline", "Melanie"), "conv-30": ("Gina",)}

pytestmark = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not present")


def session_time(text: str) -> datetime:
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def locomo_records(
    sessions: int = 40, speakers: dict[str, tuple[str, ...]] = SPEAKERS
) -> list[MemoryRecord]:
    """Observations as an agent saves them: actor = the speaker, no subject, no owner."""
    out: list[MemoryRecord] = []
    for raw in json.loads(LOCOMO.read_text()):
        if raw["sample_id"] not in speakers:
            continue
        talk = raw["conversation"]
        for key, session in list(raw["observation"].items())[:sessions]:
            n = key.split("_")[1]
            at = session_time(talk[f"session_{n}_date_time"])
            for speaker, items in session.items():
                if speaker not in speakers[raw["sample_id"]]:
                    continue
                actor = speaker.lower()
                for i, (text, _ids) in enumerate(items):
                    out.append(
                        MemoryRecord(
                            id=f"{raw['sample_id']}-s{n}-{actor}-{i:03d}",
                            actor_id=actor,
                            namespace=f"/users/{actor}/facts",
                            memory_type=MemoryType.semantic,
                            content=text,
                            created_at=at,
                            source=Source.agent_inferred,
                            confidence=0.8,
                        )
                    )
    return out


def everywhere(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def items(db: Path, states: tuple[str, ...] = ("open", "disputed", "resolved")) -> list[Any]:
    with SqliteStore(db) as s:
        return ReviewQueue.for_store(s).list(states=states)


class Nights:
    """The scenario's store, cases and the checks made after each night."""

    def __init__(self, home: Path, speakers: dict[str, tuple[str, ...]] = SPEAKERS) -> None:
        self.home = home
        self.db = home / "memlife.db"
        self.held: dict[str, dict[str, Any]] = {}
        self.erased: list[str] = []
        self.resolved: set[tuple[str, str, str | None]] = set()
        self.log: list[dict[str, Any]] = []
        home.mkdir(parents=True, exist_ok=True)
        self.records = locomo_records(speakers=speakers)
        with SqliteStore(self.db) as s:
            s.put_many(self.records)
        keep = [r for r in self.records if r.actor_id == "melanie"][-2:]
        self.cases = write_cases(
            home / "cases.yaml",
            [
                {"id": f"kept-{r.id}", "query": r.content, "actor_id": r.actor_id,
                 "namespace": r.namespace, "must_retrieve": [r.id], "impact": "normal",
                 "k": 100, "threshold": -1.0}
                for r in keep
            ],
        )  # fmt: skip

    def night(self, now: datetime, *, fault: str | None = None) -> Any:
        before = snapshot(self.db)
        counted = {
            (i.item_id, i.pair_id, i.content_sha256): i.nights
            for i in items(self.db, ("open", "disputed"))
        }
        if fault is not None:
            with inject(fault), pytest.raises(InjectedFault):
                run_local(RunConfig(dry_run=False, now=now, eval_cases=self.cases))
        summary = run_local(RunConfig(dry_run=False, now=now, eval_cases=self.cases))
        assert summary.status == "success", summary.lifecycle
        after = snapshot(self.db)
        check_invariants(before, after, self.home / "receipts")
        for rid, rec in self.held.items():
            assert after.get(rid) == rec, f"held record {rid} changed"
        code, out, err = invoke("receipts", "verify", summary.run_id)
        assert code == 0, (out, err)
        for text in self.erased:
            assert everywhere(self.home, text) == [], f"erased text survives: {text[:30]}"
        now_open = {
            (i.record_id, i.reason, i.pair_id) for i in items(self.db, ("open", "disputed"))
        }
        assert not (now_open & self.resolved), (
            f"resolved finding reopened: {now_open & self.resolved}"
        )
        opened = [i for i in items(self.db) if i.opened_run == summary.run_id]
        for i in items(self.db, ("open", "disputed")):
            key = (i.item_id, i.pair_id, i.content_sha256)
            if key in counted and i.last_seen_run == summary.run_id:  # the same finding
                assert i.nights == counted[key] + 1, f"{i.item_id}: one night counted twice"
        self.log.append({**summary.lifecycle, "review_opened": len(opened),
                         "statuses": Counter(r["status"] for r in after.values())})  # fmt: skip
        return summary

    def memory(self) -> LongTermMemory:
        return LongTermMemory(SqliteStore(self.db), ledger=AccessLedger(self.home / "ledger"))

    def hold(self, ids: list[str], now: datetime) -> None:
        with SqliteStore(self.db) as s:
            place_hold(s, ids=ids, policy=POLICY, now=now)
        snap = snapshot(self.db)
        self.held.update({i: snap[i] for i in ids})

    def resolve_one(self, decision: str) -> str | None:
        code, out, err = invoke("review", "list", "--json")
        assert code == 0, err
        listed = json.loads(out)
        for it in listed:
            args = ["review", "resolve", it["item_id"], "--decision", decision,
                    "--reviewer", "auditor"]  # fmt: skip
            if decision == "supersede":
                if not it["pair_id"]:
                    continue
                args += ["--by", it["pair_id"]]
            code, out, err = invoke(*args, "--json")
            assert code == 0, (out, err)
            self.resolved.add((it["record_id"], it["reason"], it["pair_id"]))
            return str(it["item_id"])
        return None


def test_five_nights_on_locomo_with_an_adversarial_user(home: Path) -> None:
    """Attacks the night-to-night guarantees on real unlabelled data: the review carry-over
    (memlife/review_queue/candidates.py ``_answers``/``_followed``), the holds' pins
    (memlife/apply/appliers), the erasure's reach (memlife/erase.py, tombstones), the
    resume of a night killed at a fault point, and the grace of a forget."""
    n = Nights(home)
    assert 200 <= len(n.records) <= 400
    d = [NIGHT1 + timedelta(days=k) for k in (0, 9, 18, 27, 28)]

    mel = [r for r in n.records if r.actor_id == "melanie"]
    car = [r for r in n.records if r.actor_id == "caroline"]
    gina = [r for r in n.records if r.actor_id == "gina"]
    m = n.memory()
    try:  # forgotten (on the wall clock) a day before night 1: still in its 7 days' grace
        assert m.forget([gina[1].id], actor="gina") == [gina[1].id]
    finally:
        m.close()
        m.store.close()
    # night 1
    n.night(d[0])
    assert snapshot(n.db)[gina[1].id]["status"] == Status.pending_delete.value
    # between nights: restate, change, forget, hold, resolve a review item (keep)
    m = n.memory()
    try:
        same = m.remember("melanie", "/users/melanie/facts", None, mel[0].content,
                          source=Source.agent_inferred, confidence=0.8)  # fmt: skip
        assert not same.created
        changed = m.remember("caroline", "/users/caroline/facts", "phone",
                             "Caroline's phone number is 555 0199.")  # fmt: skip
        assert changed.created
        m.remember("caroline", "/users/caroline/facts", "phone",
                   "Caroline changed her phone number; it is now 555 0142.",
                   )  # fmt: skip
        assert m.forget([mel[1].id], actor="melanie") == [mel[1].id]
    finally:
        m.close()
        m.store.close()
    n.hold([car[0].id, car[1].id], d[0])
    n.resolve_one("keep")
    n.night(d[1])

    # a dry run between two apply runs changes nothing
    before = snapshot(n.db)
    dry = run_local(RunConfig(dry_run=True, now=d[1] + timedelta(hours=1), eval_cases=n.cases))
    assert dry.status == "success"
    assert snapshot(n.db) == before

    # erase by id (free) and by id of a held record (deferred), and by subject
    with SqliteStore(n.db) as s:
        res = erase(s, "gina", ids=[gina[0].id], policy=POLICY, now=d[1])
        assert gina[0].id in res["erased"], res
        erase(s, "caroline", ids=[car[0].id], policy=POLICY, now=d[1])
        # the merged phone numbers' replacement by id: its sources go with it (0199 too)
        (repl,) = [r for r in s.iter_all() if r.id.startswith("r-") and r.actor_id == "caroline"]
        assert "555 0142" in repl.content
        assert len(erase(s, "caroline", ids=[repl.id], policy=POLICY, now=d[1])["erased"]) == 3
    n.erased += [gina[0].content, "555 0199", "555 0142"]
    n.resolve_one("supersede") or n.resolve_one("verify")
    m = n.memory()
    try:  # forgotten now: its grace ends before night 3, which dies right after deleting it
        assert m.forget([mel[2].id], actor="melanie") == [mel[2].id]
    finally:
        m.close()
        m.store.close()
    # night 3 killed at a fault point, then rerun
    n.night(d[2], fault="after_delete")

    # release the hold: the deferred erasure is carried out
    with SqliteStore(n.db) as s:
        release_hold(s, [car[0].id, car[1].id], policy=POLICY, now=d[2])
    n.held.clear()
    n.erased.append(car[0].content)
    n.night(d[3])
    n.night(d[4])
    after = snapshot(n.db)
    assert mel[1].id not in after and mel[2].id not in after, "a forget outlived its grace"
    assert gina[1].id not in after
    assert car[0].id not in after and car[1].id in after  # the deferred erasure, on release
    keys = ("consolidated", "superseded", "deleted", "reviewed", "held", "failed",
            "review_opened")  # fmt: skip
    assert [tuple(e[k] for k in keys) for e in n.log] == [
        # real data alone: nothing merged, 2 POSSIBLE_UPDATE (5 before session 44, when a
        # negation about nothing the pair shares was an update cue; 3 before audit 49v,
        # when Gina's "keep pushing ... and not give up" read "give up" as one)
        (0, 0, 0, 2, 0, 0, 2),
        (1, 2, 2, 1, 2, 0, 0),  # the phone restatement merged; gina[1], mel[1] past grace
        (0, 0, 1, 1, 2, 0, 1),  # mel[2] deleted (the killed night's rerun); one new pair
        (0, 0, 0, 1, 0, 0, 0),
        (0, 0, 0, 1, 0, 0, 0),
    ]
    bad = {}
    for receipt in sorted((home / "receipts" / "runs").rglob("receipt.json")):
        code, out, err = invoke("receipts", "verify", receipt.parent.name)
        if code != 0:
            bad[receipt.parent.name] = (out + err)[-300:]
    assert bad == {}, bad


def open_items(db: Path) -> list[Any]:
    return items(db, ("open", "disputed"))


def test_review_items_on_real_data_after_erasure_hold_and_restatement(home: Path) -> None:
    """Attacks the review queue across nights on real data: an item whose pair is erased
    (memlife/erase.py::_close_reviews), an item on a held record (resolve refused by the
    hold pin), an item kept then its record restated online, and a dry run that must leave
    the queue as it found it."""
    # Sam's observations too: since session 44 a negation about nothing the pair shares is
    # no probable update, and the first three speakers alone give three items
    n = Nights(home, {**SPEAKERS, "conv-49": ("Sam",)})
    d = [NIGHT1 + timedelta(days=9 * k) for k in range(3)]
    n.night(d[0])
    first = sorted(open_items(n.db), key=lambda i: i.item_id)
    assert len(first) >= 4
    pair_erased, held_item, kept = first[0], first[1], first[2]
    # dry run: the queue unchanged
    queue_before = [i.as_json() for i in items(n.db, ("open", "disputed", "resolved", "waiting"))]
    dry = run_local(RunConfig(dry_run=True, now=d[0] + timedelta(hours=1), eval_cases=n.cases))
    assert dry.status == "success"
    queue_after = [i.as_json() for i in items(n.db, ("open", "disputed", "resolved", "waiting"))]
    assert queue_after == queue_before, "a dry run changed the review queue"
    # erase the pair of an open item: the item may not keep asking about erased text
    with SqliteStore(n.db) as s:
        pair = s.get(pair_erased.pair_id or "")
        assert pair is not None
        erase(s, pair.actor_id, ids=[pair.id], policy=POLICY, now=d[0])
    n.erased.append(pair.content)
    code, out, err = invoke("review", "show", pair_erased.item_id, "--json")
    assert pair.content not in out + err
    # hold the record of another item: resolving it supersede/delete must not change it
    n.hold([held_item.record_id], d[0])
    for decision in ("delete", "supersede", "verify"):
        args = ["review", "resolve", held_item.item_id, "--decision", decision,
                "--reviewer", "auditor"]  # fmt: skip
        if decision == "supersede":
            args += ["--by", held_item.pair_id or ""]
        invoke(*args)
        assert snapshot(n.db)[held_item.record_id] == n.held[held_item.record_id]
    # keep one, then the user restates its record online (same words)
    code, out, err = invoke("review", "resolve", kept.item_id, "--decision", "keep",
                            "--reviewer", "auditor")  # fmt: skip
    assert code == 0, (out, err)
    n.resolved.add((kept.record_id, kept.reason, kept.pair_id))
    with SqliteStore(n.db) as s:
        rec = s.get(kept.record_id)
        assert rec is not None
        m = LongTermMemory(s, ledger=AccessLedger(home / "ledger"))
        try:
            got = m.remember(rec.actor_id, rec.namespace, None, rec.content,
                             source=Source.agent_inferred, confidence=0.8)  # fmt: skip
            assert got.record_id == rec.id and not got.created
        finally:
            m.close()
    # erase the record of another open item (its finding is moot: closed), and by subject
    gone = next(i for i in open_items(n.db) if i.item_id not in
                (pair_erased.item_id, held_item.item_id, kept.item_id))  # fmt: skip
    with SqliteStore(n.db) as s:
        rec = s.get(gone.record_id)
        assert rec is not None
        erase(s, rec.actor_id, ids=[rec.id], policy=POLICY, now=d[0])
        m = LongTermMemory(s, ledger=AccessLedger(home / "ledger"))
        try:
            m.remember("gina", "/users/gina/facts", "diet", "Gina is vegan since March 2026.")
        finally:
            m.close()
        assert erase(s, "gina", subject="diet", policy=POLICY, now=d[0])["erased"]
    n.erased += [rec.content, "vegan since March"]
    assert gone.item_id not in {i.item_id for i in open_items(n.db)}, "an erased record's item open"
    # forget the record of the last item: night 2 deletes it (grace over), its item closes
    last = next(i for i in first if i.item_id not in
                (pair_erased.item_id, held_item.item_id, kept.item_id, gone.item_id))  # fmt: skip
    with SqliteStore(n.db) as s:
        m = LongTermMemory(s, ledger=AccessLedger(home / "ledger"))
        try:
            assert m.forget([last.record_id]) == [last.record_id]
        finally:
            m.close()
    n.night(d[1])
    assert last.record_id not in snapshot(n.db)
    (closed,) = [i for i in items(n.db) if i.item_id == last.item_id]
    assert (closed.state, closed.decision) == ("resolved", "deleted"), "a deleted record's item"
    n.night(d[2])
    assert not [i for i in open_items(n.db) if pair.id in (i.record_id, i.pair_id)]


def test_erasing_a_reviewers_replacement_keeps_the_record_it_superseded(home: Path) -> None:
    """Attacks ``r.provenance.replaced_by in why -> SOURCE_OF_ERASED`` in
    ``memlife/erase.py::_rule``. On real data the night opens POSSIBLE_UPDATE items (older A,
    newer B, different statements); a reviewer resolves one ``supersede --by B``. B is an
    original observation, not a replacement built from A (``B.provenance.supersedes`` is
    empty): A's claims are not B's. Erasing B by id erases A as well ("the superseded sources
    of an erased replacement (same claims)"): an erasure of one record removes another
    record's different text, irreversibly (docs/adversarial-review.md, the legal-hold row
    of session 11, names exactly this a bug: "text nobody asked to erase")."""
    n = Nights(home)
    n.night(NIGHT1)
    item = next(i for i in sorted(open_items(n.db), key=lambda i: i.item_id) if i.pair_id)
    code, out, err = invoke("review", "resolve", item.item_id, "--decision", "supersede",
                            "--by", item.pair_id or "", "--reviewer", "auditor")  # fmt: skip
    assert code == 0, (out, err)
    with SqliteStore(n.db) as s:
        a, b = s.get(item.record_id), s.get(item.pair_id or "")
        assert a is not None and b is not None and a.content != b.content
        assert a.status is Status.superseded and b.provenance.supersedes == []
        before = snapshot(n.db)
        result = erase(s, b.actor_id, ids=[b.id], policy=POLICY, now=NIGHT1)
        assert b.id in result["erased"]
    after = snapshot(n.db)
    check_invariants(before, after, home / "receipts")  # A, if kept, points to an active one
    assert a.id in after, f"{a.id} erased with {b.id}: {result['erased']}"
    # it comes back: active, pointing to nothing (its replacement is gone)
    assert after[a.id]["status"] == Status.active.value, after[a.id]
