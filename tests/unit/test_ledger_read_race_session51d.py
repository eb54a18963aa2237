"""Audit 51d: the access ledger read while another process rewrites one of its parts.

Nightly scoring (and a dry run, which takes no lease) reads the whole ledger
(``actor_stats``). Three writers rewrite parts with no lease of the reader's between them:
an apply night's housekeeping compaction (a dry run reading meanwhile), an erasure, and an
online worker's after-flush scrub (``ledger_ingest.write_checked``, no lease at all). Each
writes the part's replacement first, then removes the old part. A reader that had listed
the old part then

- locally, met it gone at its footer check: it warned "unreadable part" and left it out,
  so every other read in that part was missing from the night's scores (3 reads counted
  as 0), or met it gone at the read itself: FileNotFoundError, the night's start failed;
- on S3, met ``NoSuchKey`` at its GET: the night's start failed.

The interleaving is put where the second writer's work lands: locally at the reader's
footer check or listing (the file system), on S3 at the reader's GET (the network
boundary, as tests/unit/test_state_ledger_session49.py does).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import memlife.ledger_parts as ledger_parts
from memlife.ledger import AccessLedger
from memlife.state.dynamodb import DynamoState
from memlife.state.ledger import S3AccessLedger
from tests.support.aws_state import aws_state

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)
NS = "/users/u-1/facts"


def _reads(ledger: AccessLedger, ids: list[str], day: int = 0) -> None:
    """One flush of one read of each id: one part, as an online worker writes it."""
    for j, rid in enumerate(ids):
        ledger.append("u-1", NS, rid, at=T0 + timedelta(days=day, minutes=j))
    ledger.flush()


def _counts(ledger: AccessLedger) -> dict[str, int]:
    return {rid: t.count for (_, rid), t in ledger.actor_stats().items()}


def _at_first_check(monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], Any]) -> None:
    """Run ``meanwhile`` (another process) right before the reader's first footer check."""
    real, fired = ledger_parts.readable, []

    def readable(part: Path) -> bool:
        if not fired:
            fired.append(True)
            meanwhile()
        return real(part)

    monkeypatch.setattr(ledger_parts, "readable", readable)


def _after_listing(
    monkeypatch: pytest.MonkeyPatch, reader: AccessLedger, meanwhile: Callable[[], Any]
) -> None:
    """Run ``meanwhile`` right after the reader has listed the parts it is about to read."""
    real, calls = AccessLedger._paths, []

    def paths(self: AccessLedger) -> list[Path]:
        out = real(self)
        if self is reader:
            calls.append(True)
            if len(calls) == 2:  # read(): files() says there are parts, dataset() lists them
                meanwhile()
        return out

    monkeypatch.setattr(AccessLedger, "_paths", paths)


def test_an_online_scrub_during_the_nights_listing_loses_no_other_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ledger"
    agent, night = AccessLedger(root), AccessLedger(root)
    _reads(agent, ["m-1", "m-2", "m-3"])
    _at_first_check(monkeypatch, lambda: agent.erase(["m-1"], actor_id="u-1"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing here is unreadable
        assert _counts(night) == {"m-2": 1, "m-3": 1}


def test_an_online_scrub_between_the_listing_and_the_read_fails_no_night(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ledger"
    agent, night = AccessLedger(root), AccessLedger(root)
    _reads(agent, ["m-1", "m-2", "m-3"])
    _after_listing(monkeypatch, night, lambda: agent.erase(["m-1"], actor_id="u-1"))
    assert _counts(night) == {"m-2": 1, "m-3": 1}


def test_a_nights_compaction_during_a_dry_runs_read_loses_no_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An apply night compacts closed days at its end; a dry run (no lease) reads meanwhile."""
    root = tmp_path / "ledger"
    agent, night, dry = AccessLedger(root), AccessLedger(root), AccessLedger(root)
    _reads(agent, ["m-1", "m-2"])
    _reads(agent, ["m-1", "m-3"])
    _at_first_check(monkeypatch, lambda: night.compact(before="2026-11-02"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _counts(dry) == {"m-1": 2, "m-2": 1, "m-3": 1}


def test_control_a_rewrite_before_or_after_the_read_counts_the_same(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    agent, night = AccessLedger(root), AccessLedger(root)
    _reads(agent, ["m-1", "m-2", "m-3"])
    assert _counts(night) == {"m-1": 1, "m-2": 1, "m-3": 1}
    agent.erase(["m-1"], actor_id="u-1")
    assert _counts(night) == {"m-2": 1, "m-3": 1}
    agent.compact()
    assert _counts(night) == {"m-2": 1, "m-3": 1}


def test_control_a_part_cut_short_is_still_named_and_left_out(tmp_path: Path) -> None:
    """A damaged part stays a warning and is skipped: no endless listing again."""
    root = tmp_path / "ledger"
    agent = AccessLedger(root)
    _reads(agent, ["m-1"])
    _reads(agent, ["m-2"], day=1)
    damaged = sorted(root.glob("date=2026-11-01/part-*.parquet"))[0]
    damaged.write_bytes(damaged.read_bytes()[:20])
    with pytest.warns(RuntimeWarning, match="unreadable part"):
        assert _counts(AccessLedger(root)) == {"m-2": 1}


# -- the S3 ledger -----------------------------------------------------------------------------
@pytest.fixture()
def state() -> Iterator[DynamoState]:
    with aws_state("inprocess") as (_, st):
        yield st


def _before_first_get(state: DynamoState, meanwhile: Callable[[], Any]) -> None:
    """Run ``meanwhile`` (another worker) right before this worker's first S3 GET lands."""
    real, fired = state.s3.get_object, []

    def get_object(**kw: Any) -> Any:
        if not fired:
            fired.append(True)
            meanwhile()
        return real(**kw)

    state.s3.get_object = get_object  # type: ignore[method-assign]


def test_an_s3_scrub_between_the_nights_listing_and_its_get_fails_no_night(
    state: DynamoState,
) -> None:
    night = S3AccessLedger(state)
    scrub = S3AccessLedger(DynamoState(state.settings))  # an online worker's after-flush scrub
    _reads(scrub, ["m-1", "m-2", "m-3"])
    _before_first_get(state, lambda: scrub.erase(["m-1"], actor_id="u-1"))
    assert _counts(night) == {"m-2": 1, "m-3": 1}


def test_control_an_s3_scrub_before_the_nights_read(state: DynamoState) -> None:
    night = S3AccessLedger(state)
    scrub = S3AccessLedger(DynamoState(state.settings))
    _reads(scrub, ["m-1", "m-2", "m-3"])
    scrub.erase(["m-1"], actor_id="u-1")
    assert _counts(night) == {"m-2": 1, "m-3": 1}
