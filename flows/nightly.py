"""The nightly lifecycle flow: thin Prefect wiring over memlife.pipeline. No logic here."""

from __future__ import annotations

import time

from memlife.prefect_env import configure

configure()

from prefect import flow, task  # noqa: E402
from prefect.artifacts import create_markdown_artifact, create_table_artifact  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from memlife import pipeline  # noqa: E402
from memlife.apply import Tally  # noqa: E402
from memlife.journal import open_journal  # noqa: E402
from memlife.stores import open_store  # noqa: E402

_task = dict(cache_policy=NO_CACHE, persist_result=False)

start_run = task(name="start-run", **_task)(pipeline.start_run)
list_shards = task(name="list-shards", **_task)(pipeline.list_shards)
process_batch = task(name="process-shards", **_task)(pipeline.process_batch)
run_gate = task(name="regression-gate", **_task)(pipeline.run_gate)
commit_deletions = task(name="commit-deletions", **_task)(pipeline.commit_deletions)
finish_run = task(name="finish-run", **_task)(pipeline.finish_run)


@task(name="retry-queue", **_task)
def resume_due(executor) -> Tally:
    tally = Tally()
    executor.resume_due(tally)
    return tally


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
    consolidate: bool = True,
    retry_only: bool = False,
    eval_cases: str | None = None,
) -> dict:
    t0 = time.perf_counter()
    config = pipeline.RunConfig(
        dry_run=dry_run, namespaces=tuple(namespaces or ()), actors=tuple(actors or ()),
        now=pipeline.parse_now(now), policy=policy, store=store, receipts=receipts,
        page_size=page_size, shards_per_batch=shards_per_batch, consolidate=consolidate,
        retry_only=retry_only, eval_cases=eval_cases,
    )  # fmt: skip
    ctx = start_run(config)
    db = open_store(config.store)
    try:
        journal = None if dry_run else open_journal(db)
        executor = pipeline.make_executor(ctx, db, journal, pipeline.make_consolidator(ctx))
        tallies = [] if dry_run else [resume_due(executor)]
        report = pipeline.open_report(ctx)
        shards = [] if retry_only else list_shards(ctx, db)
        outcomes = [
            process_batch(ctx, db, batch, report, executor)
            for batch in pipeline.batches(shards, config.shards_per_batch)
        ]
        verdict = run_gate(ctx, db, outcomes)
        tallies.append(commit_deletions(ctx, executor, outcomes, verdict))
        summary = finish_run(ctx, outcomes, report, t0, tallies=tallies, journal=journal,
                             gate=verdict, shards_total=len(shards))  # fmt: skip
    except Exception as exc:
        pipeline.write_failure_receipt(ctx, exc)
        raise
    finally:
        db.close()
    result = summary.as_json()
    create_table_artifact(
        key="memlife-counts",
        table=[{"count": k, "records": v} for k, v in {**summary.lifecycle, **summary.counts}.items()],
        description=f"memlife {summary.mode} {summary.run_id}: {summary.status}",
    )
    create_markdown_artifact(key="memlife-summary", markdown=pipeline.markdown_summary(summary))
    return result
