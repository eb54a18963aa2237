"""Audit 51a: the store's run secret damaged between two nights.

The run secret (``Journal.run_secret``: 32 random bytes, made once per store) keys the
content hashes receipts carry (session 29), the replacement ids (50c2), the manual run
ids and the kept gate verdict's MAC. It was taken as it was found: a row cut short (a
hand edit, a restore of a damaged file, a tool writing the store) keyed every later
receipt with a key anyone can try (an empty or 4-byte key: the plain content hash again,
one more step), and a row of another type stopped the night with a bare TypeError, after
its retry queue had activated a replacement beside its still active sources (a fact
served twice, every night until someone repaired the row). On DynamoDB state an item
without its key attribute raised KeyError wherever the secret is read.

Controls: a secret replaced whole between a killed night and its rerun keeps the rerun
idempotent (one replacement, the journal names it); two first nights on one fresh store,
one refused, end with one secret that keys the replacement.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.errors import JournalStateError
from memlife.faults import InjectedFault, inject
from memlife.journal import read_run_secret
from memlife.journal.dynamodb import DynamoJournal
from memlife.model import MemoryRecord, content_sha256
from memlife.pipeline import RunConfig, RunSummary, run_local
from memlife.state.dynamodb import key
from memlife.stores.sqlite import SqliteStore
from tests.support.aws_state import aws_state

REPO = Path(__file__).resolve().parents[2]
DAY = datetime(2026, 11, 1, tzinfo=UTC)
NS = "/users/u-1/billing"  # deletion not enforced: a night consolidates without a gate
TEXT = "Card on file ends in 4821."


def _seed(db: Path) -> None:
    store = SqliteStore(db)
    try:
        store.put_many([
            MemoryRecord(id=f"m-{i}", actor_id="u-1", namespace=NS, memory_type="semantic",
                         subject="payment card", content=TEXT, owner="team-billing",
                         created_at=DAY + timedelta(days=i), source="user_stated")
            for i in range(2)
        ])  # fmt: skip
    finally:
        store.close()


def _set_secret(db: Path, sql_value: str) -> None:
    store = SqliteStore(db)
    try:
        store.connection.execute(f"UPDATE secrets SET value={sql_value} WHERE name='run'")
    finally:
        store.close()


def _records(db: Path) -> dict[str, tuple[str, str | None]]:
    store = SqliteStore(db)
    try:
        return {r.id: (r.status.value, r.provenance.replaced_by) for r in store.iter_all()}
    finally:
        store.close()


def _night() -> RunSummary:
    return run_local(RunConfig(dry_run=False, now=DAY + timedelta(days=3)))


def _keyed_by(key_: bytes, text: str) -> str:
    sha = content_sha256(text)
    return "hmac-sha256:" + hmac.new(key_, sha.encode(), hashlib.sha256).hexdigest()


def test_a_run_secret_cut_short_is_refused_before_the_night_changes_anything(
    offline_home: Path,
) -> None:
    db = offline_home / "memlife.db"
    _seed(db)
    from memlife.journal import open_journal

    store = SqliteStore(db)
    try:
        open_journal(store).run_secret()  # made, as a first night makes it
    finally:
        store.close()
    _set_secret(db, "x'74727563'")  # 4 bytes: what a damaged row or a bad restore leaves
    before = _records(db)
    receipts = offline_home / "receipts" / "operations"
    try:
        _night()
    except JournalStateError as exc:
        assert "run secret" in str(exc) and str(db) in str(exc)
    shas = {json.loads(p.read_text())["content_sha256"] for p in receipts.glob("*.json")}
    # a receipt reader who tries the texts with the 4-byte key finds the card number
    assert _keyed_by(b"truc", TEXT) not in shas
    assert _records(db) == before  # refused before any change


def test_control_a_secret_of_32_bytes_keys_the_night(offline_home: Path) -> None:
    db = offline_home / "memlife.db"
    _seed(db)
    _night()
    store = SqliteStore(db)
    try:
        secret = bytes(
            store.connection.execute("SELECT value FROM secrets WHERE name='run'").fetchone()[0]
        )
    finally:
        store.close()
    assert len(secret) == 32
    shas = {
        json.loads(p.read_text())["content_sha256"]
        for p in (offline_home / "receipts" / "operations").glob("*.json")
    }
    assert _keyed_by(secret, TEXT) in shas


def test_a_run_secret_of_another_type_stops_the_rerun_before_its_changes(
    offline_home: Path,
) -> None:
    db = offline_home / "memlife.db"
    _seed(db)
    with inject("after_replacement_write"), pytest.raises(InjectedFault):
        _night()  # killed: the replacement is written, staged, invisible to recall
    _set_secret(db, "'not a key'")  # TEXT where the BLOB was
    staged = _records(db)
    with pytest.raises(JournalStateError, match="run secret"):
        _night()
    # the rerun changed nothing: no replacement activated beside its still active sources
    assert _records(db) == staged


@pytest.mark.parametrize("point", ["after_journal_write", "after_replacement_write"])
def test_control_a_secret_replaced_whole_between_a_kill_and_the_rerun_keeps_one_replacement(
    offline_home: Path, point: str
) -> None:
    """Idempotency does not rest on the secret: the rerun finds its replacement by the id its
    journal names (the receipts of the two attempts then hash under two keys)."""
    db = offline_home / "memlife.db"
    _seed(db)
    with inject(point), pytest.raises(InjectedFault):
        _night()
    _set_secret(db, "randomblob(32)")
    assert _night().status == "success"
    got = _records(db)
    repl = [rid for rid in got if rid.startswith("r-")]
    assert len(repl) == 1 and got[repl[0]] == ("active", None)
    assert got["m-0"] == got["m-1"] == ("superseded", repl[0])


def test_a_dynamodb_run_secret_item_without_its_key_is_a_clear_error() -> None:
    with aws_state("inprocess") as (_, state):
        journal = DynamoJournal(state)
        secret = journal.run_secret()
        assert len(secret) == 32 and journal.existing_run_secret() == secret
        # the attribute renamed (a hand edit, an export/import tool): the item is there
        state.ddb.put_item(TableName=state.table, Item={**key("meta", "runsecret"),
                                                        "value": {"B": secret}})  # fmt: skip
        for read in (journal.run_secret, journal.existing_run_secret):
            with pytest.raises(JournalStateError, match="run secret"):
                read()


def test_a_dry_run_reads_a_secret_cut_short_as_damaged(offline_home: Path) -> None:
    """A dry run names replacement ids (its gate's blocking groups) keyed as the apply run
    keys them: with the apply run's secret or, on a fresh store, a key of its own; never
    with a 4-byte key anyone can try."""
    db = offline_home / "memlife.db"
    _seed(db)
    _night()
    _set_secret(db, "x'74727563'")
    store = SqliteStore(db)
    try:
        with pytest.raises(JournalStateError, match="run secret"):
            read_run_secret(store)
    finally:
        store.close()


def test_control_a_dry_run_reads_the_secret_and_never_makes_it(offline_home: Path) -> None:
    """``read_run_secret`` (a dry run's) reads nothing on a fresh store, the secret on a store
    that has one."""
    db = offline_home / "memlife.db"
    _seed(db)
    store = SqliteStore(db)
    try:
        assert read_run_secret(store) is None
    finally:
        store.close()
    _night()
    store = SqliteStore(db)
    try:
        got = read_run_secret(store)
        assert got is not None and len(got) == 32
    finally:
        store.close()


def test_control_two_first_nights_at_once_end_with_one_secret(offline_home: Path) -> None:
    """Two real `memlife run` processes on one fresh store: one is refused (exit 4) or
    finds the other's work done; the store has one secret, and the replacement's id is
    the one that secret gives."""
    db = offline_home / "memlife.db"
    _seed(db)
    cmd = [sys.executable, "-m", "memlife.cli", "run", "--engine", "local", "--json",
           "--now", (DAY + timedelta(days=3)).isoformat(), "--store", f"sqlite:///{db}"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(2)]  # fmt: skip
    codes = [p.wait(timeout=600) for p in procs]
    assert sorted(codes) in ([0, 0], [0, 4]), [p.stderr.read().decode()[-2000:] for p in procs]
    store = SqliteStore(db)
    try:
        rows = store.connection.execute("SELECT value FROM secrets WHERE name='run'").fetchall()
    finally:
        store.close()
    assert len(rows) == 1 and len(bytes(rows[0][0])) == 32
    from types import SimpleNamespace

    from memlife.group_plan import consolidation_key

    got = _records(db)
    repl = [rid for rid in got if rid.startswith("r-")]
    members = [SimpleNamespace(id=f"m-{i}", sha=content_sha256(TEXT)) for i in range(2)]
    expect = consolidation_key("u-1", NS, "payment card", members, bytes(rows[0][0]))
    assert repl == ["r-" + expect[:28]]
