"""The default consolidator when no model is configured: it never writes new text.

The summary is the group's most authoritative, most recent statement copied VERBATIM
(the planner's survivor when set, else the best by (source weight, created_at)); every
other distinct statement is listed, verbatim, as dropped. Nothing can be invented, so
no grounding check is needed and no tokens are spent.

One judgement it does make: a survivor that reads as additive ("Also allergic to
shellfish.") complements the older statements, it does not replace them; offline, that
group is kept apart (KEEP_APART, settled until a member changes), as the model path would
answer. Not when it stands in for that model (a dry run's estimate): the model judges. Before, the rule "the newer statement wins" superseded "Allergic to peanuts."
"""

from __future__ import annotations

from memlife.consolidate.base import (
    DEFAULT_SOURCE_WEIGHTS,
    ConsolidationError,
    ConsolidationResult,
    Group,
    pick_survivor,
)
from memlife.consolidate.grounding import KEEP_APART
from memlife.errors import Reason
from memlife.policy import Policy
from memlife.text import normalise, reads_additive


class ExtractiveConsolidator:
    name = "extractive"

    def __init__(self, policy: Policy | None = None, *, judge_additive: bool = True) -> None:
        self.weights = policy.source_weights if policy is not None else DEFAULT_SOURCE_WEIGHTS
        # False when it stands in for a model in a dry run: the model judges, not this rule
        self.judge_additive = judge_additive

    def consolidate(self, group: Group) -> ConsolidationResult:
        if not group.records:
            raise ConsolidationError(Reason.EMPTY_GROUP, group.key)
        keep = pick_survivor(group, self.weights)
        if self.judge_additive and group.superseded_ids and reads_additive(keep.content):
            raise ConsolidationError(KEEP_APART, "the newest statement adds to the others")
        said = normalise(keep.content)
        seen = {said}
        dropped: list[str] = []
        for r in sorted(group.records, key=lambda r: (r.created_at, r.id), reverse=True):
            norm = normalise(r.content)
            if norm not in seen:  # restatements of one statement are dropped once
                seen.add(norm)
                dropped.append(r.content)
        return ConsolidationResult(
            summary=keep.content,
            claims=[keep.content],
            dropped_claims=dropped,
            # the confidence of what it says: only records saying the survivor's very
            # statement lend theirs; one it drops lends none ("Blood type is B+" said at 0.3
            # is not 0.99 because "A+", retired, was: audit 51x5)
            confidence=max(r.confidence for r in group.records if normalise(r.content) == said),
            source_ids=group.ids,
            model=None,
        )
