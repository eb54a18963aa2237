"""What a pass of the executor counted: outcomes, failures, model calls. Content-free."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Required, TypedDict

from memlife.journal import Outcome

# The count an outcome adds to (the run receipt's lifecycle counts are built from these).
COUNT = {
    Outcome.deleted: "deleted",
    Outcome.already_absent: "already_absent",
    Outcome.written: "consolidated",
    Outcome.superseded: "superseded",
    Outcome.quarantined: "quarantined",
    Outcome.restored: "restored",
    Outcome.released: "released",
    Outcome.reviewed: "reviewed_by_person",
    Outcome.held: "held_placed",
    Outcome.skipped: "skipped",
    Outcome.updated: "updated",
}


class NotDeleted(TypedDict):
    """A record the run meant to delete and did not, and why (a code, never content)."""

    id: str
    reason: str | None


class Failure(TypedDict, total=False):
    """A failed operation (operation_id..), or a group sent to review (group_key..)."""

    operation_id: str
    run_id: str
    record_id: str
    group_key: str
    actor_id: str
    namespace: str
    action: Required[str]
    code: Required[str]
    retryable: Required[bool]
    next_retry_at: str | None
    detail: str
    attempts: int
    review: bool


class StoppedShard(TypedDict):
    """A shard a StoreError (e.g. QUOTA_EXCEEDED) stopped for the rest of the run."""

    actor_id: str
    namespace: str
    code: str


@dataclass
class Tally:
    counts: Counter[str] = field(default_factory=Counter)
    ids_not_deleted: list[NotDeleted] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    rejections: Counter[str] = field(default_factory=Counter)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    stopped_shards: list[StoppedShard] = field(default_factory=list)
    # a batch's groups whose verdict (a refusal, review) it journaled, by group key, each with
    # the counts it added; and the count a group was given for an earlier verdict standing:
    # a throttled batch's retry counts each verdict once (memlife/apply/carry.py, audit 52d2)
    verdicts: dict[str, Tally] = field(default_factory=dict)
    standins: dict[str, str] = field(default_factory=dict)

    def verdict(self, key: str | None, v: Tally) -> None:
        """Add ``v``, what a group's journaled verdict counts; kept by ``key`` (None: a dry
        run, which journals nothing: its retry sees the group as new and counts it itself)."""
        self.merge(v)
        if key is not None:
            self.verdicts[key] = v

    def stand_in(self, key: str | None, name: str) -> None:
        """Count a group under ``name`` because an earlier verdict of it stands."""
        self.counts[name] += 1
        if key is not None:
            self.standins[key] = name

    def merge(self, other: Tally) -> None:
        self.counts.update(other.counts)
        self.ids_not_deleted += other.ids_not_deleted
        self.failures += other.failures
        self.rejections.update(other.rejections)
        self.model_calls += other.model_calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.stopped_shards += other.stopped_shards
        self.verdicts.update(other.verdicts)
        self.standins.update(other.standins)
