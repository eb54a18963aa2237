"""A replacement's id is keyed by the store's run secret (audit 50c, finished in 50c2): what
a dry run names, and a night journaled under the old, unkeyed formula.

A dry run with an evaluation set stages whole replacements, and its gate names the ones
that block (``gate["blocking_groups"]``, in the run summary a dry run prints, and its
report). A dry run writes nothing, so it may read the run secret but never create it:
where one exists its ids are the apply run's; where none does, a key of its own keeps
them from committing to the members' texts."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import memlife.consolidate.replacement as replacement_mod
from memlife.faults import InjectedFault, inject
from memlife.journal import open_journal
from memlife.journal.sqlite import has_table
from memlife.model import MemoryRecord, content_sha256
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW
from tests.unit.test_gate_staged import COFFEE, TEA, seed, tea_case, write_cases


def _formula(records: list[MemoryRecord], secret: bytes | None) -> str:
    """The replacement id of a group of ``records``, by hand: the old sha256 (``secret``
    None: what a journal planned before the change names), else its HMAC under ``secret``."""
    first = records[0]
    parts = sorted(f"{r.id}:{content_sha256(r.content)}" for r in records)
    raw = "\x1f".join([first.actor_id, first.namespace, first.subject or "", *parts]).encode()
    if secret is None:
        return "r-" + hashlib.sha256(raw).hexdigest()[:28]
    return "r-" + hmac.new(secret, raw, hashlib.sha256).hexdigest()[:28]


def _secret_row(home: Path) -> bytes | None:
    store = SqliteStore(home / "memlife.db")
    try:
        if not has_table(store.connection, "secrets"):
            return None
        row = store.connection.execute("SELECT value FROM secrets WHERE name='run'").fetchone()
        return bytes(row[0]) if row else None
    finally:
        store.close()


def _blocking(home: Path, tmp_path: Path, dry_run: bool) -> list[str]:
    cases = write_cases(tmp_path / "cases.yaml", [tea_case()])
    gate = run_local(RunConfig(dry_run=dry_run, now=NOW, eval_cases=cases)).gate or {}
    assert gate.get("supersedes_blocked") is True, gate
    return list(gate.get("blocking_groups", []))


def test_a_dry_runs_gate_names_no_unkeyed_replacement_id(home: Path, tmp_path: Path) -> None:
    """The dry run's summary names the blocking group by its replacement id: unkeyed, it
    confirms a guess of the merged texts as the apply run's did (audit 50c)."""
    seed(home)
    named = _blocking(home, tmp_path, dry_run=True)
    assert len(named) == 1
    assert named[0] != _formula([COFFEE, TEA], None)


def test_control_a_dry_run_creates_no_run_secret(home: Path, tmp_path: Path) -> None:
    """A dry run writes nothing: on a store no apply run has touched, it makes no secret."""
    seed(home)
    assert _blocking(home, tmp_path, dry_run=True)
    assert _secret_row(home) is None


def test_the_first_apply_run_keys_the_id_with_the_secret_it_makes(
    home: Path, tmp_path: Path
) -> None:
    """After a dry run that made none (its ids, under a key of its own, cannot be the first
    apply run's), the apply run makes the secret and keys the id with it."""
    seed(home)
    dry = _blocking(home, tmp_path, dry_run=True)
    named = _blocking(home, tmp_path, dry_run=False)
    secret = _secret_row(home)
    assert secret is not None and named == [_formula([COFFEE, TEA], secret)] != dry


def test_control_a_dry_run_names_the_ids_the_apply_run_will_write(
    home: Path, tmp_path: Path
) -> None:
    """Where the run secret exists (an earlier apply run, erasure or review made it), the dry
    run reads it: the group its gate names is the one the apply run names (and memoises)."""
    seed(home)
    store = SqliteStore(home / "memlife.db")
    try:
        secret = open_journal(store).run_secret()
    finally:
        store.close()
    dry = _blocking(home, tmp_path, dry_run=True)
    assert _secret_row(home) == secret  # read, not replaced
    assert len(dry) == 1 and dry == _blocking(home, tmp_path, dry_run=False)


# -- a night journaled under the old formula, resumed after the upgrade ---------------------
DAY = datetime(2026, 11, 1, tzinfo=UTC)
NS = "/users/u-1/billing"  # deletion not enforced: the night consolidates without a gate


def _two_statements(home: Path) -> list[MemoryRecord]:
    records = [
        MemoryRecord(id=f"m-{i}", actor_id="u-1", namespace=NS, memory_type="semantic",
                     subject="payment card", content="Card on file ends in 4821.",
                     owner="team-billing", created_at=DAY + timedelta(days=i),
                     source="user_stated")
        for i in range(2)
    ]  # fmt: skip
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many(records)
    finally:
        store.close()
    return records


@pytest.mark.parametrize("point", ["after_journal_write", "after_replacement_write"])
def test_a_night_journaled_under_the_unkeyed_id_resumes_to_one_replacement(
    offline_home: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """The journal holds the planned write and supersedes with the id they were planned
    under: the rerun's retry queue finishes them under that id, and its planning finds the
    members superseded, so it stages no second replacement under the keyed id."""
    records = _two_statements(offline_home)
    keyed = replacement_mod.consolidation_key

    def unkeyed(actor: str, ns: str, subject: str, members: object, secret: object = None) -> str:
        return keyed(actor, ns, subject, members)  # type: ignore[arg-type]  # the old formula

    with monkeypatch.context() as m:
        m.setattr(replacement_mod, "consolidation_key", unkeyed)
        with inject(point), pytest.raises(InjectedFault):
            run_local(RunConfig(dry_run=False, now=DAY + timedelta(days=3)))
    old_id = _formula(records, None)
    again = run_local(RunConfig(dry_run=False, now=DAY + timedelta(days=3)))
    assert again.status == "success", again.as_json()
    store = SqliteStore(offline_home / "memlife.db")
    try:
        found = {r.id: r for r in store.iter_all()}
        secret = open_journal(store).run_secret()
    finally:
        store.close()
    assert sorted(i for i in found if i.startswith("r-")) == [old_id]
    assert found[old_id].status.value == "active"
    assert sorted(found[old_id].provenance.supersedes) == ["m-0", "m-1"]
    assert {(found[r.id].status.value, found[r.id].provenance.replaced_by) for r in records} == {
        ("superseded", old_id)
    }
    assert _formula(records, secret) not in found  # the keyed id was never staged as well
    # one night's sum: one consolidation, two supersedes, over the killed attempt and rerun
    night = again.lifecycle
    assert (night["consolidated"], night["superseded"]) == (1, 2), night
