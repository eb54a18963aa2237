"""Audit 50f (time, as the calendar attacks it): instants at the calendar's ends.

1. ``model.parse_time`` (every ``--now``, a flow's ``now``, AgentCore's stored times, review
   and receipts times) converted a valid ISO-8601 text to UTC unguarded: a time in year 1
   ahead of UTC or in 9999 behind it ("0001-01-01T00:30:00+01:00", "9999-12-31T23:00:00-05:00")
   raised OverflowError past every ``except ValueError`` that names the option, record or
   field. The record model has refused such times as a field error since session 20
   (``model._utc``).
2. A cutoff in the calendar's last days (``--now 9999-12-31T23:59:59Z --allow-future-cutoff``;
   a dry run takes any cutoff): the night deleted what it owed, then ended ``failure`` on
   an OverflowError while listing the run folders' days after its cutoff, on every rerun;
   the run's other times past the cutoff (a gate-blocked group's recheck 30 days on, a
   retry's backoff, the statement-time skew of a staged merge) overflowed the same way.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from memlife.apply.retry import next_retry
from memlife.errors import CorruptRecordError
from memlife.model import MemoryRecord, MemoryType
from memlife.pipeline import run_local
from memlife.run_types import RunConfig
from memlife.stores.agentcore.mapping import decode_record, encode_metadata
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.gate import ACTOR, rec, write_cases

FACTS = "/users/u-1/facts"
EARLY = "0001-01-01T00:30:00+01:00"  # 31 Dec of year 0 in UTC
LATE = "9999-12-31T23:00:00-05:00"  # year 10000 in UTC
# a newer statement supersedes the older; the set needs "green tea": the gate blocks it
TEA = rec("m-tea", "preferences", "Drinks only green tea, never coffee.", subject="beverage",
          age=300)  # fmt: skip
COFFEE = rec("m-coffee", "preferences",
             "Switched to black coffee every morning; no longer drinks tea.",
             subject="beverage", age=20)  # fmt: skip
TEA_CASE = {"id": "tea-kept", "query": "Which kind of tea does the user drink?",
            "actor_id": ACTOR, "must_retrieve": [{"fact": "green tea"}], "k": 3}  # fmt: skip


def _seed_expired(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([MemoryRecord(
            id="m-1", actor_id="u-1", namespace=FACTS, memory_type=MemoryType.semantic,
            content="Has an appointment on Monday.", owner="u-1",
            created_at=datetime(2025, 1, 1, tzinfo=UTC), expires_at=datetime(2025, 6, 1, tzinfo=UTC),
        )])  # fmt: skip
    finally:
        store.close()


def _ids(home: Path) -> set[str]:
    store = SqliteStore(home / "memlife.db")
    try:
        return {r[0] for r in store.connection.execute("SELECT id FROM records")}
    finally:
        store.close()


# -- 1. parse_time at the calendar's ends -------------------------------------------------------
def test_control_now_in_a_zone_and_a_bad_now_are_answered(home: Path) -> None:
    _seed_expired(home)
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--now", "yesterday")
    assert code == 2 and err.startswith("error: --now"), err
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--now",
                          "2026-12-01T03:00:00+01:00")  # fmt: skip
    assert code == 0, err


@pytest.mark.parametrize("when", [EARLY, LATE])
def test_run_refuses_a_now_past_the_calendar_naming_the_flag(home: Path, when: str) -> None:
    _seed_expired(home)
    code, _, err = invoke("run", "--engine", "local", "--now", when, "--allow-future-cutoff")
    assert code == 2 and err.startswith("error: --now"), err
    assert "OverflowError" not in err
    assert not (home / "receipts" / "runs").exists()  # refused before anything is written
    assert _ids(home) == {"m-1"}


@pytest.mark.parametrize(
    "when", [EARLY, LATE, datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))]
)
def test_a_flow_parameter_now_past_the_calendar_is_a_validation_error(
    when: str | datetime,
) -> None:
    with pytest.raises(ValidationError) as err:
        RunConfig(now=when)
    assert err.value.errors()[0]["loc"] == ("now",)


def test_purge_refuses_a_now_past_the_calendar_naming_the_flag(home: Path) -> None:
    _seed_expired(home)
    code, _, err = invoke("quarantine", "purge", "--older-than", "1", "--now", LATE)
    assert code == 2 and err.startswith("error: --now") and "calendar" in err, err


def _raw(created_at: str) -> dict[str, object]:
    good = MemoryRecord(id="m-1", actor_id="u-1", namespace="/u/1", memory_type="semantic",
                        content="c", created_at=datetime(2026, 1, 2, tzinfo=UTC))  # fmt: skip
    meta, _ = encode_metadata(good)
    return {"memoryRecordId": "mem-9", "namespaces": ["/u/1"], "content": {"text": "c"},
            "metadata": {**meta, "created_at": {"stringValue": created_at}}}  # fmt: skip


def test_control_an_agentcore_time_that_is_no_time_names_record_and_field() -> None:
    with pytest.raises(CorruptRecordError) as err:
        decode_record(_raw("yesterday"), None)
    assert (err.value.record_id, err.value.field) == ("mem-9", "created_at")
    assert decode_record(_raw("2026-01-02T01:00:00+01:00"), None).created_at == datetime(
        2026, 1, 2, tzinfo=UTC
    )


@pytest.mark.parametrize("when", [EARLY, LATE])
def test_an_agentcore_time_past_the_calendar_names_record_and_field(when: str) -> None:
    with pytest.raises(CorruptRecordError) as err:
        decode_record(_raw(when), None)
    assert (err.value.record_id, err.value.field, err.value.code) == (
        "mem-9", "created_at", "CORRUPT_RECORD"
    )  # fmt: skip


# -- 2. a cutoff in the calendar's last days ----------------------------------------------------
def test_control_a_far_future_cutoff_the_calendar_holds_runs(home: Path) -> None:
    _seed_expired(home)
    code, _, err = invoke("run", "--engine", "local", "--now", "9998-06-01T00:00:00Z",
                          "--allow-future-cutoff")  # fmt: skip
    assert code == 0, err
    assert _ids(home) == set()


def test_an_apply_cutoff_on_the_calendars_last_day_finishes(home: Path) -> None:
    _seed_expired(home)
    for _ in range(2):  # and its rerun: the same run, completed
        code, out, err = invoke("run", "--engine", "local", "--now", "9999-12-31T23:59:59Z",
                                "--allow-future-cutoff", "--json")  # fmt: skip
        assert code == 0, err
        assert json.loads(out)["status"] == "success"
    assert _ids(home) == set()
    receipts = sorted((home / "receipts" / "runs").rglob("receipt*.json"))
    assert [p.name for p in receipts] == ["receipt.json"]  # one run, one receipt: no failure


def test_a_retry_after_the_calendars_last_day_is_its_last_instant() -> None:
    cutoff = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert cutoff <= next_retry(3, cutoff) <= datetime.max.replace(tzinfo=UTC)


def test_control_a_retry_is_due_after_its_backoff() -> None:
    cutoff = datetime(2026, 12, 1, 2, tzinfo=UTC)
    assert cutoff + timedelta(minutes=2) < next_retry(1, cutoff) <= cutoff + timedelta(minutes=5)


def test_a_gate_blocked_merge_on_the_calendars_last_day_is_remembered(
    home: Path, tmp_path: Path
) -> None:
    """The gate blocks a supersede that loses "green tea"; the blocked group is remembered
    until a recheck 30 days after the cutoff."""
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([TEA, COFFEE])
    finally:
        store.close()
    cases = write_cases(tmp_path / "cases.yaml", [TEA_CASE])
    summary = run_local(RunConfig(dry_run=False, now=datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
                                  eval_cases=cases, allow_future_cutoff=True))  # fmt: skip
    assert summary.status == "blocked"
    assert summary.other.get("gate_blocked_groups_remembered") == 1


def test_a_dry_run_in_the_calendars_last_minutes_stages_its_merge(
    home: Path, tmp_path: Path
) -> None:
    """A dry run accepts any cutoff (``operator_config``); staging a group added the
    statement-time skew to it."""
    home.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([MemoryRecord(
            id=f"m-{n}", actor_id="u-1", namespace="/users/u-1/preferences",
            memory_type=MemoryType.semantic, subject="beverage", owner="u-1",
            content="Drinks only green tea, never coffee.",
            created_at=datetime(2025, 1, 1 + n, tzinfo=UTC),
        ) for n in range(2)])  # fmt: skip
    finally:
        store.close()
    cases = write_cases(tmp_path / "cases.yaml", [
        {"id": "tea", "query": "Which tea does the user drink?", "actor_id": "u-1",
         "must_retrieve": [{"fact": "green tea"}], "k": 3},
    ])  # fmt: skip
    code, out, err = invoke("run", "--dry-run", "--engine", "local", "--now",
                            "9999-12-31T23:59:59Z", "--eval-cases", cases, "--json")  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "success" and result["counts"]["consolidate_candidate"] == 2
