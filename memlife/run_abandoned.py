"""Runs killed before their receipt, that no rerun finished: sealed by the next apply run.

A run killed after some changes and rerun with the same settings resumes and seals itself.
Rerun with other settings (an edited policy, another cutoff: the schedule's next night) it
never is: its changes were receipted one by one, but no run receipt ever accounted for them
(`receipts list`: incomplete for good; `verify`: every operation outside any Parquet).

The next apply or retry run on the store holds the store's lease, so no other writer of
this store is running: every run of this store within the look-back that has a manifest
and no receipt is dead. Each is sealed as it stands, once (create-only): a ``failure``
receipt (error ``ABANDONED``, ``sealed_by`` this run) with its operations Parquet and its
counts from the journal, exactly as ``verify`` checks a receipt. Should the same run be
rerun later, its receipt follows this failure (``receipt.2.json``), as any rerun's does.

A folder that shows the run was sealed before is never sealed again: a run report page
(written after the run's receipt) or any receipt*.json there, with no ``receipt.json``,
means a receipt was removed (a delete marker on a locked bucket), not that the run died
unsealed. Sealing it again would write a fresh ``failure``/ABANDONED result over the
evidence's gap. Such a run is left as it is and reported (the log:
ABANDONED_RUN_SEALED_BEFORE; ``receipts verify``: RUN_RECEIPT_MISSING). An operations
Parquet alone is what a run killed between its Parquet and its receipt leaves: it is
sealed, and the seal names that very file when it holds the bytes the seal would write
(evidence.seal, audit 47k); a Parquet of other bytes stays named by no receipt
(PARQUET_NOT_SEALED).

A run is this store's when its manifest names the store's identity (``store_identity``:
one however its URL is spelled), or, for a manifest that names none (a manual run's, or one
written before the identity was), when the store's journal holds operations of it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import date, datetime, timedelta
from typing import Any

from memlife.apply.counts import journal_counts, lifecycle_from_journal
from memlife.audit import ReceiptSink, ReceiptWriteError, dumps
from memlife.evidence import seal, sealed
from memlife.journal import Journal
from memlife.model import utcnow
from memlife.review import in_place
from memlife.run_receipts import loads, receipt_key, run_receipts

log = logging.getLogger(__name__)

LOOKBACK = timedelta(days=7)  # run folders (by cutoff day) looked at around this run's
SPAN = timedelta(days=366)  # a cutoff and a clock this far apart: every day between looked at


def seal_abandoned(
    sink: ReceiptSink, journal: Journal, *, store_url: str, run_id: str, cutoff: datetime,
    now: datetime | None = None, alive: Collection[str] = (),
) -> list[str]:  # fmt: skip
    """Seal every dead run of this store without a receipt; the ids of those sealed.
    ``alive``: runs of the caller's process still under way (not ``run_id``'s only)."""
    from memlife.lease import check_held
    from memlife.stores import store_identity

    now = now or utcnow()
    store = store_identity(store_url)
    # "every run without a receipt is dead" holds only while the caller holds the lease: a
    # writer paused past its TTL would seal the live run that took it over (audit 51a)
    check_held(store)
    out: list[str] = []
    for day in _days_to_look(cutoff, now):
        for key in list(sink.list(f"runs/{day:%Y/%m/%d}/")):
            if not key.endswith("/manifest.json"):
                continue
            prefix = key.rsplit("/", 1)[0]
            other = prefix.rsplit("/", 1)[1]
            if other == run_id or other in alive or not in_place(prefix):
                continue  # a folder under another day than its id's is no run (verify names it)
            if run_receipts(sink, prefix):
                continue
            if before := sealed_before(sink, prefix):
                log.warning("ABANDONED_RUN_SEALED_BEFORE run %s not sealed again: %s is there "
                            "but no receipt.json (receipts verify names the gap)", other, before)  # fmt: skip
                continue
            manifest = loads(sink.get(key)) or {}
            if _seal_one(sink, journal, prefix, other, manifest, store, run_id):
                out.append(other)
    return out


def _days_to_look(cutoff: datetime, now: datetime) -> list[date]:
    """The run folders' days to list: LOOKBACK up to the cutoff and up to now, and the days
    between them when they are at most SPAN apart (a catch-up run). Every day between was
    listed before: a cutoff in 2200 (``--allow-future-cutoff``) made 63,222 listings, one
    in 9999 never finished."""
    first, last = min(cutoff, now), max(cutoff, now)
    if last - first <= SPAN:
        starts = [first - LOOKBACK]
        ends = [last]
    else:
        starts = [first - LOOKBACK, last - LOOKBACK]
        ends = [first, last]
    days: set[date] = set()
    for start, end in zip(starts, ends, strict=True):
        day = start.date()
        while day <= end.date():
            days.add(day)
            if day == date.max:  # a cutoff on 9999-12-31 (--allow-future-cutoff): no next
                break  # day; an OverflowError ended such a night after its changes (audit 50f)
            day += timedelta(days=1)
    return sorted(days)


def sealed_before(sink: ReceiptSink, prefix: str) -> str | None:
    """The key in the run folder that shows a seal happened (a report page, a receipt.N.json),
    or None: a run that died unsealed (perhaps between its Parquet and its receipt)."""
    for key in sorted(sink.list(f"{prefix}/")):
        name = key.rsplit("/", 1)[-1]
        if name == "report.html":
            return key
        if name.startswith("receipt") and name.endswith(".json"):
            return key
    return None


def _seal_one(
    sink: ReceiptSink, journal: Journal, prefix: str, other: str, manifest: dict[str, Any],
    store: str, sealed_by: str,
) -> bool:  # fmt: skip
    from memlife.stores import same_store

    mode = str(manifest.get("mode", ""))
    if mode == "dry_run":  # changes nothing and takes no lease: it may be running now
        return False
    named = manifest.get("store_identity")
    if named is not None and not same_store(str(named), store):
        return False  # another store's run (a receipts bucket may serve several stores)
    ops = journal.by_run(other)
    if named is None and not ops:
        # a manifest from before the identity was written names the store by its URL, which
        # two stores can share (a relative path): only its operations in this store's
        # journal say it was this store's (a manual run's manifest names no store at all)
        return False
    jc = journal_counts(ops)
    receipt = {
        "run_id": other, "mode": mode, "status": "failure", "error": "ABANDONED",
        "sealed_by": sealed_by, "policy_version": manifest.get("policy_version"),
        "cutoff": manifest.get("cutoff"), "scope": manifest.get("scope"),
        "started_at": manifest.get("started_at"), "finished_at": None,
        "sealed_at": utcnow().isoformat(), "pagination_complete": False,
        "counts": lifecycle_from_journal(jc), "journal_counts": jc,
    }  # fmt: skip
    try:
        # no operations, no dataset part: the cutoff is then never read
        part = (other, datetime.fromisoformat(str(manifest.get("cutoff"))), mode) if ops else None
        receipt["evidence"] = seal(sink, prefix, ops, part, secret=journal.run_secret())
        # create-only: a run sealed meanwhile by another path keeps its receipt
        return sink.put_new(receipt_key(prefix, 1), dumps(sealed(receipt)))
    except (ReceiptWriteError, ValueError) as exc:  # sealed by a later run, never fails this one
        log.warning("abandoned run %s not sealed: %s", other, type(exc).__name__)
        return False
