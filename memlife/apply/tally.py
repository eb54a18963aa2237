"""What a pass of the executor counted: outcomes, failures, model calls. Content-free."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

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


@dataclass
class Tally:
    counts: Counter = field(default_factory=Counter)
    ids_not_deleted: list[dict] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    rejections: Counter = field(default_factory=Counter)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    stopped_shards: list[dict] = field(default_factory=list)

    def merge(self, other: Tally) -> None:
        self.counts.update(other.counts)
        self.ids_not_deleted += other.ids_not_deleted
        self.failures += other.failures
        self.rejections.update(other.rejections)
        self.model_calls += other.model_calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.stopped_shards += other.stopped_shards
