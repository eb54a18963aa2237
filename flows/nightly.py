"""The nightly lifecycle flow: thin Prefect wiring over memlife.pipeline. No logic here."""

from __future__ import annotations

import time

from memlife.prefect_env import configure

configure()

from prefect import flow, task  # noqa: E402
from prefect.artifacts import create_table_artifact  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from memlife import pipeline  # noqa: E402
from memlife.stores import open_store  # noqa: E402

_task = dict(cache_policy=NO_CACHE, persist_result=False)

start_run = task(name="start-run", **_task)(pipeline.start_run)
list_shards = task(name="list-shards", **_task)(pipeline.list_shards)
plan_batch = task(name="plan-shards", **_task)(pipeline.plan_batch)


@flow(name="memlife-nightly", persist_result=False, validate_parameters=True)
def nightly(
    dry_run: bool = True,
    namespaces: list[str] | None = None,
    actors: list[str] | None = None,
    now: str | None = None,
    policy: str = "policies/default.yaml",
    store: str | None = None,
    receipts: str | None = None,
    page_size: int = 500,
    shards_per_batch: int = 100,
) -> dict:
    t0 = time.perf_counter()
    config = pipeline.RunConfig(
        dry_run=dry_run, namespaces=tuple(namespaces or ()), actors=tuple(actors or ()),
        now=pipeline.parse_now(now), policy=policy, store=store, receipts=receipts,
        page_size=page_size, shards_per_batch=shards_per_batch,
    )  # fmt: skip
    ctx = start_run(config)
    db = open_store(config.store)
    try:
        shards = list_shards(ctx, db)
        report = pipeline.open_report(ctx)
        outcomes = [
            plan_batch(ctx, db, batch, report)
            for batch in pipeline.batches(shards, config.shards_per_batch)
        ]
        summary = pipeline.finish_run(ctx, outcomes, report, t0)
    finally:
        db.close()
    create_table_artifact(
        key="memlife-counts",
        table=[{"action": k, "records": v} for k, v in summary.counts.items()],
        description=f"memlife run {summary.run_id} ({'dry run' if dry_run else 'apply'})",
    )
    return summary.as_json()
