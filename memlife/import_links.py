"""Links a file brings in: a record imported as superseded must point to an active record of
its own actor and namespace, in the store or in the same file (invariants 3 and 8).

It is imported as the file says (an import never changes a record silently) and reported
as a warning (REPLACEMENT_NOT_ACTIVE, REPLACEMENT_OUT_OF_SCOPE), checked once the whole
file is in, so a replacement further down the file counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlife.apply.appliers.base import get_many
from memlife.model import MemoryRecord, Status
from memlife.stores.base import MAX_BATCH, MemoryStore, chunked

if TYPE_CHECKING:
    from memlife.importer import ImportReport


def check_links(
    store: MemoryStore, superseded: list[tuple[int, str]], report: ImportReport
) -> None:
    """Warn for each (line, id) imported as superseded whose replacement is not an active
    record of its actor and namespace (batched reads: a remote store pays per call)."""
    for part in chunked(superseded, MAX_BATCH):
        records = get_many(store, [rid for _, rid in part])
        targets = get_many(
            store, sorted({r.provenance.replaced_by or "" for r in records.values()} - {""})
        )
        for n, rid in part:
            _check_link(n, records.get(rid), targets, report)


def _check_link(
    n: int, rec: MemoryRecord | None, targets: dict[str, MemoryRecord], report: ImportReport
) -> None:
    if rec is not None and rec.status is Status.superseded:
        target = targets.get(rec.provenance.replaced_by or "")
        if target is None or target.status is not Status.active:
            code = "REPLACEMENT_NOT_ACTIVE"
        elif (target.actor_id, target.namespace) != (rec.actor_id, rec.namespace):
            code = "REPLACEMENT_OUT_OF_SCOPE"
        else:
            return
        report.warnings.append(
            {"line": n, "id": rec.id, "field": "provenance.replaced_by", "code": code}
        )
