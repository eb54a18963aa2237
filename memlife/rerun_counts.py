"""A rerun's counts: what the killed attempt already did is counted once, not re-planned.

A rerun after a crash plans the store as the killed attempt left it: the originals it
superseded are read again (and planned, usually ``retain``), the replacements it wrote are
read as new records, and the records it deleted are gone. Counted as they are, a rerun's
receipt said ``processed 2275`` for a 2,000-record night and its outcomes summed to 3,097.
Here the records an earlier attempt of this run changed or wrote are taken out of this
attempt's planned counts (their outcomes come from the journal, over every attempt), and
``processed`` is what the first attempt read: this attempt's reads, less the replacements
the run wrote, plus the records it removed. A clean run's figures, whatever the crash.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memlife.journal import Operation, OpKind, OpState, Outcome
from memlife.plan import Action, Reason

_DONE = (OpState.APPLIED, OpState.RECEIPTED)
_REMOVED = (Outcome.deleted, Outcome.already_absent)
_CHANGES = (OpKind.supersede, OpKind.quarantine)
# planned actions that change the record: this attempt planned (and made) the change itself
_PLANS_A_CHANGE = {a.value for a in Action} - {Action.retain, Action.hold, Action.review}


@dataclass
class CarriedOver:
    """This attempt's planned records that an earlier attempt of the run already handled."""

    actions: Counter[str] = field(default_factory=Counter)  # their planned actions now
    replacements: int = 0  # replacements the run wrote, read again by this attempt
    removed: int = 0  # records the run removed before this attempt read the store
    removed_actions: Counter[str] = field(default_factory=Counter)  # as they were planned
    # originals the run superseded or quarantined, as the first attempt planned them (audit
    # 49vii: taken out of ``actions`` and put back nowhere, `planned` fell short of the total)
    changed_actions: Counter[str] = field(default_factory=Counter)

    def adjust(self, counts: Counter[str], records: int) -> int:
        """Take them out of ``counts`` (in place), the removed and changed ones back in as
        planned: ``records`` and ``counts`` as the first attempt read and planned them."""
        counts.subtract(self.actions)
        counts.update(self.removed_actions)
        counts.update(self.changed_actions)
        return records - self.replacements + self.removed


def carried_over(ops: Sequence[Operation], report: Path) -> CarriedOver:
    """From the run's journal (every attempt) and this attempt's report (id, action).

    Done before this attempt read the store: a replacement the run wrote that this attempt
    read (it is in the report); an original the run superseded or quarantined that this
    attempt planned no change for (an operation only planned by the killed attempt is
    planned again now, and applied by this one); a deletion whose record this attempt
    never read."""
    done = [o for o in ops if o.state in _DONE]
    out = CarriedOver()
    if not done or not report.exists():
        return out
    written = {o.record_id for o in done if o.kind is OpKind.write_replacement}
    changes = {o.record_id: o for o in done if o.kind in _CHANGES}
    changed = set(changes)
    removed = {o.record_id for o in done if o.outcome in _REMOVED}
    table = pq.read_table(report, columns=["id", "action"])
    wanted = pa.array(sorted(written | changed | removed), pa.string())
    mine = table.filter(pc.is_in(table.column("id"), value_set=wanted))
    seen: set[str] = set()
    for rid, action in zip(
        mine.column("id").to_pylist(), mine.column("action").to_pylist(), strict=True
    ):
        seen.add(rid)
        if rid in written or (rid in changed and action not in _PLANS_A_CHANGE):
            out.actions[action] += 1
            out.replacements += rid in written
            if rid not in written:
                out.changed_actions[first_plan(changes[rid])] += 1
    # a replacement this run wrote and took back is no record the store held (audit 47k)
    gone = removed - seen - written
    out.removed = len(gone)
    for o in done:  # each once (a record has one removal), planned as the first attempt did
        if o.record_id in gone and o.outcome in _REMOVED:
            gone.discard(o.record_id)
            out.removed_actions[first_plan(o)] += 1
    return out


def first_plan(o: Operation) -> Action:
    """The action the first attempt planned for the record ``o`` changed or removed, from the
    operation's reasons: a group member's supersede names its role (a CONTRADICTION is an
    older statement a newer one supersedes, any other role a merge); a quarantine holds
    back a deletion, as a delete is one (GRACE_ELAPSED: a pending record's)."""
    if o.kind is OpKind.supersede:
        contradicted = Reason.CONTRADICTION in o.reasons
        return Action.supersede_candidate if contradicted else Action.consolidate_candidate
    return Action.delete_pending if Reason.GRACE_ELAPSED in o.reasons else Action.delete_expired
