"""The replacement record a consolidation writes: deterministic id, content = the summary."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta

from memlife.consolidate.base import ConsolidationResult
from memlife.group_plan import Member, consolidation_key
from memlife.model import (
    FUTURE_SKEW,
    MemoryRecord,
    MemoryType,
    Provenance,
    RetentionClass,
    Status,
    content_sha256,
    days_after,
)


def build_from_members(
    actor_id: str,
    namespace: str,
    members: Sequence[Member],
    survivor_id: str,
    result: ConsolidationResult,
    cutoff: datetime,
    policy_version: str,
    memory_type: MemoryType | None = None,
    ttl_days: Mapping[MemoryType, float | None] | None = None,
    *,
    secret: bytes | None = None,
    retired: Collection[str] = (),
) -> MemoryRecord:
    """The replacement of a planned group (group_plan.GroupPlan): built from its members'
    ids, hashes and times, so a group of any size needs no record content in memory.
    ``ttl_days``: the policy's TTL per type, so it lives as long as its longest-lived member.
    ``secret``: the store's run secret, which keys the id (group_plan.consolidation_key).
    ``retired``: members whose statement it does not carry (contradicted, outdated)."""
    survivor = next(m for m in members if m.id == survivor_id)
    # a check of a statement it retires verified nothing it says: "Blood type is A+"
    # verified last week does not make "B+" verified (audit 51x5)
    verified = [m.last_verified_at for m in members if m.last_verified_at and m.id not in retired]
    accessed = [m.last_accessed_at for m in members if m.last_accessed_at]
    sensitive = any(m.retention_class is RetentionClass.sensitive for m in members)
    owner = survivor.owner or next((m.owner for m in members if m.owner), None)
    # a dry run's cutoff may be the calendar's last minutes: no OverflowError (audit 50f)
    latest_statement = days_after(cutoff, FUTURE_SKEW / timedelta(days=1))
    record = MemoryRecord(
        id="r-" + consolidation_key(actor_id, namespace, members[0].subject, members, secret)[:28],
        actor_id=actor_id,
        namespace=namespace,
        memory_type=memory_type or survivor.memory_type,
        subject=survivor.subject or None,
        content=result.summary,
        owner=owner,
        confidence=result.confidence,
        source=survivor.source,
        # the statement time of the newest statement it carries, not the night it was
        # written: a later, weaker statement must still read as later (review, not supersede)
        # (a date after the cutoff is not a statement time: it never carries over)
        created_at=max(
            (m.created_at for m in members if m.created_at <= latest_statement),
            default=cutoff,
        ),
        last_accessed_at=max(accessed) if accessed else None,
        access_count=sum(m.access_count for m in members),
        last_verified_at=max(verified) if verified else None,
        # it carries every member's claim, so it lives as long as the longest-lived one:
        # expiring with one member would delete it under the others, still superseded by
        # it (invariant 3); a member without a deadline gives it none
        expires_at=_latest_expiry(members),
        retention_class=RetentionClass.sensitive if sensitive else RetentionClass.standard,
        status=Status.active,
        provenance=Provenance(
            policy_version=policy_version,
            supersedes=sorted(m.id for m in members),
            content_sha256=content_sha256(result.summary),
        ),
    )
    return record if ttl_days is None else _lives_as_long(record, members, ttl_days)


def _lives_as_long(
    record: MemoryRecord, members: Sequence[Member], ttl_days: Mapping[MemoryType, float | None]
) -> MemoryRecord:
    """The replacement outlives none of its claims' records and dies before none: under its
    own type's TTL, counted from its statement time, it could be past its deadline the
    night it is written (a replay of an earlier cutoff: its newest statement time is the
    oldest member's) and be deleted by the next run with every source it supersedes, while
    its members were alive (session 29 review: a cancelled night's rerun deleted 19 more).
    It then takes its longest-lived member's deadline, or, when one has none, its type."""
    if record.expires_at is not None:  # every member has one: it has their latest already
        return record
    own = lifetime_end(record.created_at, record.memory_type, None, ttl_days)
    if own is None:
        return record
    theirs = [(lifetime_end(m.created_at, m.memory_type, m.expires_at, ttl_days), m)
              for m in members]  # fmt: skip
    lasting = [m for d, m in theirs if d is None]
    if lasting:  # a member that never expires: the replacement keeps its claim as long
        return record.model_copy(update={"memory_type": lasting[0].memory_type})
    latest = max(d for d, _ in theirs if d is not None)
    return record.model_copy(update={"expires_at": latest}) if latest > own else record


def lifetime_end(created: datetime, memory_type: MemoryType, expires_at: datetime | None,
                 ttl_days: Mapping[MemoryType, float | None]) -> datetime | None:  # fmt: skip
    """When a record's lifetime ends: its own deadline, else its type's TTL from its
    statement time; None: never."""
    if expires_at is not None:
        return expires_at
    days = ttl_days.get(memory_type)
    return days_after(created, days) if days else None  # never an OverflowError


def past_lifetime(record: MemoryRecord, ttl_days: Mapping[MemoryType, float | None],
                  now: datetime) -> bool:  # fmt: skip
    """Is ``record``'s lifetime over at ``now`` (as online recall reads it: never served)?"""
    end = lifetime_end(record.created_at, record.memory_type, record.expires_at, ttl_days)
    return end is not None and end <= now


def outlives(source: MemoryRecord, replacement: MemoryRecord,
             ttl_days: Mapping[MemoryType, float | None]) -> bool:  # fmt: skip
    """Would ``source``, as it is now, live longer than ``replacement``? Then superseding it
    cuts its claim's life short: a restatement (remember of the same text) since the group
    was read made it semantic or pushed its deadline out, and the replacement, built from
    the members as they were, would take the claim down at the old deadline (session 30
    review: the next night past it deleted the replacement and its sources with it)."""
    theirs = lifetime_end(source.created_at, source.memory_type, source.expires_at, ttl_days)
    ours = lifetime_end(replacement.created_at, replacement.memory_type,
                        replacement.expires_at, ttl_days)  # fmt: skip
    return ours is not None and (theirs is None or theirs > ours)


def _latest_expiry(members: Sequence[Member]) -> datetime | None:
    expiries = [m.expires_at for m in members if m.expires_at is not None]
    return max(expiries) if expiries and len(expiries) == len(members) else None
