"""Consolidation: a group of records about one subject -> one validated replacement statement."""

from memlife.consolidate.base import (
    ConsolidationError,
    ConsolidationResult,
    Consolidator,
    Group,
)

__all__ = ["ConsolidationError", "ConsolidationResult", "Consolidator", "Group"]
