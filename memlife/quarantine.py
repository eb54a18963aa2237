"""Quarantine: list, restore (exactly) and purge records the regression gate held back.

When the gate blocks a deletion, the pipeline quarantines the candidates instead
(status ``quarantined``: recoverable, invisible to recall). Just before that, the gate
calls :func:`snapshot`, which keeps each record's lifecycle fields (status,
status_changed_at, provenance: ids, hashes and versions, never content) in the side
table ``quarantine_snapshots``. Quarantine never touches content or the embedding
cache, so :func:`restore` puts the snapshot back and the record is exactly what it was.

Every change is an operation of a standalone run (``manual-<timestamp>-<hash>``) through
the executor's lifecycle: journaled (OpKind.restore / OpKind.purge), applied
idempotently, receipted content-free, plus a run manifest and receipt.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from memlife.apply import Executor, Tally
from memlife.apply.counts import journal_counts, lifecycle_from_journal
from memlife.apply.lifecycle import retryable
from memlife.apply.tally import COUNT
from memlife.audit import ReceiptSink, ReceiptWriteError, as_sink, dumps, run_prefix
from memlife.errors import InputError
from memlife.evidence import seal, sealed
from memlife.journal import Journal, Operation, OpKind, OpState, open_journal
from memlife.lease import Lease
from memlife.lease import for_store as lease_for_store
from memlife.model import MemoryRecord, Status, utcnow
from memlife.policy import Policy, parse_policy, resolve_policy_path
from memlife.policy_record import check_policy
from memlife.receipts import operator_identity
from memlife.run_receipts import loads, put_run_receipt, run_receipts
from memlife.stores import store_identity
from memlife.stores.base import MAX_BATCH, MemoryStore, chunked, iter_shard


def snapshot(store: MemoryStore, ids: Sequence[str]) -> int:
    """Keep the lifecycle fields of records about to be quarantined (not already so)."""
    from memlife.state.side import side_tables

    side = side_tables(store)
    now = utcnow().isoformat()
    n = 0
    for rid in ids:
        r = store.get(rid)
        if r is None or r.status is Status.quarantined:
            continue  # a quarantined record keeps the snapshot of before its quarantine
        changed = r.status_changed_at.isoformat() if r.status_changed_at else None
        side.put_snapshot(rid, (r.status.value, changed, r.provenance.model_dump_json()), now)
        n += 1
    return n


def snapshots(store: MemoryStore, ids: Sequence[str]) -> dict[str, tuple[str, str | None, str]]:
    from memlife.state.side import side_tables

    return side_tables(store).snapshots(ids)


def forget_snapshots(store: MemoryStore, ids: Sequence[str]) -> None:
    from memlife.state.side import side_tables

    side_tables(store).forget_snapshots(ids)


# -- standalone (manual) runs ------------------------------------------------------------------
@dataclass
class ManualRun:
    """A run id, an executor and the evidence of one manual action (restore, purge, erase)."""

    action: str
    run_id: str
    run_key: str
    cutoff: datetime
    policy: Policy
    sink: ReceiptSink
    journal: Journal
    executor: Executor
    tally: Tally = field(default_factory=Tally)
    extra: dict[str, Any] = field(default_factory=dict)
    lease: Lease | None = None  # the store's lifecycle lease, held until finish()
    resumed: set[OpKind] = field(default_factory=set)  # kinds a rerun finished first (_resume_own)

    @property
    def prefix(self) -> str:
        return run_prefix(self.run_id, self.cutoff)

    def release(self) -> None:
        """Give the lease back (idempotent; finish() does it, a failure path must too)."""
        _LIVE.pop(self.run_id, None)
        if self.lease is not None:
            self.lease.release()
            self.lease = None

    def seal_abandoned(self) -> None:
        """Seal this store's dead runs, as the next apply run would (memlife/run_abandoned.py):
        a run that finishes what another attempt left (a killed erase or review decision)
        also gives that attempt its run receipt. The store's lease keeps every other
        process's writer out; the manual runs still open in this one (an erase inside a
        hold release) are alive, not dead, and left alone."""
        from memlife.run_abandoned import seal_abandoned

        url = getattr(self.executor.store, "url", None)
        if url is None:
            return
        if sealed := seal_abandoned(self.sink, self.journal, store_url=url, run_id=self.run_id,
                                    cutoff=self.cutoff, alive=_alive()):  # fmt: skip
            self.tally.counts["abandoned_runs_sealed"] += len(sealed)

    def finish(self) -> dict[str, Any]:
        """operations.parquet + run receipt (create-only); returns the summary (ids, counts)."""
        ops = self.journal.by_run(self.run_id)
        # this run's counts over all its attempts come from the journal (apply/counts.py)
        jc = journal_counts(ops)
        counts = {**{k: v for k, v in self.tally.counts.items() if k not in _OUTCOME_COUNTS}, **jc}
        others = sum(1 for f in self.tally.failures if f.get("run_id") not in (None, self.run_id))
        failed = jc.get("failed", 0) + jc.get("unreceipted", 0) + others
        failed += self.tally.counts.get("deferral_receipt_failed", 0)  # erase._defer (audit 52f)
        status = "success" if not failed else "partial_failure"
        receipt = {
            "run_id": self.run_id, "mode": f"manual:{self.action}", "status": status,
            "policy_version": self.policy.version, "cutoff": self.cutoff.isoformat(),
            "finished_at": utcnow().isoformat(), "counts": counts, "journal_counts": jc,
            "operations": [{"operation_id": o.operation_id, "record_id": o.record_id,
                            "action": o.kind.value, "state": o.state.value,
                            "outcome": o.outcome.value if o.outcome else None,
                            "error": o.last_error} for o in ops],
            "failures": self.tally.failures, **self.extra,
        }  # fmt: skip
        location = None
        try:
            # Parquet and dataset part, then the receipt
            receipt["evidence"] = seal(self.sink, self.prefix, ops,
                                       (self.run_id, self.cutoff, f"manual:{self.action}"),
                                       secret=self.journal.run_secret())  # fmt: skip
            # deleted counts already_absent too (as a nightly receipt does); zeros stay out
            receipt["counts"].update({k: v for k, v in lifecycle_from_journal(jc).items() if v})
            # after a failure receipt (a crashed attempt sealed as abandoned), the next N
            key = put_run_receipt(self.sink, self.prefix, sealed(receipt))
            location = self.sink.location(key) if key else None
        except ReceiptWriteError:
            status = "partial_failure"
        self.release()  # the evidence is written: the next writer may start
        return {"run_id": self.run_id, "status": status, "counts": counts,
                "operations": receipt["operations"], "failures": self.tally.failures,
                "receipt": location, **self.extra}  # fmt: skip


def _zoned(now: datetime | None) -> datetime | None:
    """``now`` as given, refused without a zone (as the CLI's ``--now``): which instant it
    names is a guess, and a receipt's cutoff must say one; compared with stored times, a
    naive one raised TypeError."""
    if now is not None and now.utcoffset() is None:
        raise InputError("now: a time without a zone; give one (e.g. 2026-11-01T12:00:00Z)")
    from memlife.run_types import MAX_BEHIND

    # as `run --now`: near year 1 the grace's arithmetic overflowed, and a year below 1000
    # (0026 for 2026) made a run id and folder (runs/26/) no lookup finds (audit 53tm)
    if now is not None and now < utcnow() - MAX_BEHIND:
        raise InputError(f"now: {now.isoformat()} is more than 100 years before the clock: "
                         "no quarantine is that old; give the time you mean")  # fmt: skip
    return now


def manual_run(
    store: MemoryStore, action: str, ids: Sequence[str], *, policy: Policy | str | None = None,
    receipts: str | ReceiptSink | None = None, now: datetime | None = None,
    request: dict[str, Any] | None = None,
) -> ManualRun:  # fmt: skip
    """Start a standalone run ``manual-<timestamp>-<hash>`` and write its manifest.

    The run id is keyed (HMAC under the store's secret, ``Journal.run_secret``) by the
    action, the time and ``request`` (default: the ids), so the same request at the same
    ``now`` is the same run: a rerun after a crash resumes the run's own unfinished
    operations first, and its receipt counts every attempt. The key makes the request
    unguessable from the evidence: an erasure by subject keeps the subject out of it.
    """
    _zoned(now)
    pol, text = _read_policy(policy)  # read once: the rules kept are the rules applied
    sink = as_sink(receipts)
    check_policy(sink, pol, text, record=True)  # one version, one policy
    # one instant, one run id, whatever zone it was given in
    cutoff = now.astimezone(UTC) if now is not None else utcnow()
    raw = json.dumps(
        {"action": action, "ids": sorted(ids), "at": cutoff.isoformat()}
        if request is None
        else {"action": action, "request": request, "at": cutoff.isoformat()},
        sort_keys=True,
        default=str,
    )
    journal = open_journal(store)
    # keyed by the store's secret: the request may hold what the evidence must not (an
    # erasure's subject), and a plain hash of it could be confirmed from the receipts
    key = hmac.new(journal.run_secret(), raw.encode(), hashlib.sha256).hexdigest()
    run_id = f"manual-{cutoff:%Y%m%dT%H%M%S%fZ}-{key[:10]}"
    # one lifecycle writer per store: taken before the manifest (LeaseHeld: nothing written)
    # (in the journal's SQLite file, or the state table with MEMLIFE_STATE=dynamodb://…)
    lease = lease_for_store(store, run_id, f"manual:{action}")
    if lease.depth > 1:  # inside another manual run's lease (erase inside hold release)
        lease.bind(run_id)
    try:  # the run's receipts before this attempt: its moves after them are a rerun's
        before = len(run_receipts(sink, run_prefix(run_id, cutoff)))
    except BaseException:
        lease.release()
        raise
    executor = Executor(run_id=run_id, run_key=key, policy=pol, cutoff=cutoff, store=store,
                        journal=journal, sink=sink, after_receipts=before)  # fmt: skip
    executor.reviewer = (
        operator_identity()
    )  # a person asked: receipts name who (review: the reviewer)
    run = ManualRun(action, run_id, key, cutoff, pol, sink, journal, executor, lease=lease)
    _LIVE[run_id] = (lease, lease.depth)
    manifest = {"run_id": run_id, "run_key": key, "mode": f"manual:{action}",
                "policy_version": pol.version, "cutoff": cutoff.isoformat(),
                "record_ids": sorted(ids), "started_at": utcnow().isoformat(),
                "requested_by": executor.reviewer}  # fmt: skip
    if getattr(store, "url", None):  # as a night's: verify tells another store's run apart
        manifest["store_identity"] = store_identity(store.url)
    try:
        if not sink.put_new(f"{run.prefix}/manifest.json", dumps(manifest)):
            _asked_by_kept(run, sink)
    except ReceiptWriteError:
        # invariant 2, as the nightly run: no evidence can be written, so nothing changes
        run.release()
        raise
    from memlife.run_chain import advance

    run.extra["previous_run"] = advance(journal, run_id, sink)  # under the lease (run_chain.py)
    _resume_own(run)
    return run


def _asked_by_kept(run: ManualRun, sink: ReceiptSink) -> None:
    """A rerun of this run (its manifest kept from the first attempt): who asked is who the
    kept manifest names, whoever reruns it (a deferral receipt naming another person failed
    verify, audit 47s). An unreadable manifest leaves the operator's name."""
    from memlife.audit import ReceiptReadError

    try:
        kept = loads(sink.get(f"{run.prefix}/manifest.json")) or {}
    except ReceiptReadError:
        return
    if isinstance(kept.get("requested_by"), str):
        run.executor.reviewer = kept["requested_by"]


def _read_policy(given: Policy | str | None) -> tuple[Policy, bytes]:
    """The policy and its file's bytes, read once; a policy given as an object, with YAML
    of its rules."""
    if isinstance(given, Policy):
        return given, str(yaml.safe_dump(given.model_dump(mode="json"), sort_keys=False)).encode()
    path = resolve_policy_path(given)
    text = path.read_bytes()
    return parse_policy(text, path), text


def _resume_own(run: ManualRun) -> None:
    """A rerun of this same run (after a crash) first finishes what it left, by kind."""
    left: dict[OpKind, list[Operation]] = {}
    for o in run.journal.by_run(run.run_id):
        if o.state in (OpState.PLANNED, OpState.APPLIED) or retryable(o):
            left.setdefault(o.kind, []).append(o)
    for kind, ops in left.items():
        for batch in chunked(ops, 100):
            run.executor.run_lifecycle(batch, run.tally)
        run.resumed.add(kind)


# manual runs of this process not yet finished (released): alive, whatever their receipts
# say. Each with its lease and that lease's depth when the run took it: a caller that
# failed part way gave the lease back below it (lease.scoped) without finishing the run,
# which is then as dead as a killed process's, and the next run seals it.
_LIVE: dict[str, tuple[Lease, int]] = {}


def _alive() -> frozenset[str]:
    """The manual runs of this process still under way (their leases held as taken)."""
    for run_id, (lease, depth) in list(_LIVE.items()):
        if not lease.holds(depth):
            _LIVE.pop(run_id, None)
    return frozenset(_LIVE)


_OUTCOME_COUNTS = {*COUNT.values(), "failed", "receipt_failed"}  # the journal's, not the tally's


# -- list / restore / purge ------------------------------------------------------------------
def list_quarantined(store: MemoryStore, actor_id: str | None = None) -> list[dict[str, Any]]:
    """Quarantined records (ids, scope, type, since when, why): no content."""
    journal = open_journal(store)
    out = []
    actors = [actor_id] if actor_id else list(store.list_actors())
    for actor in actors:
        for ns in store.list_namespaces(actor):
            for page in iter_shard(store, actor, ns, statuses=[Status.quarantined]):
                for r in page.records:
                    if r.status is not Status.quarantined:
                        continue
                    # this record's own: an id another actor's removed record held keeps
                    # its operations, never this record's history (audit 52h)
                    ops = [o for o in journal.for_record(r.id) if o.kind is OpKind.quarantine
                           and (o.actor_id, o.namespace) == (r.actor_id, r.namespace)]  # fmt: skip
                    ops.sort(key=lambda o: o.updated_at or o.created_at or r.created_at)
                    out.append({
                        "id": r.id, "actor_id": r.actor_id, "namespace": r.namespace,
                        "memory_type": r.memory_type.value,
                        "quarantined_at": r.status_changed_at.isoformat() if r.status_changed_at else None,
                        "reasons": ops[-1].reasons if ops else [],
                        "run_id": ops[-1].run_id if ops else None,
                        "content_sha256": r.sha256,
                    })  # fmt: skip
    return out


def _op(run: ManualRun, kind: OpKind, r: MemoryRecord, reasons: Sequence[str]) -> Operation:
    return run.executor.new_op(kind, r.actor_id, r.namespace, r.id, list(reasons), r.sha256)


def _plan(run: ManualRun, kind: OpKind, ids: Sequence[str], reason: str) -> list[Operation]:
    ops, missing = [], []
    for rid in dict.fromkeys(ids):
        r = run.executor.store.get(rid)
        if r is None:
            missing.append(rid)
            continue
        ops.append(_op(run, kind, r, [reason]))
    if missing:
        run.extra.setdefault("not_found", []).extend(missing)
    return run.journal.plan(ops) if ops else []


def _followers(run: ManualRun, ids: Sequence[str]) -> tuple[list[Operation], set[str]]:
    """Deletes of the superseded records that point to a record the purge deletes
    (memlife/orphans.py), as a review delete plans them: no record is left superseded by
    nothing (invariant 3). Held ones stay (a held source pins its replacement: the purge
    applier keeps that one); so do disputed ones (never deleted until their item is
    resolved), and with them, the replacement they point to."""
    from memlife.orphans import followers
    from memlife.plan import Reason
    from memlife.review_queue.queue import ReviewQueue

    store = run.executor.store
    queue = ReviewQueue.for_store(store)
    reasons = [Reason.ALREADY_SUPERSEDED.value, Reason.REPLACEMENT_DELETED.value]
    ops: list[Operation] = []
    kept: set[str] = set()
    for rid in dict.fromkeys(ids):
        r = store.get(rid)
        if r is None:
            continue
        trail = [s for s in followers(store, r) if not s.held]
        if {s.id for s in trail} & queue.disputed(r.actor_id, r.namespace):
            kept.add(rid)
            run.extra.setdefault("kept_for_disputed_sources", []).append(rid)
            continue
        ops += [_op(run, OpKind.delete, s, reasons) for s in trail]
    return ops, kept


def restore(
    store: MemoryStore, ids: Sequence[str], *, policy: Policy | str | None = None,
    receipts: str | ReceiptSink | None = None, now: datetime | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Bring quarantined records back exactly as they were before quarantine."""
    run = manual_run(store, "restore", ids, policy=policy, receipts=receipts, now=now)
    try:
        planned = _plan(run, OpKind.restore, ids, "MANUAL_RESTORE")
        if planned:
            run.executor.run_lifecycle(planned, run.tally)  # the restore applier (apply/appliers)
        return run.finish()
    finally:
        run.release()


def _snapshot_times(store: MemoryStore, ids: Sequence[str]) -> dict[str, str]:
    """When each record's quarantine snapshot was taken (wall clock: :func:`snapshot`)."""
    from memlife.sql_in import in_chunks
    from memlife.state.dynamodb import key
    from memlife.state.side import DynamoSideTables, side_tables

    side = side_tables(store)
    if isinstance(side, DynamoSideTables):
        items = side.state.batch_get([key(f"qsnap#{i}", "snap") for i in ids])
        return {i["pk"]["S"][6:]: i["taken_at"]["S"] for i in items if "taken_at" in i}
    out: dict[str, str] = {}
    with side.lock:
        for qs, chunk in in_chunks(ids):
            rows = side.connection.execute(
                f"SELECT record_id, taken_at FROM quarantine_snapshots WHERE record_id IN ({qs})",
                chunk,
            )
            out.update({r[0]: r[1] for r in rows if r[1]})
    return out


def purge_candidates(
    store: MemoryStore, older_than_days: float, now: datetime | None = None
) -> list[dict[str, Any]]:
    """The quarantined records :func:`purge` would delete (rows of :func:`list_quarantined`,
    each with ``quarantined_since``: the time its grace is measured from).

    The grace is real time in quarantine. ``quarantined_at`` (status_changed_at) is the
    quarantining run's cutoff, which a replay (``run --now`` in the past) puts long before
    the quarantine happened; so the wall-clock time the gate took the record's snapshot,
    just before quarantining it, counts instead, or the cutoff where that is later (a run
    with --allow-future-cutoff). A record without a snapshot falls back to its cutoff.
    """
    limit = (_zoned(now) or utcnow()) - timedelta(days=older_than_days)
    rows = [q for q in list_quarantined(store) if q["quarantined_at"]]
    taken = _snapshot_times(store, [q["id"] for q in rows]) if rows else {}
    out = []
    for q in rows:
        since = datetime.fromisoformat(q["quarantined_at"])
        if q["id"] in taken:
            since = max(since, datetime.fromisoformat(taken[q["id"]]))
        if since <= limit:
            out.append({**q, "quarantined_since": since.isoformat()})
    return out


def purge(
    store: MemoryStore, older_than_days: float, *, policy: Policy | str | None = None,
    receipts: str | ReceiptSink | None = None, now: datetime | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Delete records quarantined at least ``older_than_days`` ago (legal holds excepted)."""
    cutoff = _zoned(now) or utcnow()
    due = [q["id"] for q in purge_candidates(store, older_than_days, cutoff)]
    run = manual_run(store, "purge", due, policy=policy, receipts=receipts, now=cutoff,
                     request={"older_than_days": older_than_days})  # fmt: skip
    try:
        run.extra["older_than_days"] = older_than_days
        trail, kept = _followers(run, due)  # read before the purge: they point to what it deletes
        planned = _plan(run, OpKind.purge, [d for d in due if d not in kept], "QUARANTINE_EXPIRED")
        for batch in chunked(planned, MAX_BATCH):
            run.executor.run_lifecycle(batch, run.tally)  # the purge applier (apply/appliers)
        follow = run.journal.plan(trail) if trail else []
        for batch in chunked(follow, MAX_BATCH):  # the delete applier: once their replacement went
            run.executor.run_lifecycle(batch, run.tally)
        return run.finish()
    finally:
        run.release()
