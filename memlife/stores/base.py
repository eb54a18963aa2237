"""The MemoryStore protocol: what the pipeline and the online library need from a store.

One file per backend (sqlite.py, agentcore.py), each one idea. Batch writes report
per-item outcomes (``BatchResult``): partial failure is data, not an exception, because
that is how AgentCore behaves and the pipeline must journal each item's fate.
Paging is per actor + namespace, keyset-ordered by record id, with an opaque token, so a
record inserted or deleted between pages is never skipped or served twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, TypeVar, runtime_checkable

from memlife.errors import BadPageToken as BadPageToken  # moved; re-exported
from memlife.errors import StoreError as StoreError  # moved; re-exported
from memlife.model import MemoryRecord, Status

DEFAULT_PAGE_SIZE = 500
MAX_BATCH = 100  # AgentCore's batch limit; SQLite accepts more but callers chunk alike


@dataclass(frozen=True)
class ItemFailure:
    id: str
    code: str  # e.g. THROTTLED, VALIDATION, NOT_FOUND, CONFLICT
    message: str = ""
    retryable: bool = True


@dataclass
class BatchResult:
    succeeded: list[str] = field(default_factory=list)
    failed: list[ItemFailure] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # already absent (deletes): done, not failed

    def extend(self, other: BatchResult) -> None:
        self.succeeded += other.succeeded
        self.failed += other.failed
        self.missing += other.missing


@dataclass(frozen=True)
class Page:
    records: list[MemoryRecord]
    next_token: str | None  # None: the shard is exhausted


@runtime_checkable
class MemoryStore(Protocol):
    url: str

    def list_actors(self) -> Iterator[str]: ...

    def list_namespaces(self, actor_id: str) -> list[str]: ...

    def page(
        self,
        actor_id: str,
        namespace: str,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        token: str | None = None,
        statuses: Sequence[Status] | None = None,
    ) -> Page: ...

    def get(self, record_id: str) -> MemoryRecord | None: ...

    def put_many(self, records: Sequence[MemoryRecord]) -> BatchResult:
        """Upsert by id."""
        ...

    def set_status(
        self,
        ids: Sequence[str],
        status: Status,
        *,
        replaced_by: str | None = None,
        policy_version: str | None = None,
        at: datetime | None = None,
    ) -> BatchResult: ...

    def delete_many(self, ids: Sequence[str]) -> BatchResult:
        """Delete by id; an id already absent is reported in ``missing``."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class ChangeSignal(Protocol):
    """Optional store capability: say cheaply whether anyone wrote since we last looked.

    Online recall keeps an in-memory index per actor + namespace; a store with this
    signal lets it re-check only when something changed (others: a refresh interval).
    """

    def change_marker(self) -> object:
        """A value that changes whenever anything (any process) writes to the store."""
        ...

    def shard_fingerprint(self, actor_id: str, namespace: str) -> tuple[float, ...]:
        """Moves whenever the shard's active set or content changes (one indexed query)."""
        ...

    def record_fingerprint(self, record_id: str) -> tuple[float, ...] | None:
        """One record's share of a shard fingerprint (added elementwise); None if absent."""
        ...


def iter_shard(
    store: MemoryStore,
    actor_id: str,
    namespace: str,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    statuses: Sequence[Status] | None = None,
) -> Iterator[Page]:
    """Every page of one actor/namespace, in order, each record once.

    A remote store's pages are the service's: AgentCore promises no keyset order, so a
    record listed again on a later page is left out (planned twice, a night crashed after
    deleting it), and a page token handed out before is refused (it paged for ever).
    The ids of the shard are kept, as a night's planning keeps its views (audit 53ii)."""
    token: str | None = None
    seen: set[str] = set()
    tokens: set[str] = set()
    while True:
        page = store.page(actor_id, namespace, page_size=page_size, token=token, statuses=statuses)
        fresh: dict[str, MemoryRecord] = {}
        for r in page.records:
            if r.id not in seen:
                fresh.setdefault(r.id, r)
        seen.update(fresh)
        yield page if len(fresh) == len(page.records) else Page([*fresh.values()], page.next_token)
        if page.next_token is None:
            return
        if page.next_token in tokens:
            raise StoreError(
                "paging a shard: the store handed back a page token it gave before; paging "
                "on would repeat the same pages",
                code="SERVICE",
            )
        token = page.next_token
        tokens.add(token)


T = TypeVar("T")


def chunked(items: Iterable[T], size: int = MAX_BATCH) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
