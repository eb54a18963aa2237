"""The executor: turns planned decisions into journaled, receipted changes. Crash-safe.

Every change runs the same lifecycle (journal/base.py): plan the operations (one
transaction), apply each idempotently, receipt it create-only, mark it RECEIPTED.
A rerun of the same run (same run key) resumes each operation from its journaled state;
a later run first drains the retry queue (`resume_due`). Order inside a consolidation:
the replacement is written and receipted before any original is superseded
(invariant 3). Deletions run only after the regression gate, per shard, in batches of
at most 100 (AgentCore's limit); a record already gone counts as done, not as failed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from memlife.audit import ReceiptSink, ReceiptWriteError
from memlife.consolidate.base import ConsolidationError, Consolidator, Group
from memlife.consolidate.replacement import build_replacement, replacement_id
from memlife.embed_cache import EmbeddingCache
from memlife.faults import checkpoint
from memlife.group import analyse_group
from memlife.journal import Journal, Operation, OpKind, OpState, Outcome, operation_id
from memlife.model import MemoryRecord, MemoryType, RetentionClass, Status, content_sha256
from memlife.plan import Action, Decision
from memlife.policy import Policy
from memlife.receipts import write_operation_receipt
from memlife.stores.base import ItemFailure, MemoryStore, StoreError, chunked

RETRY_BASE = timedelta(minutes=5)
RETRY_CAP = timedelta(hours=24)


def next_retry(attempts: int, now: datetime) -> datetime:
    """Exponential backoff with full jitter, capped at a day."""
    delay = min(RETRY_CAP, RETRY_BASE * (2 ** max(0, attempts - 1)))
    return now + delay * (0.5 + random.random() / 2)


@dataclass(frozen=True)
class DeleteItem:
    """What phase B needs to delete one record: ids and codes only, no content."""

    id: str
    actor_id: str
    namespace: str
    reasons: tuple[str, ...]
    content_sha256: str | None


@dataclass
class Tally:
    counts: Counter = field(default_factory=Counter)
    ids_not_deleted: list[dict] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    rejections: Counter = field(default_factory=Counter)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    stopped_shards: list[dict] = field(default_factory=list)

    def merge(self, other: Tally) -> None:
        self.counts.update(other.counts)
        self.ids_not_deleted += other.ids_not_deleted
        self.failures += other.failures
        self.rejections.update(other.rejections)
        self.model_calls += other.model_calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.stopped_shards += other.stopped_shards

    def as_json(self) -> dict:
        return {
            "counts": dict(self.counts),
            "ids_not_deleted": self.ids_not_deleted,
            "failures": self.failures,
            "rejections": dict(self.rejections),
            "model_calls": self.model_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "stopped_shards": self.stopped_shards,
        }


Result = Outcome | ItemFailure


class Executor:
    def __init__(
        self,
        *,
        run_id: str,
        run_key: str,
        policy: Policy,
        cutoff: datetime,
        store: MemoryStore,
        journal: Journal,
        sink: ReceiptSink,
        consolidator: Consolidator | None = None,
        dry_run: bool = False,
        embeddings: EmbeddingCache | None = None,
    ):
        self.run_id, self.run_key, self.policy, self.cutoff = run_id, run_key, policy, cutoff
        self.store, self.journal, self.sink = store, journal, sink
        self.consolidator = consolidator
        self.dry_run = dry_run
        self.embeddings = embeddings  # near-duplicate analysis; None: text rules only
        # Shards a StoreError (e.g. QUOTA_EXCEEDED) stopped: no further groups or deletes.
        self.stopped: set[tuple[str, str]] = set()

    # -- the lifecycle of operations ----------------------------------------------------------
    def new_op(self, kind: OpKind, d_actor: str, d_ns: str, record_id: str, reasons: Sequence[str],
            sha: str | None, replacement: str | None = None, payload: str | None = None,
            key_ids: Sequence[str] | None = None) -> Operation:  # fmt: skip
        return Operation(
            operation_id=operation_id(self.run_key, kind, key_ids or [record_id]),
            run_id=self.run_id, kind=kind, actor_id=d_actor, namespace=d_ns, record_id=record_id,
            reasons=list(reasons), policy_version=self.policy.version, content_sha256=sha,
            replacement_id=replacement, payload=payload,
        )  # fmt: skip

    def run_lifecycle(
        self, ops: list[Operation], apply: Callable[[list[Operation]], dict[str, Result]], tally: Tally
    ) -> list[Operation]:
        """PLANNED/FAILED -> apply -> APPLIED -> receipt -> RECEIPTED; resumes from any state."""
        todo = [o for o in ops if o.state in (OpState.PLANNED, OpState.FAILED)]
        if todo:
            try:
                results = apply(todo)
            except StoreError as exc:  # e.g. quota: the whole batch fails, the shard stops
                results = {o.operation_id: ItemFailure(o.record_id, exc.code) for o in todo}
                shard = (todo[0].actor_id, todo[0].namespace)
                if shard not in self.stopped:  # named once in the run receipt
                    self.stopped.add(shard)
                    tally.stopped_shards.append(
                        {"actor_id": shard[0], "namespace": shard[1], "code": exc.code}
                    )
            for o in todo:
                r = results[o.operation_id]
                if isinstance(r, ItemFailure):
                    retry_at = next_retry(o.attempts + 1, self.cutoff) if r.retryable else None
                    self.journal.transition(
                        o.operation_id, OpState.FAILED, outcome=Outcome.failed, error=r.code,
                        next_retry_at=retry_at,
                    )  # fmt: skip
                    tally.counts["failed"] += 1
                    tally.failures.append({
                        "operation_id": o.operation_id, "record_id": o.record_id,
                        "action": o.kind.value, "code": r.code, "retryable": r.retryable,
                        "next_retry_at": retry_at.isoformat() if retry_at else None,
                    })  # fmt: skip
                else:
                    self.journal.transition(o.operation_id, OpState.APPLIED, outcome=r)
                    tally.counts[_COUNT[r]] += 1
        done = []
        for o in ops:
            current = self.journal.get(o.operation_id)
            assert current is not None
            if current.state is OpState.APPLIED:
                current = self._receipt(current, tally)
            done.append(current)
        return done

    def _receipt(self, op: Operation, tally: Tally) -> Operation:
        checkpoint("before_receipt")
        try:
            write_operation_receipt(self.sink, op)  # False: already there from a crashed run
        except ReceiptWriteError as exc:
            tally.counts["receipt_failed"] += 1
            tally.failures.append({
                "operation_id": op.operation_id, "record_id": op.record_id,
                "action": op.kind.value, "code": "RECEIPT_WRITE_FAILED", "retryable": True,
                "detail": type(exc.__cause__).__name__ if exc.__cause__ else "error",
            })  # fmt: skip
            return op  # stays APPLIED: the retry queue writes the receipt later
        checkpoint("after_receipt")
        return self.journal.transition(op.operation_id, OpState.RECEIPTED)

    # -- appliers (idempotent) ------------------------------------------------------------------
    def apply_delete(self, ops: list[Operation]) -> dict[str, Result]:
        by_record = {o.record_id: o for o in ops}
        # Defence in depth: re-read holds right before deleting (a hold may be new).
        # One batched read (get_many where the store has it): a remote store pays per call.
        current = _get_many(self.store, list(by_record))
        held = {rid for rid in by_record if _is_held(current.get(rid))}
        ids = [rid for rid in by_record if rid not in held]
        out: dict[str, Result] = {
            by_record[rid].operation_id: ItemFailure(rid, "LEGAL_HOLD", retryable=False) for rid in held
        }
        if ids:
            res = self.store.delete_many(ids)
            checkpoint("after_delete")
            for rid in res.succeeded:
                out[by_record[rid].operation_id] = Outcome.deleted
            for rid in res.missing:
                # PLANNED by us and now gone: our earlier attempt (crash) or someone else.
                first = by_record[rid].attempts == 0 and by_record[rid].state is OpState.PLANNED
                out[by_record[rid].operation_id] = Outcome.deleted if first else Outcome.already_absent
            for f in res.failed:
                out[by_record[f.id].operation_id] = f
        return out

    def _apply_write(self, ops: list[Operation]) -> dict[str, Result]:
        out: dict[str, Result] = {}
        for o in ops:
            if not o.payload or '"content"' not in o.payload:
                out[o.operation_id] = ItemFailure(o.record_id, "NO_PAYLOAD", retryable=False)
                continue
            record = MemoryRecord.model_validate_json(o.payload)
            res = self.store.put_many([record])
            checkpoint("after_replacement_write")
            out[o.operation_id] = res.failed[0] if res.failed else Outcome.written
        return out

    def apply_status(self, status: Status, outcome: Outcome, point: str):
        def apply(ops: list[Operation]) -> dict[str, Result]:
            # Batched: one read of the records (and replacements), one set_status per
            # replacement. A remote store (AgentCore) pays per call, not per record.
            out: dict[str, Result] = {}
            wanted = [o.record_id for o in ops]
            if status is Status.superseded:
                wanted += [o.replacement_id for o in ops if o.replacement_id]
            found = _get_many(self.store, list(dict.fromkeys(wanted)))
            ready: dict[str | None, list[Operation]] = {}
            for o in ops:
                current = found.get(o.record_id)
                if current is None:
                    out[o.operation_id] = ItemFailure(o.record_id, "RECORD_MISSING", retryable=False)
                    continue
                if _is_held(current):
                    out[o.operation_id] = ItemFailure(o.record_id, "LEGAL_HOLD", retryable=False)
                    continue
                if status is Status.superseded:
                    repl = found.get(o.replacement_id or "")
                    if repl is None or repl.status is not Status.active:
                        out[o.operation_id] = ItemFailure(o.record_id, "REPLACEMENT_MISSING")
                        continue
                ready.setdefault(o.replacement_id, []).append(o)
            for replacement, group in ready.items():
                res = self.store.set_status(
                    [o.record_id for o in group], status, replaced_by=replacement,
                    policy_version=self.policy.version, at=self.cutoff,
                )  # fmt: skip
                checkpoint(point)
                failed = {f.id: f for f in res.failed}
                for o in group:
                    out[o.operation_id] = failed.get(o.record_id, outcome)
            return out

        return apply

    # -- phase A: consolidation and supersede, one shard at a time ---------------------------------
    def consolidate_shard(self, decisions: Sequence[Decision], tally: Tally) -> None:
        groups: dict[str, list[Decision]] = {}
        for d in decisions:
            if d.action in (Action.supersede_candidate, Action.consolidate_candidate) and d.group:
                groups.setdefault(d.group, []).append(d)
        for key, members in sorted(groups.items()):
            if len(members) < 2:
                continue
            if (members[0].actor_id, members[0].namespace) in self.stopped:
                return  # the shard stopped (StoreError): the rest waits for the next run
            if self.consolidator is None:  # consolidation off: nothing to read or analyse
                tally.counts["consolidation_skipped"] += 1
                continue
            self._consolidate_group(key, members, tally)

    def _consolidate_group(self, key: str, members: list[Decision], tally: Tally) -> None:
        records = [r for r in _get_many(self.store, [d.id for d in members]).values()
                   if r.status is Status.active and not _is_held(r)]  # fmt: skip
        if len(records) < 2:
            return
        records.sort(key=lambda r: (r.created_at, r.id))
        survivor = next((d.survivor for d in members if d.survivor), None)
        if survivor is not None and survivor not in {r.id for r in records}:
            survivor = None
        group = Group(
            key=key, actor_id=records[0].actor_id, namespace=records[0].namespace,
            subject=records[0].subject or "", records=records, survivor_id=survivor,
            superseded_ids=[d.id for d in members if d.action is Action.supersede_candidate],
        )  # fmt: skip
        # Which members are the same statement (merge) and which are contradicted (supersede)?
        # Embeddings find paraphrases; polarity and time rules keep a negation apart (group.py).
        vectors = None
        if self.embeddings is not None:
            misses = self.embeddings.stats.misses
            vectors = self.embeddings.get_or_embed(records)
            tally.counts["embedded"] += self.embeddings.stats.misses - misses
        analysis = analyse_group(group, vectors, grouping=self.policy.grouping,
                                 weights=self.policy.source_weights)  # fmt: skip
        roles = {analysis.survivor_id: "SURVIVOR"}
        roles |= {i: "NEAR_DUPLICATE" for i in analysis.duplicates}
        roles |= {i: "EXACT_DUPLICATE" for i in analysis.exact_duplicates}
        if records[0].memory_type is not MemoryType.episodic:  # distinct events never contradict
            roles |= {i: "CONTRADICTION" for i in analysis.contradicted}
        records = [r for r in records if r.id in roles]
        if len(records) < 2:
            tally.counts["conflicting_left_for_review"] += len(analysis.conflicting)
            return
        group = replace(group, records=records, survivor_id=analysis.survivor_id,
                        superseded_ids=[i for i in analysis.contradicted if i in roles])  # fmt: skip
        if self.consolidator is None:
            tally.counts["consolidation_skipped"] += 1
            return
        # The model sees at most max_group_size records (the survivor and the newest others),
        # so a call stays small; older duplicates and contradicted statements beyond the cap
        # are superseded by the same replacement: the rules above already classed them.
        cap = self.policy.grouping.max_group_size
        if len(records) > cap:
            others = [r for r in records if r.id != analysis.survivor_id][-(cap - 1):]
            sent = sorted([*others, *(r for r in records if r.id == analysis.survivor_id)],
                          key=lambda r: (r.created_at, r.id))  # fmt: skip
            ids = {r.id for r in sent}
            model_group = replace(group, records=sent,
                                  superseded_ids=[i for i in group.superseded_ids if i in ids])  # fmt: skip
            tally.counts["over_cap_superseded_by_rule"] += len(records) - len(sent)
        else:
            model_group = group
        try:
            result = self.consolidator.consolidate(model_group)
        except ConsolidationError as exc:
            tally.rejections[exc.code] += 1
            tally.counts["consolidation_rejected"] += 1
            if exc.retryable:
                tally.model_calls += 1
            return  # originals untouched; the group is planned again next run
        if result.model:
            tally.model_calls += 1
            tally.input_tokens += result.input_tokens
            tally.output_tokens += result.output_tokens
        tally.counts["merged_duplicates"] += sum(1 for r in roles.values() if r.endswith("DUPLICATE"))
        tally.counts["contradictions_resolved"] += sum(1 for r in roles.values() if r == "CONTRADICTION")
        if self.dry_run:
            tally.counts["consolidation_proposed"] += 1
            return
        replacement = build_replacement(group, result, self.cutoff, self.policy.version)
        write = self.new_op(
            OpKind.write_replacement, group.actor_id, group.namespace, replacement.id,
            ["CONSOLIDATION", *(c for c in sorted({r.value for d in members for r in d.reasons}))],
            content_sha256(replacement.content), payload=replacement.to_json(),
            key_ids=[replacement_id(group)],
        )  # fmt: skip
        supersedes = [
            self.new_op(OpKind.supersede, r.actor_id, r.namespace, r.id, ["SAME_SUBJECT", roles[r.id]],
                        r.sha256, replacement=replacement.id)  # fmt: skip
            for r in records
        ]
        planned = self.journal.plan([write, *supersedes])  # one transaction: resumable as a unit
        checkpoint("after_journal_write")
        self._resume_group(planned, tally)

    def _resume_group(self, planned: list[Operation], tally: Tally) -> None:
        write = [o for o in planned if o.kind is OpKind.write_replacement]
        rest = [o for o in planned if o.kind is OpKind.supersede]
        done = self.run_lifecycle(write, self._apply_write, tally)
        if any(o.state is not OpState.RECEIPTED and o.state is not OpState.APPLIED for o in done):
            return  # replacement not durable: never supersede without it
        self.run_lifecycle(
            rest, self.apply_status(Status.superseded, Outcome.superseded, "after_supersede"), tally
        )

    # -- phase B: deletions after the gate, and quarantine when it fails -----------------------
    def delete(self, items: Sequence[DeleteItem], tally: Tally) -> None:
        for shard_items in _by_shard(items):
            for n, batch in enumerate(chunked(shard_items, 100)):
                if (batch[0].actor_id, batch[0].namespace) in self.stopped:
                    # a StoreError stopped this shard: the rest is planned again next run
                    tally.ids_not_deleted += [{"id": i.id, "reason": "SHARD_STOPPED"}
                                              for i in shard_items[n * 100 :]]  # fmt: skip
                    break
                ops = [self.new_op(OpKind.delete, i.actor_id, i.namespace, i.id, i.reasons,
                                i.content_sha256) for i in batch]  # fmt: skip
                planned = self.journal.plan(ops)
                checkpoint("after_journal_write")
                done = self.run_lifecycle(planned, self.apply_delete, tally)
                for o in done:
                    if o.outcome is Outcome.failed:
                        tally.ids_not_deleted.append({"id": o.record_id, "reason": o.last_error})

    def quarantine(self, items: Sequence[DeleteItem], tally: Tally, reason: str) -> None:
        for shard_items in _by_shard(items):
            ops = [self.new_op(OpKind.quarantine, i.actor_id, i.namespace, i.id, [*i.reasons, reason],
                            i.content_sha256) for i in shard_items]  # fmt: skip
            planned = self.journal.plan(ops)
            checkpoint("after_journal_write")
            self.run_lifecycle(
                planned, self.apply_status(Status.quarantined, Outcome.quarantined, "after_supersede"),
                tally,
            )  # fmt: skip
            tally.ids_not_deleted += [{"id": i.id, "reason": reason} for i in shard_items]

    # -- the retry queue ------------------------------------------------------------------------
    def resume_due(self, tally: Tally) -> int:
        """Finish what earlier runs (or a crash of this one) left: FAILED past due, PLANNED, APPLIED."""
        due = self.journal.due(self.cutoff)
        order = {OpKind.write_replacement: 0, OpKind.supersede: 1}
        due.sort(key=lambda o: (order.get(o.kind, 2), o.created_at or self.cutoff, o.operation_id))
        groups: dict[str | None, list[Operation]] = {}
        deletes: dict[tuple[str, str], list[Operation]] = {}
        for o in due:
            if o.kind in (OpKind.write_replacement, OpKind.supersede):
                groups.setdefault(o.replacement_id or o.record_id, []).append(o)
            elif o.kind is OpKind.delete:
                deletes.setdefault((o.actor_id, o.namespace), []).append(o)
            elif o.kind is OpKind.quarantine:
                self.run_lifecycle(
                    [o], self.apply_status(Status.quarantined, Outcome.quarantined, "after_supersede"),
                    tally,
                )  # fmt: skip
            elif o.kind is OpKind.restore:
                self.run_lifecycle(
                    [o], self.apply_status(Status.active, Outcome.restored, "after_supersede"), tally
                )
        for shard, ops in sorted(deletes.items()):  # batches of <= 100 per shard, like delete()
            for batch in chunked(ops, 100):
                if shard in self.stopped:
                    break  # still queued: the next run retries it
                self.run_lifecycle(batch, self.apply_delete, tally)
        for ops in groups.values():
            self._resume_group(ops, tally)
        return len(due)


_COUNT = {
    Outcome.deleted: "deleted",
    Outcome.already_absent: "already_absent",
    Outcome.written: "consolidated",
    Outcome.superseded: "superseded",
    Outcome.quarantined: "quarantined",
    Outcome.restored: "restored",
    Outcome.skipped: "skipped",
    Outcome.updated: "updated",
}


def _is_held(record: MemoryRecord | None) -> bool:
    return record is not None and (
        record.retention_class is RetentionClass.legal_hold or record.status is Status.retained
    )


def _get_many(store: MemoryStore, ids: Sequence[str]) -> dict[str, MemoryRecord]:
    many = getattr(store, "get_many", None)
    if many is not None:
        return many(ids)
    out = {}
    for rid in ids:
        r = store.get(rid)
        if r is not None:
            out[rid] = r
    return out


def _by_shard(items: Sequence[DeleteItem]) -> list[list[DeleteItem]]:
    shards: dict[tuple[str, str], list[DeleteItem]] = {}
    for i in items:
        shards.setdefault((i.actor_id, i.namespace), []).append(i)
    return [shards[k] for k in sorted(shards)]
