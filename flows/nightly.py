"""The nightly lifecycle flow: thin Prefect wiring over memlife.pipeline. No logic here."""

from __future__ import annotations

import time
from typing import Literal

from memlife.prefect_env import configure

configure()

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.artifacts import (  # noqa: E402
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.events import emit_event  # noqa: E402

from flows import limits, shard  # noqa: E402
from memlife import fanout, pipeline  # noqa: E402
from memlife.apply import Tally  # noqa: E402
from memlife.journal import open_journal  # noqa: E402
from memlife.stores import open_store  # noqa: E402

_task = dict(cache_policy=NO_CACHE, persist_result=False)

start_run = task(name="start-run", **_task)(pipeline.start_run)
list_shards = task(name="list-shards", **_task)(pipeline.list_shards)
process_batch = shard.process_batch  # the "process-shards" task (name kept for callers)
run_gate = task(name="regression-gate", **_task)(pipeline.run_gate)
commit_run = task(name="commit", **_task)(pipeline.commit_run)
finish_run = task(name="finish-run", **_task)(pipeline.finish_run)
queue_reviews = task(name="queue-reviews", **_task)(pipeline.queue_reviews)


@task(name="retry-queue", **_task)
def resume_due(executor) -> Tally:
    tally = Tally()
    executor.resume_due(tally)
    return tally


def _emit(event: tuple[str, dict, dict] | None) -> None:
    if event is not None:
        name, resource, payload = event
        emit_event(event=name, resource=resource, payload=payload)


@flow(
    name="memlife-nightly",
    persist_result=False,
    validate_parameters=True,
    timeout_seconds=limits.FLOW_TIMEOUT_SECONDS,
)
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
    with_model: bool = False,
    metrics_namespace: str | None = None,
    cloudtrail: str | None = None,
    fan_out: Literal["tasks", "deployments"] = "tasks",
    max_workers: int = 4,
    shard_deployment: str = shard.SHARD_DEPLOYMENT,
) -> dict:
    t0 = time.perf_counter()
    config = pipeline.RunConfig(
        dry_run=dry_run,
        namespaces=tuple(namespaces or ()),
        actors=tuple(actors or ()),
        now=pipeline.parse_now(now),
        policy=policy,
        store=store,
        receipts=receipts,
        page_size=page_size,
        shards_per_batch=shards_per_batch,
        consolidate=consolidate,
        retry_only=retry_only,
        eval_cases=eval_cases,
        with_model=with_model,
        metrics_namespace=metrics_namespace,
        cloudtrail=cloudtrail,
    )  # fmt: skip
    log = get_run_logger()  # the run's log tab: stages and counts, never content
    db = open_store(config.store)
    lease = pipeline.take_lease(config, db)  # one lifecycle writer per store; else LeaseHeld
    try:
        ctx = start_run(config)
    except BaseException:
        if lease is not None:
            lease.release()
        db.close()
        raise
    log.info(
        "run %s: %s, policy %s, cutoff %s",
        ctx.run_id,
        ctx.mode,
        ctx.policy.version,
        ctx.cutoff.isoformat(),
    )
    if lease is not None:
        lease.bind(ctx.run_id)
        ctx.lease_taken_over = lease.taken_over
    try:
        journal = None if dry_run else open_journal(db)
        consolidator = limits.limited(pipeline.make_consolidator(ctx))
        executor = pipeline.make_executor(ctx, db, journal, consolidator)
        tallies = [] if dry_run else [resume_due(executor)]
        report = pipeline.open_report(ctx)
        shards = [] if retry_only else list_shards(ctx, db)
        groups = pipeline.batches(shards, config.shards_per_batch)
        log.info("%d shards (actor + namespace) in %d batches", len(shards), len(groups))
        if fan_out == "deployments":
            outcomes = shard.fan_out_deployments(ctx, config, groups, shard_deployment)
        else:
            outcomes = shard.fan_out_tasks(
                ctx, db, groups, report, executor, max_workers=max_workers
            )
        log.info("planned %d records", sum(o.records for o in outcomes))
        verdict = run_gate(ctx, db, outcomes)  # on everything staged; nothing written yet
        log.info("regression gate: %s", pipeline.gate_verdict(verdict))
        tallies.append(commit_run(ctx, executor, outcomes, verdict))
        tallies.append(queue_reviews(ctx, db, outcomes))
        summary = finish_run(ctx, outcomes, report, t0, tallies=tallies, journal=journal,
                             gate=verdict, shards_total=len(shards))  # fmt: skip
    except BaseException as exc:  # incl. the flow timeout
        log.error("run %s failed: %s", ctx.run_id, type(exc).__name__)
        receipt = pipeline.write_failure_receipt(ctx, exc)
        _emit(fanout.failure_event(ctx, exc, receipt))
        raise
    finally:
        if lease is not None:
            lease.release()
        db.close()
    result = summary.as_json()
    log.info(
        "run %s: %s; %s",
        summary.run_id,
        summary.status,
        ", ".join(f"{k} {v}" for k, v in summary.lifecycle.items()),
    )
    if summary.report_html:
        log.info("report page: %s", summary.report_html)
        create_link_artifact(
            key="memlife-report",
            link=pipeline.as_link(summary.report_html),
            link_text=f"memlife {summary.mode} {summary.run_id} report",
            description="The run report page (counts, reasons, gate, trends).",
        )
    create_table_artifact(
        key="memlife-counts",
        table=[
            {"count": k, "records": v} for k, v in {**summary.lifecycle, **summary.counts}.items()
        ],
        description=f"memlife {summary.mode} {summary.run_id}: {summary.status}",
    )
    create_markdown_artifact(key="memlife-summary", markdown=pipeline.markdown_summary(summary))
    _emit(fanout.run_event(summary))
    return result
