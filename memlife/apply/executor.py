"""The executor: what one run applies with (store, journal, sink, policy, cutoff) and its
entry points. The work itself lives beside it: lifecycle.py (the state machine),
appliers/ (one per operation kind), groups.py (phase A), deletions.py (phase B),
resume.py (the retry queue)."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from memlife.apply import deletions, groups, memo, resume, unavailable
from memlife.apply.deletions import DeleteItem
from memlife.apply.groups import StagedGroup, StagedRef
from memlife.apply.lifecycle import run_lifecycle
from memlife.apply.registry import Result
from memlife.apply.tally import Tally
from memlife.audit import ReceiptSink
from memlife.consolidate.base import Consolidator, Group
from memlife.embed_cache import EmbeddingCache
from memlife.journal import (
    Journal,
    MemoOutcome,
    Mover,
    Operation,
    OpKind,
    operation_id,
    read_run_secret,
)
from memlife.lease import fence_for
from memlife.model import MemoryRecord, PlanView
from memlife.plan import Decision
from memlife.policy import Policy
from memlife.stores.base import MemoryStore

if TYPE_CHECKING:  # the queue's package imports the appliers: a type only
    from memlife.review_queue.base import ReviewBackend


class Executor:
    def __init__(
        self,
        *,
        run_id: str,
        run_key: str,
        policy: Policy,
        cutoff: datetime,
        store: MemoryStore,
        journal: Journal | None,
        sink: ReceiptSink,
        consolidator: Consolidator | None = None,
        dry_run: bool = False,
        embeddings: EmbeddingCache | None = None,
        erase_cache: EmbeddingCache | None = None,
        evaluated: bool = True,
        memo_reader: Callable[[Sequence[str]], dict[str, MemoOutcome]] | None = None,
        memo_as: str | None = None,
        eval_digest: str | None = None,
        after_receipts: int = 0,
    ):
        self.run_id, self.run_key, self.policy, self.cutoff = run_id, run_key, policy, cutoff
        # who this attempt's transitions name (journal.base.Mover): the run, and how many of
        # its own receipts existed when this attempt began (a rerun after a seal: > 0)
        self.mover = Mover(run_id, after_receipts)
        self.policy_fingerprint = policy.fingerprint()  # once a run: the memo keys use it
        if journal is None and not dry_run:
            raise ValueError("an apply run needs a journal (only a dry run keeps none)")
        self.store, self._journal, self.sink = store, journal, sink
        self.consolidator = consolidator
        self.dry_run = dry_run
        self.embeddings = embeddings  # near-duplicate analysis; None: text rules only
        self.erase_cache = erase_cache  # the cache erasure cleans; None: the store's own
        # called before each batch of changes: raises when this writer lost its lease
        self.fence: Callable[[], None] | None = None if dry_run else fence_for(store)
        # Shards a StoreError (e.g. QUOTA_EXCEEDED) stopped: no further groups or deletes.
        self.stopped: set[tuple[str, str]] = set()
        # replacements whose supersedes are all still to do (group_resume.py), and those
        # whose group a source moved at the supersedes' write withdrew (appliers/status.py)
        self.withdrawable: set[str] = set()
        self.withdrawn: set[str] = set()
        # groups the model failed retryably this batch (memlife/apply/unavailable.py)
        self.unavailable: list[tuple[Group, str, str | None]] = []
        self.unavailable_lock = threading.Lock()  # batches run in threads (max_workers)
        self.answers_seen = 0  # the consolidator's answers at the last batch's end
        # held, superseded ids per shard, paged once a run where the store has no index
        # for them (memlife/pinned.py held_superseded)
        self.held_paged: dict[tuple[str, str], list[str]] = {}
        # False: an apply run without an evaluation set (groups.withheld_by_gate)
        self.evaluated = evaluated
        # a dry run reads (never writes) the consolidation memo, keyed as an apply run would
        # key it (memo_as: the apply run's consolidator), so its estimate skips settled groups
        self.memo_reader = memo_reader
        self.memo_as = memo_as
        # the run's evaluation set (evalset.cases_digest): a gate block is memoised under it
        self.eval_digest = eval_digest
        self.reviewer: str | None = None  # a person's decision (review resolve): in receipts
        self._removal_cache: EmbeddingCache | None = None
        self._evidence_secret: bytes | None = None
        self._replacement_secret: bytes | None = None  # a dry run's (replacement_secret)
        self._review_backend: ReviewBackend | None = (
            None  # the store's review queue (review_backend)
        )

    def review_backend(self) -> ReviewBackend:
        """The store's review queue, opened once a run (a delete batch reads its disputes:
        appliers/delete.py); off SQLite that is a file under the home, schema and all."""
        if self._review_backend is None:
            # the module, not the package: the package's resolve runs the appliers (a circle)
            from memlife.review_queue.queue import open_backend

            self._review_backend = open_backend(self.store)
        return self._review_backend

    def evidence_secret(self) -> bytes:
        """The store's run secret, read once a run: the key of the content hashes its
        receipts carry (memlife/evidence_key.py)."""
        if self._evidence_secret is None:
            self._evidence_secret = self.journal.run_secret()
        return self._evidence_secret

    def replacement_secret(self) -> bytes:
        """The key of a replacement's id (group_plan.consolidation_key): the store's run
        secret, so a dry run names the ids the apply run will write. A dry run reads it and
        never creates it (it writes nothing): where none exists yet, a random key of its own,
        kept for this run only. Its ids then differ from the first apply run's (which makes
        the secret), but never commit to the members' texts: a dry run's gate names them."""
        if not self.dry_run:
            return self.evidence_secret()
        if self._replacement_secret is None:
            self._replacement_secret = read_run_secret(self.store) or secrets.token_bytes(32)
        return self._replacement_secret

    def removal_cache(self) -> EmbeddingCache:
        """The cache a removed record's content leaves (opened once a run): the one erasure
        names, else the run's own, else the store's. The dry runs' file on this machine is
        cleaned beside it (embed_cache.dry_run_cache)."""
        if self._removal_cache is None:
            from memlife.backends import embedding_cache

            first = self.erase_cache  # never `or`: a cache's truth is its len()
            if first is None and not self.dry_run:
                first = self.embeddings
            self._removal_cache = first if first is not None else embedding_cache(self.store)
        return self._removal_cache

    @property
    def journal(self) -> Journal:
        """The run's journal. A dry run keeps none (it must not even create the journal
        table) and its paths never ask for it: asking is a bug, refused here."""
        if self._journal is None:
            raise RuntimeError("a dry run keeps no journal")
        return self._journal

    def new_op(
        self,
        kind: OpKind,
        d_actor: str,
        d_ns: str,
        record_id: str,
        reasons: Sequence[str],
        sha: str | None,
        replacement: str | None = None,
        payload: str | None = None,
        key_ids: Sequence[str] | None = None,
    ) -> Operation:
        return Operation(
            operation_id=operation_id(self.run_key, kind, key_ids or [record_id]),
            run_id=self.run_id,
            kind=kind,
            actor_id=d_actor,
            namespace=d_ns,
            record_id=record_id,
            reasons=list(reasons),
            policy_version=self.policy.version,
            content_sha256=sha,
            replacement_id=replacement,
            payload=payload,
        )

    def plan(self, ops: Sequence[Operation]) -> list[Operation]:
        """``journal.plan(ops)``, each op as stored, and each this very operation. An id is
        the run key, kind and record id, not the tenant: a record removed between a crash
        and the rerun whose id another actor's record took since met the removed record's
        operation under that id, and the rerun took that (done) operation for its own: the
        new record was skipped, in no count and no list (audit 53f). Such an op is planned
        under an id keyed by its scope too (deterministic: a later rerun finds it).
        Only once the fence says this run is still the store's writer: a night that lost its
        lease while paused journaled a staged group's plan (the replacement's text in its
        payload) after the erasure that took the lease over had forgotten every payload
        naming the erased records (audit 53l)."""
        if self.fence is not None:
            self.fence()
        planned = self.journal.plan(ops)
        clash = [n for n, (o, got) in enumerate(zip(ops, planned, strict=True))
                 if _scope(o) != _scope(got)]  # fmt: skip
        if clash:
            again = self.journal.plan([replace(ops[n], operation_id=operation_id(
                ops[n].operation_id, ops[n].kind, [ops[n].actor_id, ops[n].namespace,
                                                   ops[n].record_id])) for n in clash])  # fmt: skip
            for n, o in zip(clash, again, strict=True):
                planned[n] = o
        return planned

    def run_lifecycle(
        self,
        ops: list[Operation],
        tally: Tally,
        apply: Callable[[list[Operation]], dict[str, Result]] | None = None,
    ) -> list[Operation]:
        if callable(tally) and isinstance(apply, Tally):  # the old order (ops, apply, tally)
            tally, apply = apply, tally
        return run_lifecycle(self, ops, tally, apply)

    def consolidate_shard(self, decisions: Sequence[Decision], tally: Tally) -> None:
        groups.consolidate_shard(self, decisions, tally)

    def stage_shard(
        self,
        decisions: Sequence[Decision],
        tally: Tally,
        read: Mapping[str, MemoryRecord] | None = None,
        views: Mapping[str, PlanView] | None = None,
    ) -> list[StagedGroup | StagedRef]:
        """Replacements and supersedes computed, nothing written (the gate looks first);
        ``read``: records of the shard read moments ago (not read again); ``views``: the
        shard's planning views by id (a dry run's unchanged groups are then counted from
        the derived cache)."""
        return groups.stage_shard(self, decisions, tally, read, views)

    def judge_unavailable(self, tally: Tally, shards: Collection[tuple[str, str]]) -> None:
        unavailable.judge_unavailable(self, tally, shards)

    def retrying_batch(self, shards: Collection[tuple[str, str]]) -> None:
        unavailable.forget_attempt(self, shards)

    def commit_group(self, staged: StagedGroup, tally: Tally) -> None:
        groups.commit_group(self, staged, tally)

    def remember_gate_blocked(self, staged: StagedGroup, tally: Tally) -> None:
        memo.remember_gate_blocked(self, staged, tally)

    def delete(self, items: Sequence[DeleteItem], tally: Tally) -> None:
        deletions.delete(self, items, tally)

    def quarantine(self, items: Sequence[DeleteItem], tally: Tally, reason: str) -> None:
        deletions.quarantine(self, items, tally, reason)

    def resume_due(self, tally: Tally, kinds: Collection[OpKind] | None = None) -> int:
        return resume.resume_due(self, tally, kinds)


def _scope(o: Operation) -> tuple[str, str, str, str, str]:
    return (o.run_id, o.kind.value, o.actor_id, o.namespace, o.record_id)
