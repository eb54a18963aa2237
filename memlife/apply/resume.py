"""The retry queue: finish what earlier runs (or a crash of this one) left unfinished.

Every kind resumes through its registered applier, exactly as in the first pass. A
consolidation resumes as a unit (write before supersedes); other kinds in batches of at
most 100 per kind and shard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlife.apply.groups import resume_group
from memlife.apply.lifecycle import run_lifecycle
from memlife.apply.tally import Tally
from memlife.journal import Operation, OpKind
from memlife.stores.base import chunked

if TYPE_CHECKING:
    from memlife.apply.executor import Executor

GROUPED = (OpKind.write_replacement, OpKind.supersede)


def resume_due(ex: Executor, tally: Tally) -> int:
    due = ex.journal.due(ex.cutoff)
    order = {OpKind.write_replacement: 0, OpKind.supersede: 1}
    due.sort(key=lambda o: (order.get(o.kind, 2), o.created_at or ex.cutoff, o.operation_id))
    groups: dict[str | None, list[Operation]] = {}
    batches: dict[tuple[OpKind, str, str], list[Operation]] = {}
    for o in due:
        if o.kind in GROUPED:
            groups.setdefault(o.replacement_id or o.record_id, []).append(o)
        else:
            batches.setdefault((o.kind, o.actor_id, o.namespace), []).append(o)
    for (_kind, actor, ns), ops in sorted(batches.items()):
        for batch in chunked(ops, 100):
            if (actor, ns) in ex.stopped:
                break  # still queued: the next run retries it
            run_lifecycle(ex, batch, tally)
    for ops in groups.values():
        resume_group(ex, ops, tally)
    return len(due)
