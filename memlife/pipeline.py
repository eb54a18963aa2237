"""The nightly run as plain functions: the Prefect flow (flows/nightly.py) only wires them.

Order (DESIGN.md): start (manifest first) -> list shards -> per shard: page, expire,
score, group, plan -> report -> finish. A shard is one actor + namespace; shards are
processed in batches so orchestration overhead stays small at 1M records, and a shard
is never split, so no decision ever mixes actors or namespaces.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from memlife import __version__, progress
from memlife.audit import ReceiptSink, dumps, open_sink, run_prefix
from memlife.model import PlanView, parse_time, plan_view, utcnow
from memlife.plan import Action, Decision, Planner
from memlife.policy import Policy, load_policy, resolve_policy_path
from memlife.report import ReportWriter
from memlife.stores import MemoryStore, iter_shard, open_store, resolve_store_url


def memlife_home() -> Path:
    return Path(os.environ.get("MEMLIFE_HOME", ".memlife"))


@dataclass(frozen=True)
class Shard:
    actor_id: str
    namespace: str


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

    @property
    def prefix(self) -> str:
        return run_prefix(self.run_id, self.cutoff)


@dataclass
class BatchOutcome:
    counts: Counter = field(default_factory=Counter)
    records: int = 0
    shards: int = 0
    failed_shards: list[str] = field(default_factory=list)


@dataclass
class RunSummary:
    run_id: str
    policy_version: str
    cutoff: str
    dry_run: bool
    counts: dict[str, int]
    records: int
    shards: int
    report: str
    report_parquet: str
    manifest: str
    seconds: float
    failed_shards: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {
            "run_id": self.run_id,
            "policy_version": self.policy_version,
            "cutoff": self.cutoff,
            "dry_run": self.dry_run,
            "counts": self.counts,
            "records": self.records,
            "shards": self.shards,
            "report": self.report,
            "report_parquet": self.report_parquet,
            "manifest": self.manifest,
            "seconds": round(self.seconds, 3),
            "failed_shards": self.failed_shards,
        }


def _scope(config: RunConfig) -> dict:
    return {"namespaces": sorted(config.namespaces), "actors": sorted(config.actors)}


def run_key(policy_version: str, cutoff: datetime, scope: dict, dry_run: bool) -> str:
    """Deterministic: the same policy, cutoff, scope and mode give the same run (reruns resume)."""
    raw = json.dumps(
        {"policy": policy_version, "cutoff": cutoff.isoformat(), "scope": scope, "dry": dry_run},
        sort_keys=True,
    )
    return hashlib.sha256(raw.encode()).hexdigest()


def start_run(config: RunConfig, sink: ReceiptSink | None = None) -> RunContext:
    """Step 1: fix the cutoff and write the run manifest before touching any record."""
    policy = load_policy(config.policy)
    cutoff = config.now or utcnow()
    scope = _scope(config)
    key = run_key(policy.version, cutoff, scope, config.dry_run)
    run_id = f"{cutoff:%Y%m%dT%H%M%SZ}-{'dry' if config.dry_run else 'apply'}-{key[:10]}"
    sink = sink or open_sink(config.receipts)
    store_url = resolve_store_url(config.store)
    started = utcnow()
    manifest = {
        "run_id": run_id,
        "run_key": key,
        "mode": "dry_run" if config.dry_run else "apply",
        "policy_version": policy.version,
        "policy_sha256": hashlib.sha256(resolve_policy_path(config.policy).read_bytes()).hexdigest(),
        "cutoff": cutoff.isoformat(),
        "scope": scope,
        "store": store_url.split("?")[0],
        "started_at": started.isoformat(),
        "memlife_version": __version__,
    }
    mkey = f"{run_prefix(run_id, cutoff)}/manifest.json"
    sink.put_new(mkey, dumps(manifest))  # False on a rerun: the first manifest stands
    return RunContext(
        config=config, policy=policy, run_id=run_id, run_key=key, cutoff=cutoff,
        started_at=started, report_dir=memlife_home() / "reports" / run_id,
        manifest_location=sink.location(mkey), store_url=store_url,
    )  # fmt: skip


def list_shards(ctx: RunContext, store: MemoryStore) -> list[Shard]:
    """Step 2: every actor/namespace in scope (namespace globs, actor ids)."""
    actors = set(ctx.config.actors)
    globs = ctx.config.namespaces
    shards = []
    for actor in store.list_actors():
        if actors and actor not in actors:
            continue
        for ns in store.list_namespaces(actor):
            if globs and not any(fnmatch.fnmatchcase(ns, g) for g in globs):
                continue
            shards.append(Shard(actor, ns))
    return shards


def batches(shards: Sequence[Shard], size: int) -> list[list[Shard]]:
    return [list(shards[i : i + size]) for i in range(0, len(shards), size)]


def plan_shard(
    ctx: RunContext, store: MemoryStore, shard: Shard, planner: Planner | None = None
) -> list[Decision]:
    """Steps 2-5 for one shard: page it, then expire/score/group/plan (pure)."""
    planner = planner or Planner(ctx.policy, ctx.cutoff)
    return planner.plan_shard(iter_views(store, shard, ctx.config.page_size))


def iter_views(store: MemoryStore, shard: Shard, page_size: int) -> Iterator[list[PlanView]]:
    """Pages of planning views: the store's fast path where it has one, else via records."""
    fast = getattr(store, "page_views", None)
    if fast is None:
        for p in iter_shard(store, shard.actor_id, shard.namespace, page_size=page_size):
            yield [plan_view(r) for r in p.records]
        return
    token: str | None = None
    while True:
        views, token = fast(shard.actor_id, shard.namespace, page_size=page_size, token=token)
        yield views
        if token is None:
            return


def plan_batch(
    ctx: RunContext, store: MemoryStore, shards: Sequence[Shard], report: ReportWriter
) -> BatchOutcome:
    """Plan a batch of shards and append their decisions to the report."""
    out = BatchOutcome()
    planner = Planner(ctx.policy, ctx.cutoff)
    for shard in shards:
        decisions = plan_shard(ctx, store, shard, planner)
        report.write(decisions)
        out.counts.update(d.action.value for d in decisions)
        out.records += len(decisions)
        out.shards += 1
        progress.advance(len(decisions))
    return out


def open_report(ctx: RunContext) -> ReportWriter:
    return ReportWriter(ctx.report_dir)


def finish_run(
    ctx: RunContext, outcomes: Sequence[BatchOutcome], report: ReportWriter, t0: float
) -> RunSummary:
    report.close()
    counts: Counter = Counter()
    for o in outcomes:
        counts.update(o.counts)
    ordered = {a.value: counts.get(a.value, 0) for a in Action}
    return RunSummary(
        run_id=ctx.run_id, policy_version=ctx.policy.version, cutoff=ctx.cutoff.isoformat(),
        dry_run=ctx.config.dry_run, counts=ordered, records=sum(o.records for o in outcomes),
        shards=sum(o.shards for o in outcomes), report=str(report.jsonl_path),
        report_parquet=str(report.parquet_path), manifest=ctx.manifest_location,
        seconds=time.perf_counter() - t0,
        failed_shards=[s for o in outcomes for s in o.failed_shards],
    )  # fmt: skip


def run_local(config: RunConfig, progress: Iterator | None = None) -> RunSummary:
    """The whole run in-process without Prefect (tests, benchmarks, --engine local)."""
    t0 = time.perf_counter()
    ctx = start_run(config)
    store = open_store(config.store)
    try:
        shards = list_shards(ctx, store)
        report = open_report(ctx)
        outcomes = [plan_batch(ctx, store, b, report) for b in batches(shards, config.shards_per_batch)]
        return finish_run(ctx, outcomes, report, t0)
    finally:
        store.close()


def parse_now(value: str | None) -> datetime | None:
    return parse_time(value) if value else None
