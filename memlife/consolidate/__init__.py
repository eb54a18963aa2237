"""Consolidation: a group of records about one subject -> one validated replacement statement."""

from __future__ import annotations

from memlife.consolidate.base import (
    ConsolidationError,
    ConsolidationResult,
    Consolidator,
    Group,
)
from memlife.consolidate.extractive import ExtractiveConsolidator
from memlife.consolidate.grounding import check_grounding
from memlife.embed import Embedder
from memlife.policy import Policy
from memlife.settings import settings


def default_consolidator(
    policy: Policy | None = None, embedder: Embedder | None = None
) -> Consolidator:
    """The Anthropic consolidator when ANTHROPIC_API_KEY is set, else the extractive one."""
    if settings().anthropic_api_key:
        from memlife.consolidate.anthropic import AnthropicConsolidator

        return AnthropicConsolidator.from_env(policy=policy, embedder=embedder)
    return ExtractiveConsolidator(policy)


__all__ = [
    "ConsolidationError",
    "ConsolidationResult",
    "Consolidator",
    "ExtractiveConsolidator",
    "Group",
    "check_grounding",
    "default_consolidator",
]
