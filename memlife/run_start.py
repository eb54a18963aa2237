"""Step 1 of the nightly run: the lease, then the run manifest before any record is touched.

The run id and key are deterministic (policy version, cutoff, scope, mode, store), so a
rerun resumes the same run and a child batch derives its parent's ids (invariant 4).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlife import __version__
from memlife.audit import ReceiptSink, dumps, open_sink, run_prefix
from memlife.lease import Lease
from memlife.lease import for_store as lease_for_store
from memlife.model import utcnow
from memlife.policy import parse_policy, resolve_policy_path
from memlife.policy_record import check_policy
from memlife.run_receipts import check_own_folder
from memlife.run_types import RunConfig, RunContext, mode_of
from memlife.settings import settings
from memlife.stores import MemoryStore, resolve_store_url, store_identity

if TYPE_CHECKING:
    from memlife.ledger_merge import ActorStats
    from memlife.policy import Policy
    from memlife.state.dynamodb import DynamoState

log = logging.getLogger(__name__)


def scope(config: RunConfig) -> dict[str, Any]:
    return {"namespaces": sorted(config.namespaces), "actors": sorted(config.actors)}


def run_key(
    policy: Policy, cutoff: datetime, scope: dict[str, Any], mode: str, store: str,
    behaviour: dict[str, Any] | None = None,
) -> str:  # fmt: skip
    """Deterministic: the same policy, cutoff, scope, mode and store give the same run (reruns
    resume); two stores never share a run (``store`` is :func:`store_identity`). The policy
    counts by version AND content: an edited threshold under an old version is a new run.
    ``behaviour`` (:func:`run_behaviour`): what else decides what the run changes; a run
    that consolidates is not a rerun of one that did not (its receipt would never be sealed)."""
    raw = json.dumps(
        {"policy": policy.version, "policy_fingerprint": policy.fingerprint(),
         "cutoff": cutoff.isoformat(), "scope": scope, "mode": mode, "store": store,
         **({"behaviour": behaviour} if behaviour else {})},
        sort_keys=True,
    )  # fmt: skip
    return hashlib.sha256(raw.encode()).hexdigest()


def run_behaviour(config: RunConfig) -> dict[str, Any]:
    """The settings besides policy, cutoff and scope that change what a run does: which
    consolidator answers (none, the extractive one, or which model) and which evaluation
    set gates it. In the run key and the manifest."""
    from memlife.settings import DEFAULT_MODEL  # not the SDK module: 2.7 s to import

    paid = not config.dry_run or config.with_model
    if not config.consolidate:
        consolidator = "none"
    elif paid and settings().anthropic_api_key:
        consolidator = f"model:{settings().model or DEFAULT_MODEL}"
    else:
        consolidator = "extractive"
    return {"consolidator": consolidator,
            "eval_cases": (config.eval_cases or "").split("?")[0] or None}  # fmt: skip


def remote_state(store_url: str) -> DynamoState | None:
    """The AWS state backend for a run on this store (never for the SQLite store: its file)."""
    from memlife.state import current

    return None if store_url.startswith("sqlite:") else current()


def use_state(config: RunConfig) -> None:
    """``config.state`` (a flow parameter) as this process's MEMLIFE_STATE: before the store
    is opened and the lease taken, so the lease is taken where the run's state is."""
    if config.state:
        from memlife.state import ENV, parse_state_url

        parse_state_url(config.state)  # a bad URL fails here, before the lease and manifest
        os.environ[ENV] = config.state  # child processes and every state part read it


def start_run(config: RunConfig, sink: ReceiptSink | None = None) -> RunContext:
    """Step 1: fix the cutoff and write the run manifest before touching any record."""
    # the gate's evaluation set: the run's own, else the worker's MEMLIFE_EVAL_CASES
    config = config.model_copy(
        update={"eval_cases": config.eval_cases or settings().eval_cases or None}
    )
    use_state(config)
    policy_path = resolve_policy_path(config.policy)
    policy_bytes = policy_path.read_bytes()  # read once: the rules kept are the rules applied
    policy = parse_policy(policy_bytes, policy_path)
    cutoff = config.now or utcnow()
    run_scope = scope(config)
    mode = mode_of(config)
    store_url = resolve_store_url(config.store)
    behaviour = run_behaviour(config)
    key = run_key(policy, cutoff, run_scope, mode, store_identity(store_url), behaviour)
    run_id = f"{cutoff:%Y%m%dT%H%M%SZ}-{mode.replace('_run', '')}-{key[:10]}"
    sink = sink or open_sink(config.receipts)
    started = utcnow()
    # Reports are per attempt: two attempts of one run never write the same file.
    attempt = config.attempt or f"{started:%Y%m%dT%H%M%S%fZ}-{os.getpid()}"
    # one version, one policy: refused before the manifest when the version names other rules
    if warning := check_policy(sink, policy, policy_bytes, record=not config.dry_run):
        log.warning("%s", warning)  # a dry run previews it; an apply run is refused
    manifest = {
        "run_id": run_id, "run_key": key, "mode": mode, "policy_version": policy.version,
        "policy_sha256": hashlib.sha256(policy_bytes).hexdigest(), "cutoff": cutoff.isoformat(),
        "scope": run_scope, "store": store_url.split("?")[0],
        "store_identity": store_identity(store_url), "started_at": started.isoformat(),
        "eval_cases": behaviour["eval_cases"], "consolidator": behaviour["consolidator"],
        "memlife_version": __version__,
    }  # fmt: skip
    mkey = f"{run_prefix(run_id, cutoff)}/manifest.json"
    created = sink.put_new(mkey, dumps(manifest))  # False on a rerun: the first one stands
    check_own_folder(sink, run_prefix(run_id, cutoff), manifest, created)  # a planted one: refused
    report_dir = settings().home / "reports" / run_id / attempt
    if remote_state(store_url) is not None:  # written here, uploaded at close: no local state
        report_dir = Path(tempfile.mkdtemp(prefix=f"memlife-report-{run_id}-"))
    return RunContext(
        config=config.model_copy(update={"attempt": attempt}),
        policy=policy,
        run_id=run_id,
        run_key=key,
        cutoff=cutoff,
        started_at=started,
        report_dir=report_dir,
        manifest_location=sink.location(mkey),
        store_url=store_url,
        sink=sink,
        access_stats=load_access_stats(
            cutoff, store_url, config.cloudtrail, dry_run=config.dry_run
        ),
    )


def load_access_stats(
    cutoff: datetime, store_url: str | None = None, cloudtrail: str | None = None,
    *, dry_run: bool = False,
) -> ActorStats:  # fmt: skip
    """Access recency and frequency from the ledger, up to the cutoff (replays stay stable).

    The ledger is on S3 with a remote state backend, else under $MEMLIFE_HOME.
    ``cloudtrail``: AgentCore reads logged by CloudTrail are ingested first (each log file
    once: a rerun reads nothing twice; reads of records the store erased are left out). A dry run reads the files not ingested yet and
    writes nothing: no ledger part, and no marker that would make the apply run skip them."""
    from memlife.ledger import AccessLedger

    remote = remote_state(store_url) if store_url else None
    if remote is not None:
        from memlife.state.ledger import S3AccessLedger

        ledger: AccessLedger = S3AccessLedger(remote)
    else:
        root = settings().home / "ledger"
        ledger = AccessLedger(root)
    extra: ActorStats = {}
    if cloudtrail and dry_run:
        extra = _cloudtrail_preview(ledger, cloudtrail, cutoff)
    elif cloudtrail:  # reads of records the run's store erased are left out
        from memlife.stores import open_store

        store = open_store(store_url)
        try:
            ledger.ingest_cloudtrail(cloudtrail, store=store)
        finally:
            store.close()
    stats = ledger.actor_stats(cutoff) if remote is not None or ledger.root.exists() else {}
    for key, times in extra.items():
        stats[key] = stats[key].plus(times) if key in stats else times
    return stats


def _cloudtrail_preview(ledger: Any, source: str, cutoff: datetime) -> ActorStats:
    """What an ingest of ``source`` would add to the ledger's stats (reads up to the
    cutoff), read in memory."""
    from memlife import cloudtrail as ct
    from memlife.ledger_ingest import content_id, kept_reads, parts_marker
    from memlife.ledger_merge import AccessTimes

    times: dict[tuple[str, str], list[float]] = {}
    report = ct.IngestReport()  # a bad file or event is named (a warning) and skipped
    seen: set[str] = set()
    for key, load in ct.log_files(source, None):
        if ledger.cloudtrail_ingested(key):
            continue
        body: list[bytes] = []
        hits = ct.file_hits(key, kept_reads(load, body), report) or []
        # as the ingest: one log file's bytes are its reads once, under any key (a moved
        # folder, a synced copy), whether ingested already or met twice here
        ident = content_id(body[0]) if body else key
        if ident in seen or ledger._ingested(parts_marker(ident)):
            continue
        seen.add(ident)
        for a in hits:
            if a.accessed_at <= cutoff:
                times.setdefault((a.actor_id, a.record_id), []).append(a.accessed_at.timestamp())
    return {key: AccessTimes(got) for key, got in times.items()}


def take_lease(config: RunConfig, store: MemoryStore) -> Lease | None:
    """An apply or retry run is the store's one lifecycle writer (memlife/lease.py); it
    takes the lease before its manifest. A dry run writes nothing and takes none."""
    if config.dry_run:
        return None
    return lease_for_store(store, "starting", "retry" if config.retry_only else "nightly")
