"""The consolidator protocol, its input (a Group) and its validated output.

A consolidator never changes the store: it returns a ``ConsolidationResult`` or raises
``ConsolidationError`` with a reason code; the executor (apply.py) decides what happens.
Every failure leaves the originals untouched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from memlife.errors import ConsolidationError as ConsolidationError  # moved; re-exported
from memlife.errors import Reason
from memlife.model import MemoryRecord, Source

# The model's key, permissions or name is wrong (401/403/404, a 400 naming the model):
# a run-level configuration failure, never a group's (consolidate/anthropic.py).
MODEL_MISCONFIGURED = "MODEL_MISCONFIGURED"


@dataclass(frozen=True)
class Group:
    """Records of ONE actor + namespace + subject (never more), oldest first."""

    key: str  # plan.group_key(actor, namespace, subject)
    actor_id: str
    namespace: str
    subject: str
    records: list[MemoryRecord]
    survivor_id: str | None = None  # the planner's newest, most authoritative statement
    superseded_ids: list[str] = field(default_factory=list)  # planner: contradicted/older
    recurring: bool = False  # one event told many times: the answer is a lasting fact

    def __post_init__(self) -> None:
        for r in self.records:
            if (r.actor_id, r.namespace) != (self.actor_id, self.namespace):
                raise ValueError(f"record {r.id} is outside group {self.key}: tenants never mix")

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.records]

    def consolidation_key(self) -> str:
        """Deterministic over the members and their content: a rerun finds its replacement."""
        parts = sorted(f"{r.id}:{r.sha256}" for r in self.records)
        raw = "\x1f".join([self.actor_id, self.namespace, self.subject, *parts])
        return hashlib.sha256(raw.encode()).hexdigest()


# Used when no policy is given; the same values as policies/default.yaml.
DEFAULT_SOURCE_WEIGHTS: Mapping[Source, float] = {
    Source.system_of_record: 1.0,
    Source.user_confirmed: 0.9,
    Source.user_stated: 0.8,
    Source.agent_inferred: 0.4,
}


def pick_survivor(
    group: Group, weights: Mapping[Source, float] = DEFAULT_SOURCE_WEIGHTS
) -> MemoryRecord:
    """The planner's survivor if set, else the best record by (source weight, created_at)."""
    if group.survivor_id is not None:
        for r in group.records:
            if r.id == group.survivor_id:
                return r
        raise ConsolidationError(Reason.SURVIVOR_NOT_IN_GROUP, f"survivor not in group {group.key}")
    from memlife.group_plan import survivor_rank

    return max(group.records, key=survivor_rank(weights))


class ConsolidationResult(BaseModel):
    """What a consolidator returns; validated before anything is written."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1, description="The one current statement for the subject")
    claims: list[str] = Field(min_length=1, description="Atomic claims the summary makes")
    dropped_claims: list[str] = Field(
        default_factory=list, description="Outdated/contradicted claims left out"
    )
    confidence: float = Field(ge=0, le=1)
    source_ids: list[str] = Field(
        min_length=1, description="Ids of the records that support the summary"
    )
    relation: str = Field(
        default="duplicate", description="duplicate | update | complement | unrelated"
    )
    outdated_ids: list[str] = Field(
        default_factory=list, description="update: older records no longer true"
    )
    # Filled by the consolidator, not the model:
    model: str | None = None
    requests: int = 0  # HTTP requests sent for this result, SDK retries included
    input_tokens: int = 0
    output_tokens: int = 0
    usage_estimated: bool = False  # the answer carried no usage: the tokens are estimates
    reused: bool = False  # a dry run's answer to the same request: no call (answers.py)


class Consolidator(Protocol):
    name: str

    def consolidate(self, group: Group) -> ConsolidationResult:
        """Return a validated, grounded result or raise ConsolidationError."""
        ...
