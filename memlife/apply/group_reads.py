"""What staging a group reads: its members, their statement vectors, the records the model
sees. ``Reads`` reads one group; ``GroupReads`` answers a shard's groups a batch at a time
(apply/groups.py stages with either; the same records, members and vectors come back).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from memlife.apply.appliers.base import get_many, is_held
from memlife.apply.tally import Tally
from memlife.group_plan import Member
from memlife.model import MemoryRecord, Status
from memlife.stores.base import chunked

if TYPE_CHECKING:
    from memlife.apply.executor import Executor

READ_CHUNK = 1000  # records read at a time while a group is planned: memory stays flat
# statement keys -> their L2-normalised embedding rows (group_plan.cluster_statements)
Vectors = Callable[[Sequence[str]], np.ndarray]


def read_members(ex: Executor, ids: Sequence[str]) -> list[Member]:
    """The group's active, unheld records as Members, read a chunk at a time (no content kept)."""
    out: list[Member] = []
    for chunk in chunked(ids, READ_CHUNK):
        for r in get_many(ex.store, chunk).values():
            if r.status is Status.active and not is_held(r):
                out.append(Member.of(r))
    return out


def statement_vectors(ex: Executor, members: Sequence[Member], tally: Tally) -> Vectors | None:
    """``vectors(statement keys)`` for group_plan: one record per statement is read and
    embedded (cache first), only when asked and a chunk at a time. None: text rules only."""
    if ex.embeddings is None:
        return None
    first = statement_records(members)
    cache = ex.embeddings

    def vectors(keys: Sequence[str]) -> np.ndarray:
        ids = [first[k] for k in keys]
        found = get_many(ex.store, ids)
        misses = cache.stats.misses
        out = cache.get_or_embed([found[i] for i in ids])
        tally.counts["embedded"] += cache.stats.misses - misses
        return out

    return vectors


class Reads:
    """What staging one group reads: its members, their statement vectors, the records the
    model sees. This one reads per group; GroupReads answers a batch of groups at once."""

    def __init__(self, ex: Executor, ids: Sequence[str], tally: Tally) -> None:
        self.ex, self.ids, self.tally = ex, ids, tally
        self._members: list[Member] | None = None

    def members(self) -> list[Member]:
        if self._members is None:  # read once: asked again by the stage cache
            self._members = read_members(self.ex, self.ids)
        return self._members

    def vectors(self, found: Sequence[Member]) -> Vectors | None:
        return statement_vectors(self.ex, found, self.tally)

    def records(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        return get_many(self.ex.store, ids)


class _Batched(Reads):
    def __init__(self, batch: GroupReads, i: int) -> None:
        super().__init__(batch.ex, batch.groups[i], batch.tally)
        self.batch, self.i = batch, i

    def members(self) -> list[Member]:
        return self.batch.members[self.i]

    def vectors(self, found: Sequence[Member]) -> Vectors | None:
        if self.ex.embeddings is None:
            return None
        first = statement_records(found)
        rows = self.batch.vectors
        return lambda keys: np.stack([rows[first[k]] for k in keys])

    def records(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        got = self.batch.records
        return {i: got[i] for i in ids if i in got}


class GroupReads:
    """A shard's groups read a batch at a time: one query per ~READ_CHUNK records (not three
    reads per group) and one cache lookup per batch for their statement vectors. A group
    larger than READ_CHUNK is read on its own, a chunk at a time (Reads): memory stays
    flat. Same records, members and vectors as per group (tests/e2e/test_dry_run_fast_paths)."""

    def __init__(
        self,
        ex: Executor,
        groups: Sequence[Sequence[str]],
        tally: Tally,
        read: Mapping[str, MemoryRecord] | None = None,
    ) -> None:
        self.ex, self.groups, self.tally = ex, groups, tally
        self.read = read or {}  # records read moments ago (subject inference): not re-read
        self.records: dict[str, MemoryRecord] = {}
        self.members: dict[int, list[Member]] = {}
        self.vectors: dict[str, np.ndarray] = {}
        self.loaded_to = 0  # groups before this index were (or are) in a batch

    def group(self, i: int) -> Reads:
        if len(self.groups[i]) > READ_CHUNK:
            return Reads(self.ex, self.groups[i], self.tally)
        if i >= self.loaded_to:
            self._load(i)
        return _Batched(self, i)

    def _load(self, start: int) -> None:
        stop, total = start, 0
        while stop < len(self.groups) and len(self.groups[stop]) <= READ_CHUNK:
            if total and total + len(self.groups[stop]) > READ_CHUNK:
                break
            total += len(self.groups[stop])
            stop += 1
        ids = [rid for g in self.groups[start:stop] for rid in g]
        known = self.read
        got = get_many(self.ex.store, [rid for rid in ids if rid not in known])
        got.update((rid, known[rid]) for rid in ids if rid in known)
        self.records, self.members, self.vectors = got, {}, {}
        self.loaded_to = stop
        wanted: dict[str, MemoryRecord] = {}  # statement records of groups that get planned
        cache = self.ex.embeddings  # None: text rules only, no vectors
        for i in range(start, stop):
            recs = [got[rid] for rid in self.groups[i] if rid in got]
            found = [Member.of(r) for r in recs if r.status is Status.active and not is_held(r)]
            self.members[i] = found
            if len(found) >= 2 and cache is not None:
                wanted.update((rid, got[rid]) for rid in statement_records(found).values())
        if wanted and cache is not None:
            misses = cache.stats.misses
            rows = cache.get_or_embed(list(wanted.values()))
            self.tally.counts["embedded"] += cache.stats.misses - misses
            self.vectors = dict(zip(wanted, rows, strict=True))


def statement_records(members: Sequence[Member]) -> dict[str, str]:
    """Statement key -> the record whose text stands for it (its smallest id: the same one
    whichever order a store returns the members in)."""
    first: dict[str, str] = {}
    for m in sorted(members, key=lambda m: m.id):
        first.setdefault(m.statement, m.id)
    return first
