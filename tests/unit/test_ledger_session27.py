"""The access ledger, session 27 review: a buffered access outlived an erasure, and a
flush that failed part way wrote some days twice (the nightly score counted them twice)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.erase import erase
from memlife.ledger import AccessLedger
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore

NS = "/users/u1/facts"
FACT = "Was diagnosed with hepatitis C in March."


def test_a_failed_day_goes_back_alone_and_no_day_is_written_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.append("u1", NS, "m-1", at=datetime(2026, 12, 1, 23, 59, tzinfo=UTC))
    ledger.append("u1", NS, "m-2", at=datetime(2026, 12, 2, 0, 1, tzinfo=UTC))
    real, calls = ledger._write_day, []

    def second_day_fails_once(day: str, table: object) -> None:
        calls.append(day)
        if day == "2026-12-02" and calls.count(day) == 1:
            raise OSError("transient")
        real(day, table)  # type: ignore[arg-type]

    monkeypatch.setattr(ledger, "_write_day", second_day_fails_once)
    with pytest.raises(OSError):
        ledger.flush()
    assert ledger.pending == 1
    assert ledger.flush() == 1
    assert sorted(ledger.read().column("record_id").to_pylist()) == ["m-1", "m-2"]


@pytest.fixture()
def mem(tmp_path: Path) -> LongTermMemory:
    store = SqliteStore(tmp_path / "m.db")
    return LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger", flush_seconds=None))


def test_an_access_buffered_before_an_erasure_is_never_written(mem: LongTermMemory) -> None:
    rid = mem.remember("u1", NS, "health", FACT).record_id
    assert [h.record.id for h in mem.recall("u1", "what was she diagnosed with?", namespace=NS)]
    assert mem.ledger.pending >= 1
    erase(mem.store, "u1", ids=[rid])  # as `memlife erase`: its scrub reads the files only
    mem.close()
    assert rid not in mem.ledger.read().column("record_id").to_pylist()


def test_an_erasure_committed_while_the_rows_are_written_is_scrubbed_after(
    mem: LongTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The erasure commits and scrubs between the flush's check and its file: the file it
    could not see is scrubbed by the flush itself."""
    rid = mem.remember("u1", NS, "health", FACT).record_id
    mem.recall("u1", "what was she diagnosed with?", namespace=NS)
    real = mem.ledger._write_day

    def erasure_first(day: str, table: object) -> None:
        erase(mem.store, "u1", ids=[rid])
        real(day, table)  # type: ignore[arg-type]

    monkeypatch.setattr(mem.ledger, "_write_day", erasure_first)
    mem.close()
    assert rid not in mem.ledger.read().column("record_id").to_pylist()


def test_a_closed_store_does_not_stop_the_ledger(tmp_path: Path) -> None:
    """close() stops watching: a ledger shared past its store still writes."""
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    store = SqliteStore(tmp_path / "m.db")
    with LongTermMemory(store, ledger=ledger) as mem:
        mem.remember("u1", NS, "tea", "Drinks green tea.")
    store.close()
    ledger.append("u1", NS, "m-9")
    assert ledger.flush() == 1
