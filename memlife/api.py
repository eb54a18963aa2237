"""The public library API: ``from memlife import Memory`` (and :class:`AsyncMemory`).

A thin, keyword-argument face over :class:`memlife.online.memory.LongTermMemory` and
:func:`memlife.online.compaction.compact`. The store is opened from a URL (or the
``MEMLIFE_STORE`` / ``MEMLIFE_HOME`` defaults the CLI uses), so an agent process and the
nightly job share one store: what the agent remembers, the job scores, consolidates and
expires; what the agent recalls is written to the access ledger the job reads.

Every call is scoped to one actor: ``forget`` refuses ids that belong to someone else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlife.errors import InputError
from memlife.model import MemoryRecord, MemoryType, Source, Status
from memlife.online.inputs import ids_arg, record_id_arg

if TYPE_CHECKING:
    from memlife.ledger import AccessLedger
    from memlife.online.compaction import CompactionResult, Summarizer, TokenCounter
    from memlife.online.memory import LongTermMemory
    from memlife.stores.base import MemoryStore


@dataclass(frozen=True)
class Remembered:
    """What :meth:`Memory.remember` did."""

    id: str  # the record now holding the fact (the existing one for a duplicate)
    created: bool  # False: an active memory already said this and was refreshed
    similarity: float | None = None  # cosine to the refreshed memory (1.0 for an exact duplicate)


@dataclass(frozen=True)
class Recollection:
    """One recall hit, best first (``rank`` 1)."""

    id: str
    content: str
    score: float  # fused ranking score (cosine + lexical bonus)
    similarity: float  # cosine, what the threshold tests
    rank: int
    namespace: str
    subject: str | None
    record: MemoryRecord  # the full record, as the store holds it now


def _default_namespace(actor: str) -> str:
    from memlife.online.memory import default_namespace

    return default_namespace(actor)


class Memory:
    """Long-term memory of one store, for any number of actors.

    >>> with Memory("sqlite:///agent.db") as memory:          # doctest: +SKIP
    ...     memory.remember("Drinks only green tea.", actor="u1", subject="beverage")
    ...     hits = memory.recall("what does she drink?", actor="u1")

    ``store`` is a URL (``sqlite:///path.db``, ``agentcore://ID?region=..``), an open
    :class:`memlife.stores.MemoryStore`, or None for ``$MEMLIFE_STORE`` / the embedded
    default. A store opened here is closed by :meth:`close`; one passed in is not.
    """

    def __init__(
        self,
        store: str | MemoryStore | None = None,
        *,
        ledger: str | Path | AccessLedger | None = None,
        threshold: float | None = None,
        near_duplicate: float | None = None,
    ) -> None:
        from memlife.backends import open_ledger
        from memlife.ledger import AccessLedger
        from memlife.online.memory import DEFAULT_NEAR_DUPLICATE, LongTermMemory
        from memlife.retrieval import DEFAULT_THRESHOLD
        from memlife.stores import open_store

        self._owns_store = store is None or isinstance(store, str)
        self.store: MemoryStore = (
            open_store(store) if store is None or isinstance(store, str) else store
        )
        if not isinstance(ledger, AccessLedger):
            # the store's ledger (S3 with remote state), where the nightly run reads it
            ledger = open_ledger(ledger, store=self.store)
        self._mem: LongTermMemory = LongTermMemory(
            self.store,
            ledger=ledger,
            threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
            near_duplicate=DEFAULT_NEAR_DUPLICATE if near_duplicate is None else near_duplicate,
        )
        self._closed = False

    @property
    def long_term(self) -> LongTermMemory:
        """The engine underneath (for what this face does not cover)."""
        return self._mem

    def remember(
        self,
        fact: str,
        *,
        actor: str,
        namespace: str | None = None,
        subject: str | None = None,
        source: Source | str = Source.user_stated,
        memory_type: MemoryType | str = MemoryType.semantic,
        owner: str | None = None,
        confidence: float = 1.0,
        at: datetime | None = None,
    ) -> Remembered:
        """Save ``fact`` for ``actor``; an exact or near duplicate refreshes the existing one.

        ``namespace`` defaults to ``/users/<actor>/facts`` (env ``MEMLIFE_NAMESPACE``).
        ``at`` (default now) must carry a time zone. Raises :class:`memlife.errors.InputError`
        (a ValueError) naming the argument for a blank fact, an unknown source or memory
        type, a namespace or time that is not one; nothing is stored then.
        """
        _need_actor(actor)
        res = self._mem.remember(
            actor,
            _default_namespace(actor) if namespace is None else namespace,
            subject,
            fact,
            source=source,
            memory_type=memory_type,
            owner=owner,
            confidence=confidence,
            at=at,
        )
        return Remembered(res.record_id, res.created, res.similarity)

    def recall(
        self,
        query: str,
        *,
        actor: str,
        k: int = 5,
        namespace: str | None = None,
        threshold: float | None = None,
    ) -> list[Recollection]:
        """``actor``'s ``k`` most relevant ACTIVE memories (all namespaces when None).

        ``namespace`` is one :meth:`remember` takes (a leading '/'), or one of ``actor``'s
        stored before that rule, spelled as stored (``notes``); another is an InputError.
        Superseded, quarantined and pending-delete memories are never returned; each hit
        is written to the access ledger (what the nightly scoring reads as recency).
        """
        _need_actor(actor)
        hits = self._mem.recall(actor, query, k=k, namespace=namespace, threshold=threshold)
        return [
            Recollection(
                id=h.record.id,
                content=h.record.content,
                score=h.score,
                similarity=h.similarity,
                rank=h.rank,
                namespace=h.record.namespace,
                subject=h.record.subject,
                record=h.record,
            )
            for h in hits
        ]

    def get(self, record_id: str, *, actor: str) -> MemoryRecord | None:
        """The record if it exists, belongs to ``actor``, is active and not expired; else None.
        An id no record can have (not text, over 256 characters) is an InputError."""
        rec = self._own_active(record_id, actor)
        if rec is None or self._mem.expired(rec):  # as recall: past its deadline, never served
            return None
        return rec

    def _own_active(self, record_id: str, actor: str) -> MemoryRecord | None:
        record_id_arg(record_id, "record_id")  # an id no record can have: refused, not looked up
        rec = self.store.get(record_id)
        if rec is None or rec.actor_id != actor or rec.status is not Status.active:
            return None
        return rec

    def forget(self, ids: str | Sequence[str], *, actor: str) -> list[str]:
        """Mark ``actor``'s memories ``pending_delete``: invisible to recall at once, deleted
        (with a receipt) by the next nightly run. Returns the ids changed; ids of another
        actor, unknown ids, inactive and held (legal_hold, retained) records are left alone
        and not returned."""
        _need_actor(actor)
        wanted = ids_arg(ids, "ids")
        # an expired record too: hidden from reads, but the user's forget still applies
        mine = [rid for rid in wanted if self._own_active(rid, actor) is not None]
        return self._mem.forget(mine, actor=actor) if mine else []

    @staticmethod
    def compact(
        messages: Sequence[Mapping[str, Any]],
        *,
        budget_tokens: int,
        keep_last_turns: int = 2,
        summarizer: Summarizer | None = None,
        counter: TokenCounter | None = None,
        summary_allowance: int | None = None,
        summarizer_input_tokens: int | None = None,
    ) -> CompactionResult:
        """Short-term compaction of a Messages API history (see :func:`memlife.compact`,
        whose keyword options this takes: None leaves compact's own default)."""
        from memlife.online.compaction import SUMMARIZER_INPUT_TOKENS, compact

        return compact(
            messages,
            budget_tokens=budget_tokens,
            keep_last_turns=keep_last_turns,
            summarizer=summarizer,
            counter=counter,
            summary_allowance=summary_allowance,
            summarizer_input_tokens=SUMMARIZER_INPUT_TOKENS
            if summarizer_input_tokens is None
            else summarizer_input_tokens,
        )

    def close(self) -> None:
        """Flush the access ledger; close the store if this object opened it."""
        if self._closed:
            return
        self._closed = True
        try:
            self._mem.close()
        finally:
            if self._owns_store:
                self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemory:
    """:class:`Memory` for asyncio code: the same methods, awaitable.

    Embedding and SQLite work run in a worker thread (``asyncio.to_thread``) so the event
    loop is never blocked; the engine underneath is thread-safe (one lock per store).
    """

    def __init__(self, store: str | MemoryStore | None = None, **options: Any) -> None:
        self.sync = Memory(store, **options)

    async def remember(self, fact: str, *, actor: str, **kw: Any) -> Remembered:
        return await asyncio.to_thread(self.sync.remember, fact, actor=actor, **kw)

    async def recall(self, query: str, *, actor: str, k: int = 5, **kw: Any) -> list[Recollection]:
        return await asyncio.to_thread(self.sync.recall, query, actor=actor, k=k, **kw)

    async def get(self, record_id: str, *, actor: str) -> MemoryRecord | None:
        return await asyncio.to_thread(self.sync.get, record_id, actor=actor)

    async def forget(self, ids: str | Sequence[str], *, actor: str) -> list[str]:
        return await asyncio.to_thread(self.sync.forget, ids, actor=actor)

    async def compact(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        budget_tokens: int,
        keep_last_turns: int = 2,
        summarizer: Summarizer | None = None,
        counter: TokenCounter | None = None,
        summary_allowance: int | None = None,
        summarizer_input_tokens: int | None = None,
    ) -> CompactionResult:
        """:meth:`Memory.compact`, in a worker thread (the summariser's call blocks)."""
        return await asyncio.to_thread(
            Memory.compact,
            messages,
            budget_tokens=budget_tokens,
            keep_last_turns=keep_last_turns,
            summarizer=summarizer,
            counter=counter,
            summary_allowance=summary_allowance,
            summarizer_input_tokens=summarizer_input_tokens,
        )

    async def aclose(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _need_actor(actor: str) -> None:
    if not isinstance(actor, str) or not actor.strip():
        raise InputError("actor is required (a non-empty string)")
