"""A replacement lives as long as its longest-lived member (session 29 review, a nightly
cancelled mid-commit under Prefect and rerun): a replay of an earlier cutoff wrote a
replacement whose statement time was its oldest member's (the others were newer than the
cutoff), so under its episodic TTL it was past its deadline the night it was written; the
rerun deleted it as TTL_EXPIRED with the 12 sources it superseded, all of them alive."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memlife.consolidate import ConsolidationResult
from memlife.consolidate.replacement import build_from_members
from memlife.group_plan import Member
from memlife.model import MemoryRecord, MemoryType, plan_view
from memlife.plan import Planner
from memlife.policy import load_policy

CUTOFF = datetime(2026, 3, 1, tzinfo=UTC)


def _member(rid: str, created: datetime, mtype: str = "episodic", expires: datetime | None = None) -> Member:  # fmt: skip
    return Member.of(MemoryRecord(id=rid, actor_id="u-1", namespace="/users/u-1/episodes",
                                  memory_type=mtype, subject="trip", content=f"Went to Rome {rid}.",
                                  created_at=created, expires_at=expires))  # fmt: skip


def _build(members: list[Member]) -> MemoryRecord:
    policy = load_policy()
    result = ConsolidationResult(summary="Went to Rome.", claims=["Went to Rome."],
                                 confidence=0.9, source_ids=[m.id for m in members])  # fmt: skip
    ttl = {mt: tp.default_ttl_days for mt, tp in policy.memory_types.items()}
    return build_from_members("u-1", "/users/u-1/episodes", members, members[0].id, result,
                              CUTOFF, policy.version, None, ttl)  # fmt: skip


def _expired(record: MemoryRecord) -> bool:
    planner = Planner(load_policy(), CUTOFF)
    return planner.expired(plan_view(record)) is not None


def test_a_replay_never_writes_a_replacement_past_its_deadline() -> None:
    old = _member("m-old", datetime(2025, 1, 22, tzinfo=UTC))  # the only one before the cutoff
    newer = [_member(f"m-{i}", datetime(2026, 9, 1 + i, tzinfo=UTC)) for i in range(3)]
    replacement = _build([old, *newer])
    assert replacement.created_at == old.created_at  # the newest statement time it may carry
    assert not _expired(replacement)
    assert replacement.expires_at == datetime(2027, 9, 3, tzinfo=UTC)  # its longest-lived member's


def test_a_member_that_never_expires_keeps_the_replacement() -> None:
    old = _member("m-old", datetime(2025, 1, 22, tzinfo=UTC))
    lasting = _member("m-fact", datetime(2024, 5, 1, tzinfo=UTC), mtype="semantic")
    replacement = _build([old, lasting])
    assert replacement.memory_type is MemoryType.semantic and replacement.expires_at is None
    assert not _expired(replacement)


def test_an_ordinary_replacement_is_unchanged() -> None:
    members = [_member(f"m-{i}", CUTOFF - timedelta(days=10 - i)) for i in range(3)]
    replacement = _build(members)
    assert replacement.expires_at is None and replacement.memory_type is MemoryType.episodic
