"""The nightly run as plain functions: the Prefect flow (flows/nightly.py) only wires them.

Order (DESIGN.md): start (manifest first) -> drain the retry queue -> per shard batch:
page, expire, score, group, plan, report, stage (replacements computed, nothing written)
-> regression gate on everything staged (before: the store as found; after: a shadow
view) -> commit what the gate allows (replacements, supersedes, deletions; quarantine
what it blocks) -> receipts and counts. A shard is one
actor + namespace; shards are processed in batches so orchestration overhead stays small
at 1M records, and a shard is never split, so no operation mixes actors or namespaces.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from memlife import __version__, progress
from memlife.apply import DeleteItem, Executor, StagedGroup, Tally
from memlife.apply.counts import journal_counts, lifecycle_from_journal
from memlife.audit import ReceiptSink, ReceiptWriteError, dumps, open_sink, run_prefix
from memlife.consolidate.base import Consolidator
from memlife.embed_cache import EmbeddingCache
from memlife.evidence import seal, sealed
from memlife.faults import checkpoint
from memlife.journal import Journal, open_journal
from memlife.lease import Lease
from memlife.lease import for_store as lease_for_store
from memlife.metrics import publish_counts
from memlife.model import PlanView, parse_time, plan_view, utcnow
from memlife.namespaces import glob_match
from memlife.plan import DELETE_ACTIONS, Action, Decision, Planner, Reason, ShardHints
from memlife.policy import Policy, load_policy, resolve_policy_path
from memlife.receipts_dataset import write_operations
from memlife.report import ReportWriter
from memlife.settings import settings
from memlife.stores import MemoryStore, iter_shard, open_store, resolve_store_url, store_identity
from memlife.stores.base import StoreError

if TYPE_CHECKING:
    from memlife.state.dynamodb import DynamoState

log = logging.getLogger("memlife.pipeline")
T = TypeVar("T")


def memlife_home() -> Path:
    return settings().home


@dataclass(frozen=True)
class Shard:
    actor_id: str
    namespace: str

    def __str__(self) -> str:
        return f"{self.actor_id}:{self.namespace}"


@dataclass(frozen=True)
class RunConfig:
    dry_run: bool = True
    namespaces: tuple[str, ...] = ()  # globs; empty = all
    actors: tuple[str, ...] = ()  # exact ids; empty = all
    now: datetime | None = None  # the processing cutoff; fixed for replays
    policy: str = "policies/default.yaml"
    store: str | None = None
    receipts: str | None = None
    page_size: int = 500
    shards_per_batch: int = 100
    consolidate: bool = True  # False: plan and apply without calling any consolidator
    retry_only: bool = False
    eval_cases: str | None = None  # regression-gate cases (file or s3://, YAML/JSONL)
    with_model: bool = False  # a dry run calls the model only when asked (else: estimates)
    metrics_namespace: str | None = None  # CloudWatch namespace for counts (or env)
    cloudtrail: str | None = None  # CloudTrail log folder / s3:// ingested into the ledger first
    workers: int = 0  # dry-run planning processes (run_local); 0 = one per CPU, at most 4
    attempt: str | None = None  # this attempt of the run (set by start_run; children inherit it)
    state: str | None = None  # MEMLIFE_STATE for this run (dynamodb://...); None: the environment


@dataclass
class RunContext:
    config: RunConfig
    policy: Policy
    run_id: str
    run_key: str
    cutoff: datetime
    started_at: datetime
    report_dir: Path
    manifest_location: str
    store_url: str
    sink: ReceiptSink
    # record id -> (last accessed, count) from the access ledger (recall telemetry, CloudTrail)
    access_stats: dict = field(default_factory=dict)
    lease_taken_over: dict | None = None  # the expired lease (of a killed run) this run took over

    @property
    def mode(self) -> str:
        return (
            "retry" if self.config.retry_only else ("dry_run" if self.config.dry_run else "apply")
        )

    @property
    def prefix(self) -> str:
        return run_prefix(self.run_id, self.cutoff)


@dataclass
class BatchOutcome:
    counts: Counter = field(default_factory=Counter)
    records: int = 0
    shards: int = 0
    failed_shards: list[dict] = field(default_factory=list)
    deletions: list[DeleteItem] = field(default_factory=list)
    staged: list[StagedGroup] = field(default_factory=list)  # consolidations awaiting the gate
    tally: Tally = field(default_factory=Tally)
    reviews: list[Decision] = field(default_factory=list)  # queued after planning (budget)


@dataclass
class RunSummary:
    run_id: str
    policy_version: str
    cutoff: str
    mode: str
    status: str
    counts: dict[str, int]  # planned actions
    lifecycle: dict[str, int]  # processed, retained, consolidated, superseded, deleted, ...
    records: int
    shards: int
    report: str
    report_parquet: str
    manifest: str
    receipt: str | None
    seconds: float
    failed_shards: list[dict] = field(default_factory=list)
    model: dict = field(default_factory=dict)
    gate: dict | None = None
    other: dict = field(default_factory=dict)  # e.g. consolidation_proposed, merged_duplicates
    report_html: str | None = None  # the run's report page, beside its receipts

    @property
    def dry_run(self) -> bool:
        return self.mode == "dry_run"

    def as_json(self) -> dict:
        return {
            "run_id": self.run_id, "policy_version": self.policy_version, "cutoff": self.cutoff,
            "mode": self.mode, "dry_run": self.dry_run, "status": self.status,
            "counts": self.counts, "lifecycle": self.lifecycle, "records": self.records,
            "shards": self.shards, "report": self.report, "report_parquet": self.report_parquet,
            "manifest": self.manifest, "receipt": self.receipt, "seconds": round(self.seconds, 3),
            "failed_shards": self.failed_shards, "model": self.model, "gate": self.gate,
            "other_counts": self.other, "report_html": self.report_html,
        }  # fmt: skip


def _scope(config: RunConfig) -> dict:
    return {"namespaces": sorted(config.namespaces), "actors": sorted(config.actors)}


def run_key(policy_version: str, cutoff: datetime, scope: dict, mode: str, store: str) -> str:
    """Deterministic: the same policy, cutoff, scope, mode and store give the same run (reruns
    resume); two stores never share a run (``store`` is :func:`store_identity`)."""
    raw = json.dumps(
        {"policy": policy_version, "cutoff": cutoff.isoformat(), "scope": scope, "mode": mode,
         "store": store},
        sort_keys=True,
    )  # fmt: skip
    return hashlib.sha256(raw.encode()).hexdigest()


def remote_state(store_url: str) -> DynamoState | None:
    """The AWS state backend for a run on this store (never for the SQLite store: its file)."""
    from memlife.state import current

    return None if store_url.startswith("sqlite:") else current()


def start_run(config: RunConfig, sink: ReceiptSink | None = None) -> RunContext:
    """Step 1: fix the cutoff and write the run manifest before touching any record."""
    # the gate's evaluation set: the run's own, else the worker's MEMLIFE_EVAL_CASES
    config = replace(config, eval_cases=config.eval_cases or settings().eval_cases or None)
    if config.state:
        from memlife.state import ENV, parse_state_url

        parse_state_url(config.state)  # a bad URL fails here, before the manifest
        os.environ[ENV] = config.state  # child processes and every state part read it
    policy = load_policy(config.policy)
    cutoff = config.now or utcnow()
    scope = _scope(config)
    mode = "retry" if config.retry_only else ("dry_run" if config.dry_run else "apply")
    store_url = resolve_store_url(config.store)
    key = run_key(policy.version, cutoff, scope, mode, store_identity(store_url))
    run_id = f"{cutoff:%Y%m%dT%H%M%SZ}-{mode.replace('_run', '')}-{key[:10]}"
    sink = sink or open_sink(config.receipts)
    started = utcnow()
    # Reports are per attempt: two attempts of one run never write the same file.
    attempt = config.attempt or f"{started:%Y%m%dT%H%M%S%fZ}-{os.getpid()}"
    policy_bytes = resolve_policy_path(config.policy).read_bytes()
    manifest = {
        "run_id": run_id, "run_key": key, "mode": mode, "policy_version": policy.version,
        "policy_sha256": hashlib.sha256(policy_bytes).hexdigest(), "cutoff": cutoff.isoformat(),
        "scope": scope, "store": store_url.split("?")[0], "started_at": started.isoformat(),
        "eval_cases": (config.eval_cases or "").split("?")[0] or None,
        "memlife_version": __version__,
    }  # fmt: skip
    mkey = f"{run_prefix(run_id, cutoff)}/manifest.json"
    sink.put_new(mkey, dumps(manifest))  # False on a rerun: the first manifest stands
    report_dir = memlife_home() / "reports" / run_id / attempt
    if remote_state(store_url) is not None:  # written here, uploaded at close: no local state
        report_dir = Path(tempfile.mkdtemp(prefix=f"memlife-report-{run_id}-"))
    return RunContext(
        config=replace(config, attempt=attempt),
        policy=policy,
        run_id=run_id,
        run_key=key,
        cutoff=cutoff,
        started_at=started,
        report_dir=report_dir,
        manifest_location=sink.location(mkey),
        store_url=store_url,
        sink=sink,
        access_stats=load_access_stats(cutoff, store_url, config.cloudtrail),
    )


def load_access_stats(
    cutoff: datetime, store_url: str | None = None, cloudtrail: str | None = None
) -> dict:
    """Access recency and frequency from the ledger, up to the cutoff (replays stay stable).

    The ledger is on S3 with a remote state backend, else under $MEMLIFE_HOME.
    ``cloudtrail``: AgentCore reads logged by CloudTrail are ingested first (each log file
    once: a rerun reads nothing twice)."""
    from memlife.ledger import AccessLedger

    remote = remote_state(store_url) if store_url else None
    if remote is not None:
        from memlife.state.ledger import S3AccessLedger

        ledger: AccessLedger = S3AccessLedger(remote)
        if cloudtrail:
            ledger.ingest_cloudtrail(cloudtrail)
    else:
        root = memlife_home() / "ledger"
        if cloudtrail:
            AccessLedger(root).ingest_cloudtrail(cloudtrail)
        if not root.exists():
            return {}
        ledger = AccessLedger(root)
    stats = ledger.access_stats()
    return {rid: (t, n) for rid, (t, n) in stats.items() if t <= cutoff}


def list_shards(ctx: RunContext, store: MemoryStore) -> list[Shard]:
    """Step 2: every actor/namespace in scope (namespace globs, actor ids)."""
    actors = set(ctx.config.actors)
    globs = ctx.config.namespaces
    shards = []
    for actor in store.list_actors():
        if actors and actor not in actors:
            continue
        for ns in store.list_namespaces(actor):
            if globs and not any(glob_match(g, ns) for g in globs):
                continue
            shards.append(Shard(actor, ns))
    return shards


def batches(shards: Sequence[Shard], size: int) -> list[list[Shard]]:
    return [list(shards[i : i + size]) for i in range(0, len(shards), size)]


def iter_views(
    store: MemoryStore, shard: Shard, page_size: int, access_stats: dict | None = None
) -> Iterator[list[PlanView]]:
    """Pages of planning views (the store's fast path where it has one), with ledger stats merged."""
    merge = None
    if access_stats:
        from memlife.ledger import merge_into_views

        merge = lambda views: merge_into_views(views, access_stats)  # noqa: E731
    fast = getattr(store, "page_views", None)
    if fast is None:
        native = getattr(store, "native_ids", None)  # AgentCore: CloudTrail names native ids
        for p in iter_shard(store, shard.actor_id, shard.namespace, page_size=page_size):
            views = [plan_view(r) for r in p.records]
            if access_stats and native is not None:
                views = _merge_native(views, native([v.id for v in views]), access_stats)
            yield merge(views) if merge else views
        return
    token: str | None = None
    while True:
        views, token = fast(shard.actor_id, shard.namespace, page_size=page_size, token=token)
        yield merge(views) if merge else views
        if token is None:
            return


def _merge_native(views: list[PlanView], native: dict[str, str], stats: dict) -> list[PlanView]:
    """Credit ledger rows keyed by a store-native id (CloudTrail) to our record ids."""
    aliased = {v.id: stats[native[v.id]] for v in views if v.id in native and native[v.id] in stats}
    if not aliased:
        return views
    from memlife.ledger import merge_into_views

    return merge_into_views(views, aliased)


def plan_shard(
    ctx: RunContext, store: MemoryStore, shard: Shard, planner: Planner | None = None
) -> list[Decision]:
    """Steps 2-5 for one shard: page it, infer missing subjects, then expire/score/group/plan."""
    planner = planner or Planner(ctx.policy, ctx.cutoff)
    pages = list(iter_views(store, shard, ctx.config.page_size, ctx.access_stats))
    hints = shard_hints(ctx, store, shard, pages)
    return planner.plan_shard(pages, hints)


def shard_hints(
    ctx: RunContext, store: MemoryStore, shard: Shard, pages: Sequence[Sequence[PlanView]]
) -> ShardHints:
    """Inferred subjects for records without one (group.infer_subjects; stored as inferred in
    apply runs) and the review queue's disputed records. Reads content only when needed."""
    from memlife.inferred import InferredSubjects, needs_inference
    from memlife.review_queue import ReviewQueue

    write = not ctx.config.dry_run
    reviews = per_store(ctx, store, "reviews", lambda: ReviewQueue.for_store(store, create=write))
    disputed = reviews.disputed(shard.actor_id, shard.namespace)
    views = [v for p in pages for v in p]
    todo = needs_inference(views) if ctx.policy.inference.enabled else []
    if len(todo) < 2:
        return ShardHints(disputed=disputed)
    from memlife.apply.appliers.base import get_many
    from memlife.group import InferenceItem, infer_subjects

    table = per_store(
        ctx, store, "inferred", lambda: InferredSubjects.for_store(store, create=write)
    )
    known = table.get(todo)
    records = [r for r in get_many(store, todo).values()]
    records.sort(key=lambda r: (r.created_at, r.id))
    by_id = {v.id: v for v in views}
    items = [InferenceItem(r.id, r.content, r.created_at.timestamp(), by_id[r.id].norm_sha256,
                           bool(by_id[r.id].negated)) for r in records]  # fmt: skip
    vectors = embeddings_for(ctx, store).get_or_embed(records)
    found = infer_subjects(items, vectors, known=known, inference=ctx.policy.inference,
                           near_duplicate=ctx.policy.grouping.near_duplicate_cosine)  # fmt: skip
    if write:
        table.put(shard.actor_id, shard.namespace, found.new, "nightly")
    return ShardHints(found.subjects, found.statements, found.updates, disputed)


def per_store(ctx: RunContext, store: MemoryStore, name: str, open_: Callable[[], T]) -> T:
    """A table opened once per run and store (the review queue, inferred subjects): a dry
    run on a store without one builds an empty in-memory copy each time (2-3 ms a shard)."""
    cached = ctx.__dict__.get("_" + name)
    if cached is None or cached[0] is not store:
        cached = ctx.__dict__["_" + name] = (store, open_())
    return cached[1]


def embeddings_for(ctx: RunContext, store: MemoryStore) -> EmbeddingCache:
    """One embedding cache per run (process), opened on first use."""
    cache = ctx.__dict__.get("_embeddings")
    if cache is None:
        cache = ctx.__dict__["_embeddings"] = make_embeddings(ctx, store)
    return cache


def queue_reviews(ctx: RunContext, store: MemoryStore, outcomes: Sequence[BatchOutcome]) -> Tally:
    """Review items persist across nights: carry open ones, open new ones by priority up to
    the policy's nightly budget; the rest wait (counted). A dry run only counts."""
    from memlife.review_queue import ReviewQueue

    tally = Tally()
    reviews = [d for o in outcomes for d in o.reviews]
    if ctx.config.retry_only:
        return tally
    queue = ReviewQueue.for_store(store, create=not ctx.config.dry_run)
    tally.counts.update(queue.queue(
        reviews, budget=ctx.policy.review.nightly_budget, run_id=ctx.run_id, at=ctx.cutoff,
        dry_run=ctx.config.dry_run,
    ))  # fmt: skip
    return tally


def make_consolidator(ctx: RunContext) -> Consolidator | None:
    """Anthropic when ANTHROPIC_API_KEY is set, else the extractive one; None if disabled.

    A dry run uses the extractive one unless ``with_model`` (it estimates calls instead)."""
    if not ctx.config.consolidate:
        return None
    paid = not ctx.config.dry_run or ctx.config.with_model
    try:
        if paid and settings().anthropic_api_key:
            from memlife.consolidate.anthropic import AnthropicConsolidator

            return AnthropicConsolidator.from_env(policy=ctx.policy)
        from memlife.consolidate.extractive import ExtractiveConsolidator

        return ExtractiveConsolidator(policy=ctx.policy)
    except ImportError:  # pragma: no cover - during development only
        return None


def make_executor(
    ctx: RunContext, store: MemoryStore, journal: Journal | None = None,
    consolidator: Consolidator | None = None,
) -> Executor:  # fmt: skip
    return Executor(
        run_id=ctx.run_id, run_key=ctx.run_key, policy=ctx.policy, cutoff=ctx.cutoff,
        store=store, sink=ctx.sink,
        # a dry run never journals: it must not even create the journal table
        journal=journal if journal is not None or ctx.config.dry_run else open_journal(store),
        consolidator=consolidator, dry_run=ctx.config.dry_run,
        embeddings=make_embeddings(ctx, store) if consolidator is not None else None,
        evaluated=bool(ctx.config.eval_cases),
    )  # fmt: skip


def make_embeddings(ctx: RunContext, store: MemoryStore) -> EmbeddingCache:
    """The per-record embedding cache: in the store's file for apply runs; a dry run keeps
    its own file so that it leaves the store file byte-identical."""
    if ctx.config.dry_run and getattr(store, "connection", None) is not None:
        return EmbeddingCache(path=memlife_home() / "embeddings.db")
    return EmbeddingCache.for_store(store)


def _deletions(ctx: RunContext, decisions: Sequence[Decision], tally: Tally) -> list[DeleteItem]:
    """Delete decisions in enforced namespaces; the rest are proposals, recorded as not deleted."""
    items = []
    for d in decisions:
        if d.action in DELETE_ACTIONS:
            if ctx.policy.deletion_enforced(d.namespace):
                items.append(DeleteItem(d.id, d.actor_id, d.namespace,
                                        tuple(r.value for r in d.reasons), d.content_sha256))  # fmt: skip
            else:
                tally.ids_not_deleted.append({"id": d.id, "reason": "NOT_ENFORCED"})
                tally.counts["proposed_deletions"] += 1
        elif d.action is Action.hold and Reason.DELETE_DEFERRED in d.reasons:
            tally.ids_not_deleted.append({"id": d.id, "reason": "LEGAL_HOLD"})
    return items


def process_batch(
    ctx: RunContext,
    store: MemoryStore,
    shards: Sequence[Shard],
    report: ReportWriter,
    executor: Executor | None = None,
) -> BatchOutcome:
    """Plan a batch of shards, report their decisions, stage their consolidations and
    deletions. Nothing is written to the store here: the gate looks first (commit_run).

    A failing shard is recorded and skipped; the other shards go on.
    """
    out = BatchOutcome()
    from memlife.consolidate.extractive import ExtractiveConsolidator

    # a model judges possible updates (duplicate / update / complement); offline: review
    c = executor.consolidator if executor is not None else None
    model = c is not None and not isinstance(c, ExtractiveConsolidator)
    planner = Planner(ctx.policy, ctx.cutoff, model_decides=model)
    for shard in shards:
        try:
            decisions = plan_shard(ctx, store, shard, planner)
            report.write(decisions)
            out.reviews += [d for d in decisions if d.action is Action.review]
            if executor is not None:
                out.staged += executor.stage_shard(decisions, out.tally)
            if not ctx.config.dry_run or ctx.config.eval_cases:  # deletes, or the gate's candidates
                out.deletions += _deletions(ctx, decisions, out.tally)
        except (StoreError, OSError, ValueError) as exc:
            code = getattr(exc, "code", type(exc).__name__)
            out.failed_shards.append({"shard": str(shard), "code": code})
            continue
        out.counts.update(str(d.action) for d in decisions)
        out.records += len(decisions)
        out.shards += 1
        progress.advance(len(decisions))
    return out


def open_report(ctx: RunContext) -> ReportWriter:
    return ReportWriter(ctx.report_dir)


GateFn = Callable[[RunContext, MemoryStore, Sequence[DeleteItem]], dict]


def _obligation(item: DeleteItem) -> bool:
    from memlife.gate import OBLIGATIONS

    return any(r in OBLIGATIONS for r in item.reasons)


def ungated(
    ctx: RunContext, outcomes: Sequence[BatchOutcome]
) -> tuple[list[DeleteItem], list[StagedGroup]]:
    """What a run without an evaluation set must withhold (policy gate.required): every
    judgement in an enforced namespace: deletions other than obligations (hard expiry, a
    user's forget), and consolidations. Obligations go ahead."""
    if ctx.config.eval_cases or not ctx.policy.gate.required:
        return [], []
    items = [i for o in outcomes for i in o.deletions if not _obligation(i)]
    groups = [g for o in outcomes for g in o.staged if ctx.policy.deletion_enforced(g.shard[1])]
    return items, groups


def run_gate(ctx: RunContext, store: MemoryStore, outcomes: Sequence[BatchOutcome]) -> dict:
    """Step 8: the before/after regression gate on everything the run staged."""
    from memlife import gate

    if not ctx.config.eval_cases:
        items, groups = ungated(ctx, outcomes)
        # apply runs withhold such groups before staging them (groups.withheld_by_gate)
        early = sum(o.tally.counts.get("gate_withheld_groups", 0) for o in outcomes)
        return gate.not_configured(ctx.policy.gate, len(items), len(groups) + early)
    staged = [g for o in outcomes for g in o.staged]
    return gate.evaluate_changes(
        ctx, store, [i for o in outcomes for i in o.deletions],
        superseded=[rid for g in staged for rid in g.superseded_ids],
        replacements=[g.replacement for g in staged],
        cache=make_embeddings(ctx, store) if ctx.config.dry_run else None,
    )  # fmt: skip


def gate_line(result: dict) -> str | None:
    """One line for the operator: the gate's verdict, the case or gate, figures, quarantined."""
    g = result.get("gate")
    if not g:
        return None
    if not g.get("configured", True):
        if not g.get("required"):
            return "gate: not configured (not required by the policy)"
        if result.get("mode") == "dry_run":
            return ("gate: not configured (GATE_NOT_CONFIGURED): an apply run would withhold every "
                    "consolidation and judgement deletion in enforced namespaces; see `memlife eval init`")  # fmt: skip
        return (f"gate: not configured (GATE_NOT_CONFIGURED): {g['withheld_deletions']} deletions and "
                f"{g['withheld_groups']} consolidations withheld in enforced namespaces; write a set "
                "with `memlife eval init` and pass --eval-cases")  # fmt: skip
    figures = []
    for name, v in g.get("gates", {}).items():
        if v.get("result", "pass") != "pass":
            op = "<" if name in ("must_retain_recall", "aggregate_score") else ">"
            figures.append(f"{name} {v['value']:.3f} {op} {v['threshold']:.3f} "
                           f"(before {v['before']:.3f}, {v['result']})")  # fmt: skip
    if g.get("blocked"):
        cases = g.get("high_impact_failed") or g.get("regressed_cases") or g.get("failed_cases")
        quarantined = result.get("lifecycle", {}).get("quarantined", 0)
        held = [p for p, k in (("deletions", "deletions_blocked"), ("supersedes", "supersedes_blocked"))
                if g.get(k)]  # fmt: skip
        verb = "would block" if result.get("mode") == "dry_run" else "BLOCKED"
        return (f"gate: {verb} ({', '.join(g['reasons'])}) case {', '.join(cases or ['-'])}; "
                f"{'; '.join(figures) or 'gates within thresholds'}; held: {', '.join(held) or 'nothing'};"
                f" {quarantined} records quarantined")  # fmt: skip
    agg = g.get("gates", {}).get("aggregate_score", {}).get("value")
    head = f"gate: {g.get('status', 'pass')} ({g.get('cases', 0)} cases"
    head += f", aggregate_score {agg:.3f})" if agg is not None else ")"
    return head + (": " + "; ".join(figures) if figures else "")


def gate_verdict(gate: dict | None) -> str:
    """``blocked`` / ``warn`` / ``passed`` / ``not configured`` / ``not run``: in a word
    (the report page's words, decided in one place)."""
    from memlife.report_html import gate_text

    return gate_text(gate)[0]


def as_link(location: str) -> str:
    """A location from a sink as a URL (a local path becomes file://)."""
    return location if "://" in location else Path(location).resolve().as_uri()


def markdown_summary(summary: RunSummary) -> str:
    from memlife.report_html import would_change

    lines = [f"# memlife {summary.mode} `{summary.run_id}`", "",
             f"status **{summary.status}**, policy `{summary.policy_version}`, cutoff {summary.cutoff}, "
             f"regression gate **{gate_verdict(summary.gate)}**", ""]  # fmt: skip
    if summary.dry_run:  # nothing changed: say what an apply run would change
        lines += ["| an apply run would | records |", "|---|---:|"]
        lines += [f"| {k} | {v:,} |" for k, v in would_change(summary.as_json())]
        lines += ["", "| planned action | records |", "|---|---:|"]
        lines += [f"| {k} | {v:,} |" for k, v in summary.counts.items()]
    else:
        lines += ["| count | records |", "|---|---:|"]
        lines += [f"| {k} | {v:,} |" for k, v in summary.lifecycle.items()]
    if summary.failed_shards:
        lines += ["", "Failed shards: " + ", ".join(s["shard"] for s in summary.failed_shards)]
    line = gate_line(summary.as_json())
    if line:
        lines += ["", line]
    if summary.receipt:
        lines += ["", f"Receipt: `{summary.receipt}`"]
    if summary.report_html:
        lines += ["", f"[Report page]({as_link(summary.report_html)})"]
    return "\n".join(lines)


def commit_run(
    ctx: RunContext, executor: Executor | None, outcomes: Sequence[BatchOutcome], gate: dict | None
) -> Tally:
    """Step 9: commit what the gate allowed. Staged groups first (replacement written and
    receipted, then its supersedes), then deletions; the blocked part is held back:
    supersedes stay undone (replacements never written), deletions go to quarantine.
    Without an evaluation set (gate required) judgements in enforced namespaces wait."""
    tally = Tally()
    if executor is None or ctx.config.dry_run:
        return tally
    gate = gate or {}
    configured = bool(gate) and gate.get("configured", True)
    held_items, held_groups = ([], []) if configured else ungated(ctx, outcomes)
    held_ids = {id(g) for g in held_groups}
    for o in outcomes:
        for g in o.staged:
            if (
                gate.get("supersedes_blocked")
                or gate.get("blocked")
                and "supersedes_blocked" not in gate
            ):
                tally.counts["gate_blocked_groups"] += 1
            elif id(g) in held_ids:
                tally.counts["gate_withheld_groups"] += 1
            else:
                executor.commit_group(g, tally)
    checkpoint("after_commit_groups")
    held = {i.id for i in held_items}
    items = [i for o in outcomes for i in o.deletions]
    if gate.get("deletions_blocked", gate.get("blocked")):
        executor.quarantine(items, tally, "GATE_BLOCKED")
        return tally
    for i in items:
        if i.id in held:
            tally.ids_not_deleted.append({"id": i.id, "reason": "GATE_NOT_CONFIGURED"})
            tally.counts["gate_withheld_deletions"] += 1
    executor.delete([i for i in items if i.id not in held], tally)
    return tally


commit_deletions = commit_run  # the earlier name (flows, callers)


LIFECYCLE = ("processed", "retained", "consolidated", "superseded", "deleted", "quarantined",
             "reviewed", "held", "failed")  # fmt: skip


def finish_run(
    ctx: RunContext,
    outcomes: Sequence[BatchOutcome],
    report: ReportWriter,
    t0: float,
    *,
    tallies: Sequence[Tally] = (),
    journal: Journal | None = None,
    gate: dict | None = None,
    shards_total: int | None = None,
) -> RunSummary:
    """Step 10: counts, operations.parquet and the run receipt (create-only)."""
    remote = remote_state(ctx.store_url)
    merged: list[str] = []
    if remote is not None:  # child batches on other machines left their parts on S3
        from memlife.state.reports import download_parts

        merged = download_parts(
            remote, ctx.run_id, ctx.cutoff, ctx.config.attempt, report.folder / "parts"
        )
    report.merge_parts(report.folder / "parts")  # batches planned in other processes or flows
    report.close()
    report_paths = (str(report.jsonl_path), str(report.parquet_path))
    if remote is not None:
        from memlife.state.reports import upload_report

        report_paths = upload_report(
            remote,
            ctx.run_id,
            ctx.cutoff,
            ctx.config.attempt,
            report.jsonl_path,
            report.parquet_path,
            merged,
        )
    counts: Counter = Counter()
    tally = Tally()
    for o in outcomes:
        counts.update(o.counts)
        tally.merge(o.tally)
    for t in tallies:
        tally.merge(t)
    failed_shards = [s for o in outcomes for s in o.failed_shards]
    failed_shards += [{"shard": f"{s['actor_id']}:{s['namespace']}", "code": s["code"]}
                      for s in tally.stopped_shards]  # fmt: skip
    records = sum(o.records for o in outcomes)
    lifecycle = {
        "processed": records, "retained": counts.get("retain", 0),
        "consolidated": tally.counts.get("consolidated", 0),
        "superseded": tally.counts.get("superseded", 0),
        "deleted": tally.counts.get("deleted", 0) + tally.counts.get("already_absent", 0),
        "quarantined": tally.counts.get("quarantined", 0), "reviewed": counts.get("review", 0),
        "held": counts.get("hold", 0), "failed": tally.counts.get("failed", 0),
    }  # fmt: skip
    receipt_failures = tally.counts.get("receipt_failed", 0)
    journal_ops = (
        journal.by_run(ctx.run_id) if journal is not None and not ctx.config.dry_run else []
    )
    jc: dict[str, int] = {}
    if journal is not None and not ctx.config.dry_run:
        # This run's changes over all its attempts come from the journal (a rerun after a
        # crash reports what the killed attempt did too); the tally only adds the retry
        # queue's work on earlier runs' operations.
        jc = journal_counts(journal_ops)
        lifecycle.update(lifecycle_from_journal(jc))
        receipt_failures = jc.get("unreceipted", 0) + sum(
            1 for f in tally.failures
            if f.get("code") == "RECEIPT_WRITE_FAILED" and f.get("run_id") != ctx.run_id
        )  # fmt: skip
    queue_failed = sum(1 for f in tally.failures
                       if f.get("run_id") not in (None, ctx.run_id) and f.get("code") != "RECEIPT_WRITE_FAILED")  # fmt: skip
    status = "success"
    if failed_shards or lifecycle["failed"] or receipt_failures or queue_failed:
        status = "partial_failure"
    if gate is not None and gate.get("blocked") and not ctx.config.dry_run:
        status = "blocked"  # the gate held the commit back: not a success, whatever else went on
    retries = [f["next_retry_at"] for f in tally.failures if f.get("next_retry_at")]
    summary = RunSummary(
        run_id=ctx.run_id,
        policy_version=ctx.policy.version,
        cutoff=ctx.cutoff.isoformat(),
        mode=ctx.mode,
        status=status,
        counts={a.value: counts.get(a.value, 0) for a in Action},
        lifecycle=lifecycle,
        records=records,
        shards=sum(o.shards for o in outcomes),
        report=report_paths[0],
        report_parquet=report_paths[1],
        manifest=ctx.manifest_location,
        receipt=None,
        seconds=time.perf_counter() - t0,
        failed_shards=failed_shards,
        model={
            "calls": tally.model_calls,
            "input_tokens": tally.input_tokens,
            "output_tokens": tally.output_tokens,
            "rejections": dict(tally.rejections),
            **(
                {
                    "estimated_calls": tally.counts.get("estimated_model_calls", 0),
                    "estimated_input_tokens": tally.counts.get("estimated_input_tokens", 0),
                }
                if ctx.config.dry_run
                else {}
            ),
        },
        gate=gate,
        other={k: v for k, v in tally.counts.items() if k not in lifecycle},
    )
    receipt = {
        "run_id": ctx.run_id, "mode": ctx.mode, "status": status,
        "policy_version": ctx.policy.version, "cutoff": ctx.cutoff.isoformat(),
        "scope": _scope(ctx.config), "started_at": ctx.started_at.isoformat(),
        "finished_at": utcnow().isoformat(),
        "pagination_complete": not failed_shards,
        "shards": {"total": shards_total if shards_total is not None else summary.shards,
                   "completed": summary.shards, "failed": failed_shards},
        "records_found": records, "counts": lifecycle, "planned": summary.counts,
        "other_counts": {k: v for k, v in tally.counts.items() if k not in lifecycle},
        "ids_not_deleted": tally.ids_not_deleted, "failures": tally.failures,
        "next_retry_at": min(retries) if retries else None, "model": summary.model,
        "gate": gate, "receipt_failures": receipt_failures,
        "lease_taken_over": ctx.lease_taken_over, "journal_counts": jc,
        "retry_queue_failed": queue_failed,
    }  # fmt: skip
    try:
        # manifest first (start_run), then this attempt's Parquet, the receipt last, sealed
        receipt["evidence"] = seal(ctx.sink, ctx.prefix, journal_ops)
        if journal is not None and not ctx.config.dry_run:
            ops = journal_ops
            if ops:
                write_operations(ctx.sink, ops, run_id=ctx.run_id, cutoff=ctx.cutoff, mode=ctx.mode)
        rkey = write_run_receipt(ctx, sealed(receipt))
        summary.receipt = ctx.sink.location(rkey) if rkey else None
    except ReceiptWriteError:
        summary.status = "partial_failure" if status == "success" else status
    summary.report_html = write_report_page(ctx, summary)
    publish_counts(lifecycle, namespace=ctx.config.metrics_namespace, mode=ctx.mode,
                   policy_version=ctx.policy.version, timestamp=ctx.cutoff)  # fmt: skip
    return summary


def write_report_page(ctx: RunContext, summary: RunSummary) -> str | None:
    """The HTML report beside the receipts; a page that cannot be written fails nothing."""
    from memlife.report_html import write_run_report

    try:
        return write_run_report(ctx.sink, ctx.prefix, summary.as_json())
    except Exception as exc:  # noqa: BLE001 - the page is a view of the evidence, not evidence
        log.warning("run report page not written: %s", type(exc).__name__)
        return None


def write_failure_receipt(ctx: RunContext, error: BaseException) -> str | None:
    """The run could not finish: say so, with the error type only (never a message with data)."""
    receipt = {
        "run_id": ctx.run_id, "mode": ctx.mode, "status": "failure",
        "policy_version": ctx.policy.version, "cutoff": ctx.cutoff.isoformat(),
        "scope": _scope(ctx.config), "started_at": ctx.started_at.isoformat(),
        "finished_at": utcnow().isoformat(), "pagination_complete": False,
        "error": type(error).__name__,
    }  # fmt: skip
    try:
        key = write_run_receipt(ctx, receipt)
        return ctx.sink.location(key) if key else None
    except ReceiptWriteError:
        return None


def write_run_receipt(ctx: RunContext, receipt: dict) -> str | None:
    """Create-only: receipt.json, or receipt.N.json when a rerun completes an earlier failure.

    Evidence is never overwritten. A rerun that finds a receipt of a completed attempt
    (success / partial_failure) moves on without writing another.
    """
    for n in range(1, 1000):
        key = f"{ctx.prefix}/receipt.json" if n == 1 else f"{ctx.prefix}/receipt.{n}.json"
        if ctx.sink.put_new(key, dumps(receipt)):
            return key
        existing = json.loads(ctx.sink.get(key) or b"{}")
        done = ("success", "partial_failure", "blocked")
        if existing.get("status") in done and receipt["status"] != "failure":
            return key  # an earlier attempt of this same run already completed
    return None


def take_lease(config: RunConfig, store: MemoryStore) -> Lease | None:
    """An apply or retry run is the store's one lifecycle writer (memlife/lease.py); it
    takes the lease before its manifest. A dry run writes nothing and takes none."""
    if config.dry_run:
        return None
    return lease_for_store(store, "starting", "retry" if config.retry_only else "nightly")


def run_local(
    config: RunConfig, gate: GateFn | None = None, consolidator: Consolidator | None = None
) -> RunSummary:
    """The whole run in-process without Prefect (tests, benchmarks, --engine local)."""
    t0 = time.perf_counter()
    store = open_store(config.store)
    try:
        lease = take_lease(config, store)
    except BaseException:
        store.close()
        raise
    try:
        ctx = start_run(config)
    except BaseException:
        if lease is not None:
            lease.release()
        store.close()
        raise
    if lease is not None:
        lease.bind(ctx.run_id)
        ctx.lease_taken_over = lease.taken_over
    try:
        executor = None
        journal = None
        tallies: list[Tally] = []
        if not config.dry_run or config.consolidate:
            journal = open_journal(store) if not config.dry_run else None
            executor = make_executor(ctx, store, journal, consolidator or make_consolidator(ctx))
        if executor is not None and not config.dry_run:
            pre = Tally()
            executor.resume_due(pre)
            tallies.append(pre)
        report = open_report(ctx)
        if config.retry_only:
            return finish_run(ctx, [], report, t0, tallies=tallies, journal=journal)
        progress.phase("listing shards")
        shards = list_shards(ctx, store)
        progress.phase(f"planning {len(shards):,} shards", records_in_scope(store, config))
        workers = planning_workers(config, len(shards))
        if workers > 1:
            outcomes = plan_in_processes(ctx, shards, workers)
        else:
            outcomes = [process_batch(ctx, store, b, report, executor)
                        for b in batches(shards, config.shards_per_batch)]  # fmt: skip
        checkpoint("after_stage")  # staged: nothing written yet
        progress.phase("regression gate" if ctx.config.eval_cases else "finishing")
        if gate is not None:
            verdict = gate(ctx, store, [i for o in outcomes for i in o.deletions])
        else:
            verdict = run_gate(ctx, store, outcomes)
        checkpoint("after_gate")  # verdict known: nothing committed yet
        if executor is not None:
            tallies.append(commit_run(ctx, executor, outcomes, verdict))
        tallies.append(queue_reviews(ctx, store, outcomes))
        return finish_run(ctx, outcomes, report, t0, tallies=tallies, journal=journal,
                          gate=verdict, shards_total=len(shards))  # fmt: skip
    except Exception as exc:
        write_failure_receipt(ctx, exc)
        raise
    finally:
        if lease is not None:
            lease.release()
        store.close()


def records_in_scope(store: MemoryStore, config: RunConfig) -> int | None:
    """Records an unscoped run will plan, when the store can count them cheaply (SQLite)."""
    count = getattr(store, "count", None)
    if count is None or config.namespaces or config.actors:
        return None
    return int(count())


def process_isolated(
    config: RunConfig,
    shards: Sequence[Shard],
    part: str,
    wrap: Callable[[Consolidator | None], Consolidator | None] | None = None,
) -> BatchOutcome:
    """A shard batch with its own store, journal, executor and report part.

    ``config.now`` must be the parent's cutoff (``config_params(config, ctx)``): the run
    id, run key and so every operation id then match the parent's. The decisions go to
    ``reports/<run_id>/<attempt>/parts/<part>/`` (the parent's report holds the in-process batches).
    """
    if config.now is None:
        raise ValueError("an isolated batch needs the parent's cutoff (config.now)")
    ctx = start_run(config)  # the manifest exists already: create-only, the first one stands
    store = open_store(config.store)
    try:
        journal = None if config.dry_run else open_journal(store)
        consolidator = make_consolidator(ctx)
        if wrap is not None:
            consolidator = wrap(consolidator)
        executor = make_executor(ctx, store, journal, consolidator)
        report = ReportWriter(ctx.report_dir / "parts" / part)
        try:
            outcome = process_batch(ctx, store, shards, report, executor)
            remote = remote_state(ctx.store_url)
            if remote is not None:  # the parent reads it from S3 (fanout.child_outcome)
                from memlife.state.reports import put_outcome

                put_outcome(remote, ctx.run_id, ctx.cutoff, ctx.config.attempt, part, outcome)
            return outcome
        finally:
            report.close()
            remote = remote_state(ctx.store_url)
            if remote is not None:  # the parent may run on another machine: the part goes to S3
                from memlife.state.reports import upload_part

                upload_part(
                    remote, ctx.run_id, ctx.cutoff, ctx.config.attempt, part, report.jsonl_path
                )
                shutil.rmtree(ctx.report_dir, ignore_errors=True)
    finally:
        store.close()


def planning_workers(config: RunConfig, shards: int) -> int:
    """Processes for planning: dry runs only (apply runs write through one journal)."""
    if not config.dry_run or config.retry_only:
        return 1
    wanted = config.workers or min(4, os.cpu_count() or 1)
    return max(1, min(wanted, shards // 50))  # small runs are not worth a process


def plan_in_processes(ctx: RunContext, shards: Sequence[Shard], workers: int) -> list[BatchOutcome]:
    """Dry-run planning fanned out over processes, each with its own store connection and
    report part (merged by finish_run). Same run id and cutoff in every process."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    params = replace(ctx.config, now=ctx.cutoff, workers=1, attempt=ctx.config.attempt)
    parts = batches(shards, max(1, -(-len(shards) // (workers * 4))))
    # fork is cheap and safe here: no model or thread pool is loaded before planning starts
    method = "fork" if not ctx.config.consolidate else "spawn"
    outcomes: list[BatchOutcome] = []
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
        futures = [
            pool.submit(process_isolated, params, part, f"{i:05d}") for i, part in enumerate(parts)
        ]
        for future in as_completed(futures):
            outcome = future.result()
            progress.advance(outcome.records)
            outcomes.append(outcome)
    return outcomes


def parse_now(value: str | None) -> datetime | None:
    return parse_time(value) if value else None
