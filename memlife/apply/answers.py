"""Which model answers a run's executor may reuse (memlife/consolidate/answers.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from memlife.consolidate.answers import AnswerBook, answer_book
from memlife.consolidate.base import ConsolidationResult, Group
from memlife.settings import settings

if TYPE_CHECKING:
    from memlife.apply.executor import Executor


@runtime_checkable
class KeepsAnswers(Protocol):
    """A consolidator that calls a model and can use a kept answer (AnthropicConsolidator)."""

    keeps_answers: bool

    def consolidate(
        self, group: Group, answers: AnswerBook | None = None
    ) -> ConsolidationResult: ...


def consolidate(ex: Executor, group: Group) -> ConsolidationResult:
    """The run's consolidator on ``group``, with the run's answers where it keeps any."""
    consolidator = ex.consolidator
    if consolidator is None:
        raise RuntimeError("no consolidator: staging checks for one first")
    book = for_executor(ex)
    if book is not None and isinstance(consolidator, KeepsAnswers):
        return consolidator.consolidate(group, answers=book)
    return consolidator.consolidate(group)


def for_executor(ex: Executor) -> AnswerBook | None:
    """The run's book (opened once an executor); None unless its consolidator calls a model
    and keeps answers (``keeps_answers``), or where its cache keeps no SQLite file."""
    if not isinstance(ex.consolidator, KeepsAnswers) or not ex.consolidator.keeps_answers:
        return None
    if not settings().reuse_model_answers:  # MEMLIFE_REUSE_MODEL_ANSWERS=false
        return None
    if "_answers" not in ex.__dict__:
        ex.__dict__["_answers"] = answer_book(ex.embeddings, dry_run=ex.dry_run)
    book = ex.__dict__["_answers"]
    return book if isinstance(book, AnswerBook) else None
