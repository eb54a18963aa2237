"""Forty-second audit g: several nights on REAL unlabelled memories imported as the data
README's lifecycle task says (LoCoMo conv-42 and conv-44: actor = the sample id, namespace
``/conversations/<sample>/<speaker>``, semantic, agent_inferred, no subject, no owner),
through the real CLI on the embedded SQLite default, with an adversarial user between the
nights: a replacement forgotten the day after its night, a superseded fact restated, a hold
on a replacement's source then an erasure of the replacement, ``import --update`` of a
superseded record, a dispute then another item of the record answered, a decision on an
item whose record was erased, a dry run between two nights, two nights at one cutoff, and
a policy version bump. After every night: DESIGN invariants, ``receipts verify``, held
records unchanged, reruns change nothing, recall serves only active records, no unchanged
finding counted twice a night, counts add up.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.ledger import AccessLedger
from memlife.model import Status
from memlife.online.memory import LongTermMemory
from memlife.review_queue import ReviewQueue
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.lifecycle import operation_receipts, snapshot

LOCOMO = Path(__file__).parents[3] / "shared" / "data" / "locomo10.json"
SAMPLES = ("conv-42", "conv-44")
# forget() stamps the wall clock: the nights run from tomorrow on
NIGHT1 = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)

pytestmark = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not present")


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def lifecycle_lines(samples: tuple[str, ...] = SAMPLES) -> list[dict[str, Any]]:
    """The data README's lifecycle task: every observation a record."""
    out = []
    for raw in json.loads(LOCOMO.read_text()):
        if raw["sample_id"] not in samples:
            continue
        sid, talk = raw["sample_id"], raw["conversation"]
        for key, session in raw["observation"].items():
            n = key.split("_")[1]
            at = datetime.strptime(talk[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
            for speaker, facts in session.items():
                for i, (text, _ids) in enumerate(facts):
                    out.append({
                        "id": f"{sid}-s{n}-{speaker.lower()}-{i:03d}", "actor_id": sid,
                        "namespace": f"/conversations/{sid}/{speaker.lower()}",
                        "memory_type": "semantic", "content": text,
                        "created_at": iso(at.replace(tzinfo=UTC)), "source": "agent_inferred",
                        "confidence": 0.8,
                    })  # fmt: skip
    return out


def ok(*args: str) -> str:
    code, out, err = invoke(*args)
    assert code == 0, (args, out, err)
    return out


def queue(db: Path, states: tuple[str, ...] = ("open", "disputed")) -> list[Any]:
    with SqliteStore(db) as s:
        return ReviewQueue.for_store(s).list(states=states)


OUTCOMES = ("retained", "superseded", "deleted", "quarantined", "reviewed", "held", "failed")


def invariants(before: dict[str, Any], after: dict[str, Any], receipts: Path) -> None:
    """DESIGN invariants 1, 2, 3 and 8, a forgotten replacement (pending_delete) allowed as a
    replaced_by until its grace ends (docs/adversarial-review.md, Left, session 26)."""
    gone = {o["record_id"] for o in operation_receipts(receipts).values()
            if o["action"] in ("delete", "purge", "erase")
            and o["outcome"] in ("deleted", "already_absent")}  # fmt: skip
    for rid, rec in before.items():
        if rec["retention_class"] == "legal_hold":
            assert after.get(rid) == rec, f"legal-hold record {rid} changed"
    assert set(before) - set(after) <= gone, "a record vanished without a receipt"
    assert not gone & set(after), "a delete receipt for a record still present"
    for rid, rec in after.items():
        if rec["status"] == Status.superseded.value:
            to = after.get(rec["provenance"]["replaced_by"] or "")
            assert to is not None and to["status"] in ("active", "pending_delete"), rid
            assert (to["actor_id"], to["namespace"]) == (rec["actor_id"], rec["namespace"])


class Nights:
    def __init__(self, home: Path, tmp: Path) -> None:
        self.home, self.db, self.tmp = home, home / "memlife.db", tmp
        self.held: dict[str, dict[str, Any]] = {}
        self.gone_texts: list[tuple[str, str]] = []  # (actor, text) recall must never serve
        self.log: list[dict[str, Any]] = []
        src = tmp / "locomo.jsonl"
        self.lines = lifecycle_lines()
        src.write_text("".join(json.dumps(r) + "\n" for r in self.lines))
        out = ok("import", str(src), "--json")
        assert json.loads(out)["imported"] == len(self.lines), out

    def night(self, now: datetime, *extra: str) -> dict[str, Any]:
        before = snapshot(self.db)
        counted = {(i.item_id, i.pair_id, i.content_sha256): i.nights for i in queue(self.db)}
        args = ("run", "--engine", "local", "--now", iso(now), "--allow-future-cutoff", "--json")
        night = json.loads(ok(*args, *extra))
        after = snapshot(self.db)
        invariants(before, after, self.home / "receipts")
        for rid, rec in self.held.items():
            assert after.get(rid) == rec, f"held record {rid} changed"
        ok("receipts", "verify", night["run_id"])
        life = night["lifecycle"]
        assert life["processed"] == sum(life[k] for k in OUTCOMES), life
        findings = [(i.record_id, i.reason, i.pair_id, i.content_sha256) for i in queue(self.db)]
        assert len(findings) == len(set(findings)), "one finding open under two items"
        for i in queue(self.db):
            key = (i.item_id, i.pair_id, i.content_sha256)
            if key in counted and i.last_seen_run == night["run_id"]:
                assert i.nights == counted[key] + 1, f"{i.item_id}: counted twice"
        # the same cutoff again: the same run, nothing changes
        items_before = [i.as_json() for i in queue(self.db, ("open", "disputed", "resolved"))]
        again = json.loads(ok(*args, *extra))
        assert again["run_id"] == night["run_id"]
        assert snapshot(self.db) == after, "a rerun changed the store"
        assert [i.as_json() for i in queue(self.db, ("open", "disputed", "resolved"))] == (
            items_before
        ), "a rerun changed the review queue"
        self.recall_check()
        self.log.append({**night["lifecycle"], **{k: v for k, v in night["other_counts"].items()
                                                  if k.startswith("review_")}})  # fmt: skip
        return night

    def recall_check(self) -> None:
        snap = snapshot(self.db)
        for actor, text in self.gone_texts:
            out = json.loads(ok("recall", text, "--actor", actor, "--k", "10", "--json"))
            for hit in out:
                assert snap[hit["id"]]["status"] == "active", (hit["id"], text[:30])

    def memory(self) -> LongTermMemory:
        return LongTermMemory(SqliteStore(self.db), ledger=AccessLedger(self.home / "ledger"))


def by_status(db: Path, *rids: str) -> list[str | None]:
    snap = snapshot(db)
    return [snap[r]["status"] if r in snap else None for r in rids]


def test_nights_on_locomo_lifecycle_task_with_an_adversarial_user(
    home: Path, tmp_path: Path
) -> None:
    """Attacks the night-to-night guarantees on the README's lifecycle task through the CLI:
    a forgotten replacement's sources (memlife/orphans.py), a restated superseded fact
    (online remember), a hold pinning a replacement an erasure asks for (memlife/erase.py),
    `import --update` of superseded records (apply/appliers/update.py), a dispute beside a
    supersede through the record's other item and a decision on an erased record's item
    (review_queue/resolving.py), a dry run, a second run at one cutoff and a policy bump
    enforcing deletion in the conversations. Each night's checks are Nights.night's."""
    n = Nights(home, tmp_path)
    d = [NIGHT1 + timedelta(days=k) for k in (0, 1, 10, 20)]
    jo, au = "/conversations/conv-42/joanna", "/conversations/conv-44/audrey"
    na = "/conversations/conv-42/nate"
    for actor, ns, subject, old, new in (
        ("conv-42", jo, "phone", "Joanna's phone number is 555 0101.",
         "Joanna changed her phone number; it is now 555 0177."),
        ("conv-44", au, "address", "Audrey lives at 12 Elm Street.",
         "Audrey moved house; she now lives at 40 Oak Road."),
        ("conv-42", na, "car", "Nate drives a red Honda.",
         "Nate sold his Honda; he now drives a blue Tesla."),
    ):  # fmt: skip
        for fact in (old, new):
            ok("remember", fact, "--actor", actor, "--namespace", ns, "--subject", subject)
    first = n.night(d[0])
    assert (first["lifecycle"]["consolidated"], first["lifecycle"]["superseded"]) == (3, 6)
    snap = snapshot(n.db)
    made = {r["namespace"]: r for r in snap.values() if r["id"].startswith("r-")}
    r1, r2, r3 = made[jo], made[au], made[na]
    a1, b1 = r1["provenance"]["supersedes"]
    a2, b2 = r2["provenance"]["supersedes"]
    a3, _ = r3["provenance"]["supersedes"]

    # forget the replacement the night wrote; restate a fact it superseded: a new record
    m = n.memory()
    try:
        assert m.forget([r1["id"]], actor="conv-42") == [r1["id"]]
        restated = m.remember("conv-42", jo, "phone", snap[a1]["content"])
    finally:
        m.close()
        m.store.close()
    assert restated.created and restated.record_id not in (a1, r1["id"])
    n.gone_texts += [("conv-42", r1["content"]), ("conv-44", snap[a2]["content"])]
    # a hold on a source of the other replacement, then an erasure of the replacement
    ok("hold", "place", "--actor", "conv-44", "--id", a2)
    n.held[a2] = snapshot(n.db)[a2]
    erased = json.loads(ok("erase", "--actor", "conv-44", "--id", r2["id"], "-y", "--json"))
    assert r2["id"] in erased["deferred"] and b2 in erased["erased"], erased
    assert by_status(n.db, a2, r2["id"]) == ["superseded", "active"]
    # import --update records a night superseded, as first written (active)
    lines = []
    for rid in (a3, b2):  # a1 too: test_audit42g_same_cutoff.py (verify then fails)
        line = {**snap[rid], "status": "active"}
        line["provenance"] = {**line["provenance"], "replaced_by": None}
        lines.append(json.dumps(line) + "\n")
    (tmp_path / "update.jsonl").write_text("".join(lines))
    code, out, err = invoke("import", str(tmp_path / "update.jsonl"), "--update", "--json")
    report = json.loads(out)
    assert code == 1 and report["updated"] == 1, (out, err)
    assert [c["code"] for c in report["conflicts"]] == ["ERASED_CONTENT"]  # b2's text: erased
    # dispute one item of a record, then answer the item that pairs another record with it
    items = queue(n.db)
    x = next(i for i in items if i.record_id == "conv-42-s4-joanna-000")
    y = next(i for i in items if i.pair_id == x.record_id)
    ok("review", "resolve", x.item_id, "--decision", "dispute", "--reviewer", "aud")
    ok("review", "resolve", y.item_id, "--decision", "supersede", "--reviewer", "aud")
    assert by_status(n.db, y.record_id, x.record_id) == ["superseded", "active"]
    # a decision on an item whose record was erased since: refused, nothing done
    z = next(i for i in items if i.record_id == "conv-42-s24-nate-001")
    n.gone_texts.append(("conv-42", snap[z.record_id]["content"]))
    ok("erase", "--actor", z.actor_id, "--id", z.record_id, "-y")
    for decision in ("delete", "supersede", "verify", "keep", "dispute"):
        code, _, err = invoke("review", "resolve", z.item_id, "--decision", decision,
                              "--reviewer", "aud")  # fmt: skip
        assert code == 2 and "already resolved" in err, (decision, err)
    # a dry run between two nights changes nothing
    before = snapshot(n.db)
    queued = [i.as_json() for i in queue(n.db, ("open", "disputed", "resolved"))]
    ok("run", "--dry-run", "--engine", "local", "--now", iso(d[0] + timedelta(hours=12)),
       "--allow-future-cutoff")  # fmt: skip
    assert snapshot(n.db) == before
    assert [i.as_json() for i in queue(n.db, ("open", "disputed", "resolved"))] == queued
    n.night(d[1])
    assert by_status(n.db, a3, restated.record_id) == ["superseded", "active"]  # a3 merged again
    # a second run at that cutoff after a remember in a namespace deletion is not enforced
    ok("remember", "Joanna adopted a second dog named Rex.", "--actor", "conv-42",
       "--namespace", jo)  # fmt: skip
    before = snapshot(n.db)
    ok("run", "--engine", "local", "--now", iso(d[1]), "--allow-future-cutoff")
    assert snapshot(n.db) == before
    # a policy version bump: deletion enforced in the conversations from now on
    pol = tmp_path / "bumped.yaml"
    text = Path("policies/default.yaml").read_text()
    text = text.replace('version: "2026.11-default.4"', 'version: "2026.11-audit42g.5"')
    pol.write_text(text.replace('  - "/users/*/support"\n',
                                '  - "/users/*/support"\n  - "/conversations/*/*"\n'))  # fmt: skip
    bumped = n.night(d[2], "--policy", str(pol))
    # the forgotten replacement goes past its grace, and its sources with it; the
    # restatement of one of them stays
    assert bumped["lifecycle"]["deleted"] == 3
    assert by_status(n.db, r1["id"], b1, a1, restated.record_id) == [None, None, None, "active"]
    ok("review", "resolve", x.item_id, "--decision", "delete", "--reviewer", "aud",
       "--policy", str(pol))  # fmt: skip
    assert by_status(n.db, x.record_id, y.record_id) == [None, None]
    n.night(d[3], "--policy", str(pol))
    assert [e["failed"] for e in n.log] == [0, 0, 0, 0]
    bad = {}
    for receipt in sorted((home / "receipts" / "runs").rglob("receipt.json")):
        code, out, err = invoke("receipts", "verify", receipt.parent.name)
        if code != 0:
            bad[receipt.parent.name] = (out + err)[-300:]
    assert bad == {}, bad
