"""Refused answers for one group: backoff between nights, then review after MAX_REJECTIONS,
so a group the model cannot answer is not sent, and paid for, every night."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from memlife.apply.retry import next_retry
from memlife.apply.tally import Tally
from memlife.consolidate.base import Group
from memlife.evidence_key import keyed

if TYPE_CHECKING:
    from memlife.apply.executor import Executor

MAX_REJECTIONS = 3  # refused answers for one group before it goes to review


def backing_off(ex: Executor, gkey: str, tally: Tally, key: str | None = None) -> bool:
    """A group whose answers were refused waits (backoff), and after MAX_REJECTIONS waits
    for a reviewer: it is not sent again night after night. ``key``: the group's (a
    throttled batch's retry counts its earlier attempt's verdict instead: apply/carry.py)."""
    if ex.dry_run:
        return False
    seen = ex.journal.rejection(gkey)
    if seen is None:
        return False
    if seen["next_attempt_at"] is None:
        tally.stand_in(key, "consolidation_in_review")
        return True
    if seen["next_attempt_at"] > ex.cutoff:
        tally.stand_in(key, "consolidation_backing_off")
        return True
    return False


def reject(ex: Executor, group: Group, gkey: str, code: str, tally: Tally) -> datetime | None:
    """Record a refusal; returns when the group may be sent again (None: in review)."""
    if ex.dry_run:
        return None
    seen = ex.journal.rejection(gkey)
    attempts = (seen["attempts"] if seen else 0) + 1
    review = attempts >= MAX_REJECTIONS
    retry_at = None if review else next_retry(attempts, ex.cutoff)
    ex.journal.reject(gkey, group.actor_id, group.namespace, code, retry_at, ex.cutoff)
    if review:
        tally.counts["consolidation_to_review"] += 1
        tally.failures.append(
            {
                # keyed as the content hashes are: the plain key is a sha256 over every
                # member's content hash, which the receipt would keep past an erasure of
                # them (a guessed text confirmed); `ops failed --json` shows both (audit 53a)
                "group_key": keyed(gkey, ex.evidence_secret()) or gkey,
                "actor_id": group.actor_id,
                "namespace": group.namespace,
                "code": code,
                "attempts": attempts,
                "action": "consolidate",
                "retryable": False,
                "next_retry_at": None,
                "review": True,
            }
        )
    return retry_at
