"""Placing legal holds: `memlife hold place --id ID... | --actor A --subject S`.

A held record is never deleted, superseded, quarantined or rewritten (invariant 1).
Placing is a manual run: one journaled ``hold`` operation per record, receipted
content-free, plus the run's manifest and receipt (lifting: erase.release_hold).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memlife.errors import InputError, NotFoundError
from memlife.journal import OpKind
from memlife.lease import scoped as lease_scoped
from memlife.model import RetentionClass
from memlife.stores.base import MemoryStore, iter_shard


class HoldError(InputError):
    """A hold request that names nothing (or names it ambiguously)."""


class HoldNotFound(HoldError, NotFoundError):
    """No record the hold request names exists: no run, no receipt (exit 1)."""


def require_some(store: MemoryStore, ids: Sequence[str], what: str) -> None:
    """Refuse before any run when none of ``ids`` is a record: a receipt of a hold placed
    or lifted on nothing would read as a success a reviewer can cite."""
    if not any(store.get(i) is not None for i in ids):
        raise HoldNotFound(f"nothing to {what}: no record has id {', '.join(ids)}")


def subject_ids(store: MemoryStore, actor: str, subject: str, *, given: bool = True) -> list[str]:
    """Ids of the actor's records whose subject (given, or inferred) is ``subject``; with
    ``given=False`` only those memlife inferred it for (a record saved without one)."""
    from memlife.inferred import InferredSubjects

    want = subject.strip().lower()
    ids: list[str] = []
    table = InferredSubjects.for_store(store)
    for ns in store.list_namespaces(actor):
        unnamed: list[str] = []
        for page in iter_shard(store, actor, ns):
            for r in page.records:
                if r.subject and given and r.subject.strip().lower() == want:
                    ids.append(r.id)
                elif not r.subject:
                    unnamed.append(r.id)
        inferred = table.get((actor, ns), unnamed)
        ids += [rid for rid, s in inferred.items() if s.strip().lower() == want]
    return ids


@lease_scoped  # the lease its run takes is given back however the hold ends
def place_hold(
    store: MemoryStore, *, ids: Sequence[str] = (), actor: str | None = None,
    subject: str | None = None, policy: Any = None, receipts: Any = None,
    now: datetime | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Hold these records (or the actor's records on ``subject``); receipted."""
    from memlife.quarantine import manual_run

    if subject is not None:
        if not actor:
            raise HoldError("--subject needs --actor: a subject is always someone's")
        ids = [*ids, *subject_ids(store, actor, subject)]
        if not ids:  # found nothing: a "not found" (exit 1), as any
            raise HoldNotFound(f"nothing to hold: no record of actor {actor} has subject "
                               f"{subject!r}")  # fmt: skip
    ids = list(dict.fromkeys(ids))
    if not ids:
        raise HoldError("nothing to hold: name --id or --actor with --subject (no record matched)")
    if actor:  # ids given with an actor are that actor's: never another tenant's record
        foreign = [i for i in ids if (r := store.get(i)) is not None and r.actor_id != actor]
        if foreign:
            raise HoldError(f"{len(foreign)} id(s) are not records of actor {actor}: "
                            f"{', '.join(foreign)}")  # fmt: skip
    require_some(store, ids, "hold")
    run = manual_run(store, "hold_place", ids, policy=policy, receipts=receipts, now=now)
    ops, missing, already = [], [], []
    for rid in ids:
        r = store.get(rid)
        if r is None:
            missing.append(rid)
            continue
        if r.retention_class is RetentionClass.legal_hold:
            already.append(rid)
        ops.append(run.executor.new_op(OpKind.hold, r.actor_id, r.namespace, rid,
                                       ["LEGAL_HOLD_PLACED"], r.sha256))  # fmt: skip
    from memlife.apply.lifecycle import run_lifecycle

    done = run_lifecycle(run.executor, run.journal.plan(ops), run.tally) if ops else []
    run.extra.update(held=[o.record_id for o in done if o.outcome is not None and
                           o.outcome.value == "held"], already_held=already, not_found=missing)  # fmt: skip
    return run.finish()
