"""A replacement's id is no plain hash of its sources' texts (audit 50c: content leaks
outside the receipts' content fields).

Session 29 keyed the content hashes evidence carries (memlife/evidence_key.py): a plain
sha256 of "Card on file ends in 4821." gives the text back in 10,000 guesses. The id of a
consolidation's replacement was still ``r-`` + sha256(actor, namespace, subject, each
member's id and *plain* content sha256): a commitment to the members' texts that every
place an id goes carries (the supersede and write receipts, the operations dataset, the
proposed-actions report of later nights, the access ledger, review items, the CLI), kept
after an erasure of every record involved. Whoever reads the receipts (ids, scope) tries
the texts and finds the one that gives the id."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.faults import InjectedFault, inject
from memlife.model import MemoryRecord, content_sha256
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

DAY = datetime(2026, 11, 1, tzinfo=UTC)
NS = "/users/u-1/billing"  # deletion not enforced: the night consolidates without a gate
SECRET = "Card on file ends in 4821."


def _night(home: Path) -> tuple[str, list[str]]:
    """Two statements of one card number, merged by a real night: (replacement, members)."""
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([
            MemoryRecord(id=f"m-{i}", actor_id="u-1", namespace=NS, memory_type="semantic",
                         subject="payment card", content=SECRET, owner="team-billing",
                         created_at=DAY + timedelta(days=i), source="user_stated")
            for i in range(2)
        ])  # fmt: skip
    finally:
        store.close()
    summary = run_local(RunConfig(dry_run=False, now=DAY + timedelta(days=3)))
    assert summary.lifecycle["consolidated"] == 1, summary.lifecycle
    store = SqliteStore(home / "memlife.db")
    try:
        repl = [r for r in store.iter_all() if r.id.startswith("r-")]
    finally:
        store.close()
    assert len(repl) == 1
    return repl[0].id, sorted(repl[0].provenance.supersedes)


def _receipts(home: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (home / "receipts" / "operations").glob("*.json")]


def _guess_from_id(replacement_id: str, actor: str, ns: str, members: list[str]) -> str | None:
    """What a receipts reader can do: ids and scope from the receipts, the text guessed."""
    for n in range(10_000):
        text = f"Card on file ends in {n:04d}."
        sha = content_sha256(text)
        raw = "\x1f".join([actor, ns, "payment card", *sorted(f"{m}:{sha}" for m in members)])
        if "r-" + hashlib.sha256(raw.encode()).hexdigest()[:28] == replacement_id:
            return text
    return None


def test_an_erased_merge_cannot_be_read_back_from_its_replacement_id(offline_home: Path) -> None:
    replacement_id, members = _night(offline_home)
    ids = [a for rid in [*members, replacement_id] for a in ("--id", rid)]
    code, out, err = invoke("erase", "--actor", "u-1", *ids, "--yes")
    assert code == 0, out + err
    store = SqliteStore(offline_home / "memlife.db")
    try:
        assert not list(store.iter_all())  # every record involved is erased
    finally:
        store.close()
    # the receipts (kept for years, read by people who need not see memories) name the
    # replacement beside the records it superseded, and their scope
    sups = [o for o in _receipts(offline_home) if o["action"] == "supersede"]
    assert {o["record_id"] for o in sups} == set(members)
    assert {o["replacement_id"] for o in sups} == {replacement_id}
    scope = sups[0]["scope"]
    assert _guess_from_id(replacement_id, scope["actor_id"], scope["namespace"], members) is None


def test_control_the_receipts_content_hash_is_keyed(offline_home: Path) -> None:
    """Session 29's guard holds: the receipts' own content hash gives nothing back."""
    _night(offline_home)
    plain = {content_sha256(f"Card on file ends in {n:04d}.") for n in range(10_000)}
    shas = {o["content_sha256"] for o in _receipts(offline_home) if o["content_sha256"]}
    assert shas and all(s.startswith("hmac-sha256:") for s in shas)
    assert not shas & plain and not {s.removeprefix("hmac-sha256:") for s in shas} & plain


@pytest.mark.parametrize("point", ["after_journal_write", "after_replacement_write"])
def test_control_a_rerun_after_a_crash_writes_one_replacement(
    offline_home: Path, point: str
) -> None:
    """Keyed or not, the id is deterministic for the store: the rerun of a night killed in
    the middle of its merge finds the replacement it planned (invariant 4)."""
    with inject(point), pytest.raises(InjectedFault):
        _night(offline_home)
    again = run_local(RunConfig(dry_run=False, now=DAY + timedelta(days=3)))
    assert again.status == "success"
    store = SqliteStore(offline_home / "memlife.db")
    try:
        records = {r.id: r for r in store.iter_all()}
    finally:
        store.close()
    repl = [r for r in records.values() if r.id.startswith("r-")]
    assert len(repl) == 1 and repl[0].status.value == "active"
    assert {r.provenance.replaced_by for r in records.values() if r.id.startswith("m-")} == {
        repl[0].id
    }
