"""The retry queue: finish what earlier runs (or a crash of this one) left unfinished.

Every kind resumes through its registered applier, exactly as in the first pass. The
queue is read page by page to its end (no LIMIT starves an operation behind a long
backlog). A consolidation resumes as a unit (write before supersedes), so a page that
holds part of a group fetches the rest; other kinds go in batches of at most 100 per
kind and shard. Terminal failures are not due: they wait for an operator.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from memlife.apply.group_resume import resume_group
from memlife.apply.lifecycle import retryable, run_lifecycle
from memlife.apply.tally import Tally
from memlife.journal import Operation, OpKind, OpState
from memlife.stores.base import MAX_BATCH, chunked

if TYPE_CHECKING:
    from memlife.apply.executor import Executor

GROUPED = (OpKind.write_replacement, OpKind.supersede)
PAGE = 1000


def resume_due(ex: Executor, tally: Tally, kinds: Collection[OpKind] | None = None) -> int:
    """Drain the queue (only ``kinds`` when given); returns how many operations were due."""
    seen: set[str] = set()
    for page in ex.journal.due_pages(ex.cutoff, PAGE):
        todo = [
            o for o in page if o.operation_id not in seen and (kinds is None or o.kind in kinds)
        ]
        groups: dict[tuple[str, str], list[Operation]] = {}
        batches: dict[tuple[str, str, str], list[Operation]] = {}
        for o in todo:
            if o.kind in GROUPED:
                key = (o.run_id, o.replacement_id or o.record_id)
                if key not in groups:
                    groups[key] = _whole_group(ex, key)
            else:
                batches.setdefault((o.kind.value, o.actor_id, o.namespace), []).append(o)
        seen.update(o.operation_id for o in todo)
        seen.update(o.operation_id for ops in groups.values() for o in ops)
        for (_kind, actor, ns), ops in sorted(batches.items()):
            for batch in chunked(ops, MAX_BATCH):
                if (actor, ns) in ex.stopped:
                    break  # still queued: the next run retries it
                run_lifecycle(ex, batch, tally)
        for ops in groups.values():
            resume_group(ex, ops, tally)
    return len(seen)


def _due(o: Operation, ex: Executor) -> bool:
    return retryable(o) and o.next_retry_at is not None and o.next_retry_at <= ex.cutoff


def _whole_group(ex: Executor, key: tuple[str, str]) -> list[Operation]:
    """The group's unfinished write and supersedes, wherever their pages are."""
    run_id, replacement = key
    ops = [
        o
        for o in ex.journal.for_record(replacement)
        if o.run_id == run_id
        and o.kind in GROUPED
        and (o.state in (OpState.PLANNED, OpState.APPLIED) or _due(o, ex))
    ]
    order = {OpKind.write_replacement: 0, OpKind.supersede: 1}
    return sorted(ops, key=lambda o: (order[o.kind], o.operation_id))
