"""Audit 50f (time, as the calendar attacks it): a record's deadline past the calendar.

The importer takes a ``created_at`` far in the future with a FUTURE_CREATED_AT warning only
(a sentinel such as 9999-06-01 that another system writes for "unknown"). Its deadline,
``created_at`` plus its type's TTL, is past ``datetime.max``: every reader that worked it
out as a datetime raised a bare OverflowError. The gate's "what recall never serves"
filter reads every record of a gated actor, so one such record ended every gated apply
night before its commit, every tenant's hard expiry included; ``remember`` of the same
words crashed too. The planner's own float arithmetic was never affected.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlife.importer import import_file
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, MemoryType
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import ACTOR, NOW, rec, write_cases
from tests.support.records import good

TEA = rec("m-tea", "preferences", "Drinks only green tea, never coffee.", subject="beverage")
# past its hard expiry: the night owes its deletion (an obligation, gated or not)
OLD = rec("m-old", "episodes", "Went to the dentist for a check-up.", age=40,
          mtype=MemoryType.episodic, expires=NOW - timedelta(days=2))  # fmt: skip
FAR_LINE = good(
    "m-far", actor_id=ACTOR, namespace=f"/users/{ACTOR}/episodes", memory_type="episodic",
    subject=None, content="Planned a trip to Osaka in May.", created_at="9999-06-01T00:00:00Z",
    last_verified_at=None,
)  # fmt: skip


def _night(home: Path, tmp_path: Path, *, far: bool) -> tuple[str, dict[str, str]]:
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([TEA, OLD])
        if far:  # through the real import: written, with a warning only
            src = tmp_path / "far.jsonl"
            src.write_text(json.dumps(FAR_LINE) + "\n")
            report = import_file(store, src)
            assert report.imported == 1
    finally:
        store.close()
    cases = write_cases(
        tmp_path / "cases.yaml",
        [{"id": "tea", "query": "Which tea does the user drink?", "actor_id": ACTOR,
          "must_retrieve": [{"fact": "green tea"}], "k": 3}],
    )  # fmt: skip
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    store = SqliteStore(home / "memlife.db")
    try:
        rows = dict(store.connection.execute("SELECT id, status FROM records").fetchall())
    finally:
        store.close()
    return summary.status, rows


def test_control_a_gated_night_deletes_what_has_hard_expired(home: Path, tmp_path: Path) -> None:
    status, rows = _night(home, tmp_path, far=False)
    assert status == "success"
    assert "m-old" not in rows and rows["m-tea"] == "active"


def test_a_record_dated_in_9999_does_not_stop_the_gated_night(home: Path, tmp_path: Path) -> None:
    status, rows = _night(home, tmp_path, far=True)
    assert status == "success"
    assert "m-old" not in rows  # the obligation is met
    assert rows["m-far"] == "active" and rows["m-tea"] == "active"  # nothing else touched


def test_remember_restating_a_record_dated_in_9999_refreshes_it(home: Path) -> None:
    ns = f"/users/{ACTOR}/episodes"
    store = SqliteStore(home / "memlife.db")
    far = MemoryRecord(id="m-far", actor_id=ACTOR, namespace=ns, memory_type=MemoryType.episodic,
                       content="Planned a trip to Osaka in May.",
                       created_at=datetime(9999, 6, 1, tzinfo=UTC))  # fmt: skip
    store.put_many([far])
    mem = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    try:
        res = mem.remember(ACTOR, ns, None, "Planned a trip to Osaka in May.",
                           memory_type="episodic")  # fmt: skip
        assert res.record_id == "m-far"  # refreshed, not a second record
        again = store.get("m-far")
        assert again is not None and again.access_count == 1
        assert again.expires_at is None  # a deadline past the calendar is no deadline to move
    finally:
        mem.close()
        store.close()
